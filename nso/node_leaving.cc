// Leaving a group without losing a request (RELIABILITY.md, "a member's own requests when it
// leaves the view"). A member's own requests are ordered FIFO per origin
// (consensus/consensus_order.h, consensus/sequencer_order.h), so those it broadcast before it
// proposed the view without itself are delivered ahead of that view change. What its clients
// send after the proposal is held here and made again from outside once the view without it is
// installed: sent as a member's, it could be ordered after the change and never be delivered.
// A member excluded while alive keeps its undelivered requests for the view it rejoins
// (Group::InstallView); its clients' requests from outside meanwhile name the last one kept as
// their predecessor (LeftView, KeptPredecessor), so that they do not overtake it.
#include <algorithm>
#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/backpressure.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {

uint64_t Node::KeptPredecessor(uint64_t nso, const std::string& group) {
  auto kept = kept_by_client_.find({nso, group});
  if (kept == kept_by_client_.end()) return 0;
  if (now_ms_ < kept->second.until_ms) return kept->second.call_id;
  kept_by_client_.erase(kept);
  return 0;
}

bool Node::MustHold(const Group* group) const {
  auto found = membership_.find(group->name());
  if (found == membership_.end()) return false;
  const GroupMembership& membership = found->second;
  // Calls held earlier are made again at the next tick: a later one waits behind them, or it
  // would overtake them (cohort-sim --stack --leaves, seed 30: re-admitted after losing its
  // servant, the node sent c233 as a member before its held c230).
  return !membership.held_while_leaving.empty() || (group->is_member() && membership.leaving());
}

bool Node::Leaving(const Group* group) const {
  if (!group->is_member()) return false;
  auto found = membership_.find(group->name());
  return found != membership_.end() && found->second.leaving();
}

void Node::ProposeLeave(Group* group) {
  GroupMembership& membership = MembershipOf(group);
  membership.leave_proposed_ms = now_ms_;
  membership.leave_proposed_view = group->view_id();
  ProposeViewChange(group, {self_}, {});
}

bool Node::LeaveDueAgain(const Group* group, const GroupMembership& membership) const {
  if (!group->HasMajority()) return false;  // it would wait for one
  // Joiners this node could not give the state to are taken out first (TickMembership): left
  // out by this node's leave, they would wait for a state nobody sends.
  if (!membership.declined.empty()) return false;
  // A proposal names the view it was made in (membership::ApplyChange): another view change
  // ordered first made it stale. Otherwise it may have been lost with its view.
  if (membership.leave_proposed_view != group->view_id()) return true;
  const uint64_t retry_ms = std::max<uint64_t>(group->config().exclude_timeout_ms, 500);
  return now_ms_ >= membership.leave_proposed_ms + retry_ms;
}

absl::Status Node::HoldWhileLeaving(Group* group, uint64_t expires_ms,
                                    std::function<void(absl::Status)> resume) {
  std::vector<GroupMembership::Held>& held = MembershipOf(group).held_while_leaving;
  if (static_cast<int64_t>(held.size()) >= limits_.max_unordered_requests) {
    return invocation::BacklogError(
        absl::StrCat("group \"", group->name(), "\": ", held.size(), " requests wait while this ",
                     "node leaves the group (limits.max_unordered_requests)"));
  }
  held.push_back({expires_ms, std::move(resume)});
  return absl::OkStatus();
}

void Node::TickLeaving(Group* group) {
  const std::string name = group->name();
  auto found = membership_.find(name);
  if (found == membership_.end()) return;
  GroupMembership& membership = found->second;
  if (!membership.held_while_leaving.empty()) {
    std::vector<GroupMembership::Held> held = std::move(membership.held_while_leaving);
    membership.held_while_leaving.clear();
    const bool leaving = Leaving(group);
    std::vector<GroupMembership::Held> waiting;
    for (GroupMembership::Held& call : held) {
      if (!leaving) {
        call.resume(absl::OkStatus());  // out (or staying after all): made again, in order
      } else if (now_ms_ >= call.expires_ms) {
        call.resume(absl::DeadlineExceededError(absl::StrCat(
            "group \"", name, "\": the call waited for this node to leave the group (a view ",
            "change not agreed within its deadline); it was not sent")));
      } else {
        waiting.push_back(std::move(call));
      }
    }
    if (!waiting.empty()) {
      // Only ended calls ran meanwhile, and they hold nothing: the waiting ones stay first.
      std::vector<GroupMembership::Held>& now_held = MembershipOf(group).held_while_leaving;
      now_held.insert(now_held.begin(), std::make_move_iterator(waiting.begin()),
                      std::make_move_iterator(waiting.end()));
    }
  }
  // LeaveGroup's proposal is proposed again until it applies, as a leave after a lost servant
  // is (TickServantLost); a node still awaiting its state proposes once the state is installed.
  auto again = membership_.find(name);
  if (again == membership_.end()) return;
  GroupMembership& now = again->second;
  if (now.joiner.left() && !now.servant_lost && group->is_member() &&
      !now.joiner.awaiting_state() && LeaveDueAgain(group, now)) {
    ProposeLeave(group);
  }
}

void Node::LeftView(Group* group) {
  auto found = membership_.find(group->name());
  const bool left = found != membership_.end() && found->second.leaving();
  const size_t undelivered = group->undelivered_count();
  if (undelivered == 0) return;
  if (!left) {
    // Sent again once it rejoins. Its clients' requests from outside meanwhile name their last
    // one kept (Request.after_call_id), so that the member ordering them waits for it
    // (invocation/outside_fifo.h) rather than order them first and make it refused as out of
    // its client's order (cohort-sim --stack --ordering sequencer, seeds 40026 and 40087).
    Log("membership")->info("group {}: excluded with {} requests of this node not yet ordered: "
                            "they are sent again once it rejoins", group->name(), undelivered);
    for (const auto& [seq, payload] : group->undelivered()) {
      wire::GroupMessage message;
      if (!message.ParseFromString(payload) || !message.has_request()) continue;
      const wire::Request& request = message.request();
      if (request.origin() != self_ || !request.caller_group().empty()) continue;
      Kept& kept = kept_by_client_[{request.client_nso(), group->name()}];
      kept.call_id = std::max(kept.call_id, request.call_id());
      kept.until_ms = now_ms_ + limits_.default_deadline_ms;
    }
    return;
  }
  // Not expected: those sent before the leave was proposed are ordered ahead of it, and later
  // ones were held (HoldWhileLeaving). Said, since their callers were told they were accepted.
  Log("membership")->warn("group {}: left with {} requests of this node not ordered: dropped",
                          group->name(), group->DropUndelivered());
}

}  // namespace cohort::nso
