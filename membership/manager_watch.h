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
// A manager reported silent and heard again was judged wrongly (it was slow, not frozen): the
// silence allowed it doubles, up to 8 x, and halves again after calm_ms without such a mistake,
// as the members' failure detector does (failure_detector.h, after Chandra and Toueg). Under a
// load that slows every member, moving calls on from member to member added to it (each
// member ordered 4 MiB again) until no member answered in time (large_payload_e2e_test in CI,
// session 60).
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
    // A mistake's raised allowance lasts this long (the group's exclusion timeout); the allowance
    // never exceeds it.
    uint64_t calm_ms = 10000;
  };
  struct Actions {
    std::vector<NodeId> probe;   // send each a probe now
    std::vector<NodeId> silent;  // found silent now (reported once; watched afresh if used again)
  };

  // Anything at all arrived from `node`.
  void Heard(NodeId node, uint64_t now_ms);
  // Every tick, with the managers in use now; the others are no longer watched.
  Actions Tick(uint64_t now_ms, const std::map<NodeId, Use>& in_use);
  // Heard() and Tick() have work: managers watched, or reported silent lately.
  bool watching() const { return !watched_.empty() || !reported_.empty() || !raised_.empty(); }
  // The factor (1, 2, 4 or 8) on `node`'s silence allowance after wrong reports.
  uint32_t allowance_factor(NodeId node) const;

 private:
  struct Watched {
    uint64_t heard_ms = 0;   // or since it came into use
    uint64_t probed_ms = 0;  // last probe sent (0: none since heard)
  };
  struct Reported {
    uint64_t at_ms = 0;
    uint64_t calm_ms = 0;
  };
  struct Raised {
    uint32_t factor = 1;
    uint64_t since_ms = 0;  // the last mistake, or the last halving
    uint64_t calm_ms = 0;
  };
  std::map<NodeId, Watched> watched_;
  std::map<NodeId, Reported> reported_;  // reported silent, until heard (or calm_ms later)
  std::map<NodeId, Raised> raised_;
  uint64_t last_tick_ms_ = 0;
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_MANAGER_WATCH_H_
