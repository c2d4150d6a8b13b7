// The caller's watch on the request managers it uses from outside a group (issue 7's failover
// target: a request manager frozen with SIGSTOP keeps its TCP stream, so a broken stream does
// not reveal it). A daemon that hosts no member of a group is in no failure detector of it
// (004 section 5 is about members), so while it has calls or one-way requests pending at a
// manager it watches that manager itself: after probe_ms without hearing anything from it, it
// sends a probe (a Heartbeat the manager's protocol thread answers at once, whatever its servant
// is doing), and after silence_ms without hearing anything the manager is reported silent: the
// caller then sends its pending work through the next member (003 section 4.1: another request
// manager), as it does when the stream breaks.
//
// Silence is counted from when the manager came into use, and a pause of this node's own ticks
// (it was frozen, or starved of CPU) restarts every count: only the watched node's silence is
// reported, not the watcher's.
//
// Pure state machine: time comes in as `now_ms`. Not thread-safe.
#ifndef COHORT_MEMBERSHIP_MANAGER_WATCH_H_
#define COHORT_MEMBERSHIP_MANAGER_WATCH_H_

#include <cstdint>
#include <map>
#include <vector>

namespace cohort::membership {

using NodeId = uint32_t;

class ManagerWatch {
 public:
  struct Use {
    uint64_t probe_ms = 25;    // probe once silent this long, and again every probe_ms
    uint64_t silence_ms = 100;  // report silent once nothing was heard for this long
  };
  struct Actions {
    std::vector<NodeId> probe;   // send each a probe now
    std::vector<NodeId> silent;  // found silent now (reported once; watched afresh if used again)
  };

  // Anything at all arrived from `node`.
  void Heard(NodeId node, uint64_t now_ms) {
    auto it = watched_.find(node);
    if (it != watched_.end()) it->second.heard_ms = now_ms;
  }
  // Every tick, with the managers in use now; the others are no longer watched.
  Actions Tick(uint64_t now_ms, const std::map<NodeId, Use>& in_use);
  bool watching() const { return !watched_.empty(); }

 private:
  struct Watched {
    uint64_t heard_ms = 0;   // or since it came into use
    uint64_t probed_ms = 0;  // last probe sent (0: none since heard)
  };
  std::map<NodeId, Watched> watched_;
  uint64_t last_tick_ms_ = 0;
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_MANAGER_WATCH_H_
