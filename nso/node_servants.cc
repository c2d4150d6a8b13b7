// Servants attached to an NSO of this node: registration, loss, and the view changes they cause.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {

absl::StatusOr<uint64_t> Node::RegisterServant(uint64_t nso, const std::string& group_name,
                                               ServantSink sink, ServantKeptState kept,
                                               bool view_events) {
  if (absl::Status status = CheckNso(nso); !status.ok()) return status;
  absl::StatusOr<Group*> group = FindGroup(group_name);
  if (!group.ok()) return group.status();
  ReplaceServants(group_name);
  uint64_t id = next_servant_++;
  servants_[id] = {nso, group_name, std::move(sink), view_events};
  Log("api")->info("group {}: servant {} (NSO {}) attached", group_name, id, nso);
  GroupMembership& membership = MembershipOf(*group);
  membership.joiner.set_want_member(true);
  NoteKeptState(*group, id, kept);
  // State that arrived before any servant did, in order.
  std::vector<membership::StateReceiver::ServantChunk> state =
      std::move(membership.pending_servant_state);
  membership.pending_servant_state.clear();
  GiveStateToServant(*group, std::move(state));
  // The view its first deliveries belong to (node_views.cc), unless the object is not the
  // group's yet: a state or a kept state's take-back comes first, and its view after it.
  if (view_events && (*group)->is_member() && !membership.joiner.awaiting_state() &&
      !membership.servant_lost && !(*group)->durable_claim()) {
    SendViewTo(*group, servants_[id],
               membership.servant_view ? *membership.servant_view : CurrentViewMark(*group));
  }
  // Requests ordered while no servant was here, in order, after the state, with their views.
  std::vector<wire::Request> waiting = std::move(membership.no_servant);
  membership.no_servant.clear();
  PendingViews views = std::move(membership.no_servant_views);
  membership.no_servant_views.clear();
  ReplayWithViews(*group, std::move(waiting), std::move(views),
                  [&](const wire::Request& request) { DeliverRequest(*group, request); });
  if (membership.no_servant_overflow) {
    membership.no_servant_overflow = false;
    Log("membership")->warn("group {}: requests were dropped while no servant was attached: "
                            "rejoining to get the state", group_name);
    SendJoinRequest(*group);
  }
  if (membership.servant_lost) {
    Log("membership")->info("group {}: servant {} attached while this daemon leaves the group "
                            "(its previous servant's state is gone): it rejoins with state "
                            "transfer once out", group_name, id);
  } else if (!(*group)->is_member()) {
    Log("membership")->info("group {}: not a member of view {}: asking to join", group_name,
                            (*group)->view_id());
    SendJoinRequest(*group);
  }
  return id;
}

// One servant per group per daemon: invocations go to one servant (DeliverInvocation), so a second
// one would see only multicasts and, once the first went, take over from an object that missed
// the invocations (a restarted servant process registering before its predecessor's stream has
// ended: a frozen one, or a link not yet found broken). A servant registering replaces the one
// attached: its stream ends ABORTED (not UNAVAILABLE: a replaced servant does not register
// again), and the daemon, the replica's state gone with it, leaves the group and rejoins with
// the state for the new one (OnServantLost).
void Node::ReplaceServants(const std::string& group_name) {
  std::vector<uint64_t> replaced;
  for (const auto& [id, servant] : servants_) {
    if (servant.group == group_name) replaced.push_back(id);
  }
  for (uint64_t old : replaced) {
    Log("api")->warn("group {}: servant {} replaced by a servant registering now (one servant per "
                     "group per daemon): its stream ends", group_name, old);
    EndServant(old, absl::AbortedError(absl::StrCat("replaced by a newer servant of group \"",
                                                    group_name, "\" at ", config_.node)));
  }
}

void Node::EndServant(uint64_t servant, absl::Status why) {
  auto it = servants_.find(servant);
  if (it == servants_.end()) return;
  EndHook on_end = std::move(it->second.on_end);
  UnregisterServant(servant);
  if (on_end) on_end(std::move(why));
}

void Node::SetServantHooks(uint64_t servant, BacklogProbe probe, EndHook on_end) {
  auto it = servants_.find(servant);
  if (it == servants_.end()) return;
  it->second.backlog = std::move(probe);
  it->second.on_end = std::move(on_end);
}

void Node::TickFlow() {
  tick_unread_.Reset();
  std::vector<std::pair<uint64_t, uint64_t>> cut;  // (servant, its unread bytes)
  const bool flow = limits_.servant_backlog_bytes != 0;
  for (auto& [id, servant] : servants_) {
    if (!servant.backlog) continue;
    const ServantBacklog backlog = servant.backlog();
    if (backlog.unread_bytes == 0 || backlog.read_bytes != servant.read_bytes) {
      servant.read_bytes = backlog.read_bytes;
      servant.idle_since_ms = 0;
      if (servant.stuck) {
        servant.stuck = false;
        Log("group")->info("group {}: servant {} reads again", servant.group, id);
      }
    } else if (servant.idle_since_ms == 0) {
      servant.idle_since_ms = now_ms_;
    }
    const bool stalled =
        servant.idle_since_ms != 0 &&
        now_ms_ - servant.idle_since_ms >= static_cast<uint64_t>(limits_.servant_stall_ms);
    // With flow control a servant that reads is not cut off: a burst (the requests held for it,
    // released at a view change) may take it over the limit for a while.
    if (backlog.unread_bytes >= static_cast<uint64_t>(limits_.servant_cutoff_bytes) &&
        (stalled || !flow)) {
      cut.emplace_back(id, backlog.unread_bytes);
      continue;
    }
    if (!flow) continue;
    if (stalled) {
      if (!servant.stuck) {
        servant.stuck = true;
        Log("group")->warn("group {}: servant {} has read nothing for {} ms with {} bytes "
                           "unread: the group no longer waits for it (limits.servant_stall_ms)",
                           servant.group, id, now_ms_ - servant.idle_since_ms,
                           backlog.unread_bytes);
      }
      continue;
    }
    tick_unread_.Max(servant.group, backlog.unread_bytes);
  }
  for (const auto& [id, unread] : cut) CutOffServant(id, unread);
}

// What a daemon queues for a servant that does not read is bounded: at limits.servant_cutoff_bytes
// unread, once it has read nothing for limits.servant_stall_ms (with flow control off, at once),
// the servant goes as if its stream had ended (its unanswered deliveries get an error, and the
// daemon leaves the group: OnServantLost), and its stream ends UNAVAILABLE, so a servant that
// reads again registers again and rejoins with the state.
void Node::CutOffServant(uint64_t servant, uint64_t unread_bytes) {
  auto it = servants_.find(servant);
  if (it == servants_.end()) return;
  Log("api")->warn("group {}: servant {} does not read what it is sent ({} bytes unread, "
                   "limits.servant_cutoff_bytes): cut off", it->second.group, servant,
                   unread_bytes);
  ++servants_cut_off_;
  EndServant(servant, absl::UnavailableError(absl::StrCat(
                          "cut off by the daemon: the servant did not read ", unread_bytes,
                          " bytes of deliveries (limits.servant_cutoff_bytes)")));
}

void Node::UnregisterServant(uint64_t servant) {
  auto it = servants_.find(servant);
  if (it == servants_.end()) return;
  const std::string group = it->second.group;
  Log("api")->info("group {}: servant {} detached", group, servant);
  servants_.erase(it);
  // Deliveries it never answered get an error reply, so their callers do not wait in vain.
  std::vector<uint64_t> orphaned;
  for (const auto& [number, open] : open_deliveries_) {
    if (open.servant == servant) orphaned.push_back(number);
  }
  std::sort(orphaned.begin(), orphaned.end());  // answered in delivery order
  for (uint64_t number : orphaned) {
    Answer(servant, number, absl::UnavailableError("servant detached before answering"), "");
  }
  if (!AnyServantAttached(group)) OnServantLost(group);
}

// The replicated object of `group_name` at this daemon was its servant's: with the last servant
// gone, a servant attaching later has none of it. Keeping this daemon in the view and handing the
// new servant the requests ordered meanwhile would make it a replica that answers from an empty
// object (found by cohort-sim --stack with servant crashes). So the daemon leaves the group, and a
// new servant rejoins with state transfer, like a restarted daemon.
void Node::OnServantLost(const std::string& group_name) {
  absl::StatusOr<Group*> group = FindGroup(group_name);
  if (!group.ok()) return;
  GroupMembership& membership = membership_[group_name];
  membership.no_servant.clear();
  membership.no_servant_views.clear();
  membership.no_servant_overflow = false;
  membership.pending_servant_state.clear();
  if (membership.state_partly_given) {
    // A state was on its way to the servant that went: the rest of it is of no use.
    membership.state_partly_given = false;
    membership.state_broken = true;
  }
  membership.joiner.set_want_member(false);
  if (!(*group)->is_member() || (*group)->members().size() == 1) return;
  if ((*group)->durable_claim()) {
    // A restarted daemon of a durable group waiting to resume (node_durable.cc): the replica's
    // state is on disk, not in the servant that went, and nothing is ordered in this view, so a
    // leave could never be. The next servant registers with what it finds on disk.
    Log("membership")->warn("group {}: its servant detached while the group waits to resume; "
                            "the next servant to register gives what it kept", group_name);
    return;
  }
  Log("membership")->warn("group {}: its last servant detached: the replica's state is gone; "
                          "leaving the group (a servant attaching later rejoins with state "
                          "transfer)", group_name);
  membership.servant_lost = true;
  membership.leave_proposed_ms = 0;
  TickServantLost(*group);
}

void Node::TickServantLost(Group* group) {
  auto found = membership_.find(group->name());
  if (found == membership_.end() || !found->second.servant_lost) return;
  GroupMembership& membership = found->second;
  if (!group->is_member()) {
    membership.servant_lost = false;
    membership.state_broken = false;
    membership.pending_servant_state.clear();
    membership.joiner.set_want_member(AnyServantAttached(group->name()));
    Log("membership")->info("group {}: left after losing its servant{}", group->name(),
                            membership.joiner.want_member() ? "; a new servant is attached: rejoining" : "");
    return;
  }
  // Proposed again until it applies (node_leaving.cc).
  if (membership.leave_proposed_ms == 0 ? group->HasMajority() : LeaveDueAgain(group, membership)) {
    ProposeLeave(group);
  }
}

}  // namespace cohort::nso
