// Joining a group and catching up (004 section 5; issue 4). Two pure state machines:
//
// - Joiner (the node that wants in): asks to join when it wants to be a member and is not, when
//   it is behind (it heard a newer view than its own: it was excluded, partitioned away or
//   restarted), and again when its state does not arrive in time: after the state patience, or
//   sooner when it suspects the member that owes it the state (the provider), or knows none,
//   and no chunk came for a while (the provider crashed before or while sending). Requests are
//   rate-limited.
// - Admission (a member): decides whether to answer a join request with a view change, so that
//   repeated requests of a node whose state is on its way do not re-add it again and again,
//   unless the member that owes it the state is suspected.
//
// No I/O, no clock: time comes in as now_ms; decisions come out as return values.
#ifndef COHORT_MEMBERSHIP_JOINING_H_
#define COHORT_MEMBERSHIP_JOINING_H_

#include <cstdint>
#include <map>

#include "membership/view.h"

namespace cohort::membership {

struct JoinTimeouts {
  uint64_t retry_ms = 200;        // between join requests
  uint64_t state_patience_ms = 2000;  // a joiner waits this long for its state, then asks again
};

// Timeouts from a group's failure-detector settings: a request is retried after a few suspicion
// timeouts; the state may take up to an exclusion timeout (the provider may have crashed and
// must be excluded first).
JoinTimeouts JoinTimeoutsFor(uint64_t suspect_timeout_ms, uint64_t exclude_timeout_ms);

class Joiner {
 public:
  enum class Action { kNone, kAskToJoin, kStateLateAsk };

  void SetTimeouts(JoinTimeouts timeouts) { timeouts_ = timeouts; }
  // Wanting in (JoinGroup, a servant attached) also ends a Leave.
  void set_want_member(bool want) {
    want_member_ = want;
    if (want) left_ = false;
  }
  bool want_member() const { return want_member_; }
  // Told to leave (LeaveGroup): not wanting in, and a join request already on its way may still
  // get this node added, after which it leaves again (left()).
  void Leave() {
    want_member_ = false;
    left_ = true;
  }
  bool left() const { return left_; }
  bool awaiting_state() const { return awaiting_state_; }
  uint64_t state_view() const { return state_view_; }

  // This node was told (by a chunk or NEW_VIEW) that it is in view `view_id`; its state follows,
  // from `provider` (0: not known). Until StateInstalled(), the node delivers nothing (it would
  // apply requests to no state).
  void JoinedView(uint64_t view_id, uint64_t now_ms, NodeId provider = 0);
  // A chunk of the awaited state came now (the provider is alive and sending).
  void StateProgress(uint64_t now_ms) { progress_ms_ = now_ms; }
  NodeId provider() const { return provider_; }
  void StateInstalled() { awaiting_state_ = false; }
  // A join request went out now.
  void Asked(uint64_t now_ms) { last_request_ms_ = now_ms; }
  // Starts tracking at `now_ms` a node that was not behind until now (a joiner created lazily).
  void NotBehindUntil(uint64_t now_ms) { behind_since_ms_ = now_ms; }

  // `member`: this node is in its current view; `behind`: it heard a newer view than its own;
  // `provider_suspected`: this node suspects provider() now.
  Action Tick(uint64_t now_ms, bool member, bool behind, bool provider_suspected = false);

 private:
  JoinTimeouts timeouts_;
  bool want_member_ = false;
  bool left_ = false;  // Leave() and no set_want_member(true) since
  bool awaiting_state_ = false;
  uint64_t state_view_ = 0;
  uint64_t awaiting_since_ms_ = 0;
  NodeId provider_ = 0;
  uint64_t progress_ms_ = 0;  // the last chunk of the awaited state
  uint64_t last_request_ms_ = 0;
  uint64_t behind_since_ms_ = 0;  // last time this node was not behind
};

class Admission {
 public:
  void SetTimeouts(JoinTimeouts timeouts) { timeouts_ = timeouts; }
  // A view change added `node` now, making view `view`; `provider` sends its state.
  void Added(NodeId node, NodeId provider, uint64_t now_ms, uint64_t view) {
    added_[node] = {now_ms, provider, view};
  }
  // Who owes `node` the state of view `view`: the provider of its addition, if that made `view`
  // (0: none seen, or it was added in an earlier view and got, or gave up, that view's state).
  NodeId ProviderOf(NodeId node, uint64_t view) const;
  // A view change removed `provider` (it failed, or restarted and was added again as a new
  // process): the states it owed will not come, so the nodes waiting for them are re-added at
  // their next request, not after the state patience.
  void ProviderGone(NodeId provider);
  // Should this member, in view `view`, propose a view change for a join request from `node`?
  // Not while a node added in this view waits for its state (it asks again by itself if the
  // state never comes) unless this member suspects its provider, nor while this member is still
  // sending it a state. A node added in an earlier view that asks is behind this view: it missed
  // a view change, and no state of this view is on its way to it (refound_survivors_sim_test's
  // randomised case, sequencer seed 1535: told view 5 with view 4's provider, a member waited the
  // state patience, 10 s, and a wait-for-all call timed out on it).
  bool ShouldPropose(NodeId node, bool is_member, bool sending_state, uint64_t now_ms,
                     uint64_t view, bool provider_suspected = false) const;
  // Rate limit of "you are behind" notices to a node that speaks an old view.
  bool NoticeDue(NodeId node, uint64_t now_ms);

 private:
  JoinTimeouts timeouts_;
  struct Addition {
    uint64_t at_ms = 0;
    NodeId provider = 0;
    uint64_t view = 0;  // the view the addition made
  };
  std::map<NodeId, Addition> added_;
  std::map<NodeId, uint64_t> last_notice_ms_;
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_JOINING_H_
