// Node: durable groups (GroupConfig::durable). Their servants keep the object's state on disk
// with its position in the group's order (Servant::KeepStateIn, invocation/kept_state.h). A
// restarted daemon (incarnation_file) orders nothing in its configured view of such a group and
// gives no state there (Group::durable_claim): either a member that kept the group's state in
// memory re-adds it with that state (the usual restart path, node_restarts.cc), or every member
// restarted. Then each tells the others, in that view, the position its servant kept
// (KEPT_STATE), and the member that kept the most advanced state (ties: the lowest id) has its
// servant take it back and re-founds the group from it: it installs the next view by itself,
// re-adding every other member with that state, as TryRefound does for a survivor. Nothing was
// delivered meanwhile, and every member's kept state is a prefix of the group's one history
// (total order; each written before its delivery is answered), so the group resumes from the
// longest prefix any member kept. Beyond the fault model of the papers (RELIABILITY.md "Fault
// model": a majority failing at once), which start such a group afresh.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "invocation/kept_calls.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {

bool Node::Recovering(Group* group) {
  if (!group->config().durable) return false;
  auto found = membership_.find(group->name());
  if (found == membership_.end() || !found->second.kept_states ||
      servants_.count(found->second.kept_states->servant) == 0) {
    return false;
  }
  return group->durable_claim() || found->second.joiner.awaiting_state();
}

void Node::NoteKeptState(Group* group, uint64_t servant, const ServantKeptState& kept) {
  if (!group->config().durable) return;
  GroupMembership& membership = MembershipOf(group);
  // What this process's servant kept counts while the process holds none of the group's state:
  // restarted (the claim), or awaiting a state (which may never come: its provider died).
  if (!group->durable_claim() && !membership.joiner.awaiting_state()) return;
  if (!membership.kept_states) membership.kept_states = std::make_unique<GroupMembership::KeptStates>();
  GroupMembership::KeptStates& states = *membership.kept_states;
  if (states.servant != 0 && servants_.count(states.servant) > 0) return;  // the first one's
  states.servant = servant;
  states.kept = kept;
  kept_restores_.erase(states.take_back.delivery);  // an earlier servant's take-back, if any
  states.take_back = {};
  states.sent_ms = 0;  // tell the others now
  if (!kept.keeps) {
    Log("membership")->warn("group {} is durable but servant {} keeps no state on disk "
                            "(Servant::KeepStateIn): if the group resumes from this member, it "
                            "resumes from nothing", group->name(), servant);
  }
  Log("membership")->info("group {}: servant {} kept the state at position {}: waiting for the "
                          "group's state, or for every member to say what it kept",
                          group->name(), servant, kept.position);
}

void Node::TickDurable(Group* group) {
  if (!group->config().durable) return;
  auto found = membership_.find(group->name());
  if (found == membership_.end() || !found->second.kept_states) return;
  if (!Recovering(group)) {
    // The group's state came (or this process re-founded the group from its kept state), or the
    // servant went (a new one registers with what it finds on disk).
    kept_restores_.erase(found->second.kept_states->take_back.delivery);
    found->second.kept_states.reset();
    return;
  }
  GroupMembership::KeptStates& states = *found->second.kept_states;
  const uint64_t every_ms = std::max<int64_t>(group->config().suspect_timeout_ms, 20);
  if (states.sent_ms != 0 && now_ms_ < states.sent_ms + every_ms) return;
  states.sent_ms = now_ms_;
  // Repeated while it lasts: a message may be lost, a member may restart again. A claimant's
  // envelopes say it restarted (previous_incarnation), an awaiting one's that it awaits a state.
  for (NodeId member : group->members()) {
    if (member == self_) continue;
    wire::Envelope envelope;
    envelope.mutable_membership()->set_kind(wire::MembershipMessage::KEPT_STATE);
    envelope.mutable_membership()->set_view_id(group->view_id());
    envelope.mutable_membership()->set_delivered(states.kept.position);
    envelope.mutable_membership()->set_kept_view(states.kept.view);
    group->SendTo(member, std::move(envelope));
  }
  TryRecover(group);
}

void Node::OnKeptState(Group* group, NodeId from, const wire::Envelope& envelope) {
  // Only from a member that holds none of the group's state either: a restarted process (its
  // configured view's claim) or one awaiting a state.
  if (!Recovering(group) || !group->IsMember(from) || envelope.incarnation() == 0 ||
      (envelope.previous_incarnation() == 0 && !envelope.awaiting_state())) {
    return;
  }
  auto& offer = MembershipOf(group).kept_states->offers[from];
  if (envelope.incarnation() < offer.process) return;  // an earlier process's, late
  offer = {envelope.incarnation(), envelope.membership().delivered(),
           envelope.membership().kept_view()};
  TryRecover(group);
}

bool Node::TryRecover(Group* group) {
  if (!Recovering(group)) return false;
  GroupMembership& membership = MembershipOf(group);
  GroupMembership::KeptStates& states = *membership.kept_states;
  NodeId best = self_;
  uint64_t most = states.kept.position;
  uint64_t latest_view = states.kept.view;  // the re-founded view goes above every kept one
  std::vector<std::string> said{absl::StrCat(self_, ":", most)};
  std::vector<NodeId> others;
  std::vector<uint64_t> processes;  // which process of each is re-added
  for (NodeId member : group->members()) {
    if (member == self_) continue;
    auto offer = states.offers.find(member);
    // Every other member must hold none of the group's state: one that does (a survivor) re-adds
    // the others with it instead (node_restarts.cc), or may come back.
    if (offer == states.offers.end()) return false;
    const uint64_t position = offer->second.position;
    said.push_back(absl::StrCat(member, ":", position));
    others.push_back(member);
    processes.push_back(offer->second.process);
    latest_view = std::max(latest_view, offer->second.view);
    if (position > most || (position == most && member < best)) {
      best = member;
      most = position;
    }
  }
  if (best != self_) return false;  // that member re-founds the group: its view comes
  const std::string& name = group->name();
  GroupMembership::KeptStates::TakeBack& take_back = states.take_back;
  if (take_back.failed) return false;
  if (states.kept.position > 0 && !take_back.cache) {
    // First its servant takes the kept state back and gives the calls kept with it, which go into
    // the reply cache before anything is ordered: a call resent across the power cut is then
    // answered as it was, not executed again (invocation/kept_calls.h). AnswerRestore goes on.
    if (take_back.delivery != 0) return true;
    Log("membership")->warn("group {}: no member holds the group's state but on disk; the states "
                            "their servants kept are at positions [{}] (node:position): this "
                            "member's is the most advanced: its servant takes it back",
                            name, absl::StrJoin(said, ", "));
    take_back.delivery = next_delivery_++;
    kept_restores_[take_back.delivery] = name;
    ServantDelivery restore{take_back.delivery, name, kRestoreKeptMethod, "", false,
                            group->view_id(), most};
    servants_.at(states.servant).sink(std::move(restore));
    return true;
  }
  const uint64_t to_view =
      std::max({group->view_id(), group->highest_view_named(), latest_view}) + 1;
  Log("membership")->warn("group {}: re-founded in view {} from the state this member's servant "
                          "kept at position {} (kept: [{}], node:position)",
                          name, to_view, most, absl::StrJoin(said, ", "));
  delivered_seq_[name] = most;  // the group's order goes on from the kept state's position
  if (take_back.cache) reply_caches_[name] = *std::move(take_back.cache);
  membership.kept_states.reset();
  if (membership.joiner.awaiting_state()) {
    // Its provider died before giving the state of the view it re-founded: what was ordered in
    // that view waits for a state that will not come, and goes with it.
    membership.joiner.StateInstalled();
    group->SetAwaitingState(false);
    membership.buffered.clear();
    membership.buffered_views.clear();
  }
  if (others.empty()) {  // a group of one: nobody to give the state to
    // A view of its own (ids only grow), in which what its clients sent meanwhile is ordered.
    consensus::Deliveries held;
    group->InstallView(to_view, {self_}, &held);
    group->NoteRecoveredFromKept();
    QueueViewMark(group);  // its servant, back to the kept state, is in the view again
    DeliverAll(group, std::move(held));
    return true;
  }
  group->ClaimAsRestarted(0);  // this process now holds the group's state: it may give it
  if (InstallRefoundedView(group, others, processes, to_view, /*awaits_readded=*/true)) {
    group->NoteRecoveredFromKept();
  }
  return true;
}

bool Node::AnswerRestore(uint64_t servant, uint64_t delivery, const absl::Status& status,
                         const std::string& payload) {
  auto restore = kept_restores_.find(delivery);
  if (restore == kept_restores_.end()) return false;
  const std::string name = restore->second;
  kept_restores_.erase(restore);
  auto group = groups_.find(name);
  if (group == groups_.end() || !Recovering(group->second.get())) return true;  // moved on
  GroupMembership::KeptStates& states = *MembershipOf(group->second.get()).kept_states;
  GroupMembership::KeptStates::TakeBack& take_back = states.take_back;
  if (take_back.delivery != delivery || states.servant != servant) return true;  // an earlier one's
  api::KeptCalls calls;
  absl::Status loaded = status;
  invocation::ReplyCache cache;
  if (loaded.ok() && !calls.ParseFromString(payload)) {
    loaded = absl::DataLossError(absl::StrCat("its answer (", payload.size(),
                                              " bytes) is not the calls kept with the state"));
  }
  if (loaded.ok()) loaded = invocation::LoadKeptCalls(calls, self_, &cache);
  if (!loaded.ok()) {
    // Not resumed from an object that could not take its state back: the group waits for a
    // servant that can (a new one registers with what it finds on disk).
    take_back.failed = true;
    Log("membership")->error("group {}: servant {} could not take back the state it kept: {}; "
                             "the group waits until a servant that can registers here",
                             name, servant, loaded.ToString());
    return true;
  }
  Log("membership")->info("group {}: servant {} took back the state kept at position {}, with {} "
                          "calls answered", name, servant, states.kept.position, calls.calls_size());
  take_back.cache = std::move(cache);
  TryRecover(group->second.get());
  return true;
}

}  // namespace cohort::nso
