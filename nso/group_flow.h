// Flow control from the slowest servant back to the group's senders: a member whose servants
// fall behind the group's deliveries asks the others to wait, and new requests wait at every
// member (Group::Broadcast) until it has caught up.
//
// Why: the client backlog (limits.max_unordered_requests, invocation/backpressure.h) stops at the
// ordering, so a servant slower than its group delivered more and more until its daemon cut it
// off (64 MiB unread on the local fast path) and the replica left the group and rejoined with
// the state. A group of replicas runs at the pace of its slowest one anyway (every member
// executes every request); with the hold, that pace reaches the callers as backpressure (the
// requests held here count against their clients' backlogs until ordered), as JGroups' flow
// control blocks a sender out of credits.
//
// Rules:
// - a member is behind from the moment its servants have limits.servant_backlog_bytes unread
//   (the largest backlog among its servants still reading) until they are down to half of it
//   (hysteresis: no flapping at the mark);
// - it says so in a heartbeat (wire.proto Heartbeat.servants_behind) to every other member at
//   each change, and again every kRefreshMs while behind; every heartbeat carries the flag;
// - another member counts it behind for kExpiryMs after the last such word: a member that
//   crashes or is cut off while behind does not hold the group for longer than that;
// - a servant that reads nothing for limits.servant_stall_ms does not count (the node leaves
//   it out of `unread`): a stuck servant is cut off at limits.servant_cutoff_bytes unread
//   (Node::CutOffServant), instead of stopping the group.
//
// Pure state: time comes in as arguments (no clock, no thread).
#ifndef COHORT_NSO_GROUP_FLOW_H_
#define COHORT_NSO_GROUP_FLOW_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "nso/transport.h"

namespace cohort::nso {

class GroupFlow {
 public:
  static constexpr uint64_t kRefreshMs = 100;
  static constexpr uint64_t kExpiryMs = 400;

  // `backlog_bytes`: limits.servant_backlog_bytes (0: flow control off, never behind).
  explicit GroupFlow(uint64_t backlog_bytes = 0) : backlog_bytes_(backlog_bytes) {}

  // This member's servants have `unread` bytes handed to them and not yet read. Returns the flag
  // to tell the other members when it is due: at a change, and every kRefreshMs while behind.
  std::optional<bool> Observe(uint64_t unread, uint64_t now_ms);
  // `peer` said whether its servants are behind (any heartbeat of it).
  void Heard(NodeId peer, bool behind, uint64_t now_ms);
  // New requests wait: this member's servants are behind, or another member said its are
  // within kExpiryMs.
  bool Holding(uint64_t now_ms) const;
  // The members other than this one that hold the group now.
  std::vector<NodeId> PeersBehind(uint64_t now_ms) const;
  // A new view: what members outside it said no longer counts.
  void Retain(const std::vector<NodeId>& members);

  bool behind() const { return behind_; }
  // Times this member's servants fell behind.
  uint64_t times_behind() const { return times_behind_; }

 private:
  uint64_t backlog_bytes_;
  bool behind_ = false;
  uint64_t told_at_ms_ = 0;
  uint64_t times_behind_ = 0;
  std::map<NodeId, uint64_t> peer_until_ms_;  // a peer behind, until then
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_FLOW_H_
