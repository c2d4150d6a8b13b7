// Node: group membership at run time, the glue between the pure state machines of membership/
// (views, joining, state transfer) and the Node's groups, servants and transport.
//
// Views change by ordering a ViewChange in the old view (004 section 5: the membership is agreed
// by consensus among the current view), so members that move from view v to v + 1 delivered the
// same messages in v (virtual synchrony). A joiner receives the group's state from one member
// before any delivery of its first view (membership/state_transfer.h).
#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "invocation/kept_calls.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {
namespace {

std::string Names(const std::vector<NodeId>& nodes) { return absl::StrJoin(nodes, ","); }

}  // namespace

Node::GroupMembership& Node::MembershipOf(const Group* group) {
  GroupMembership& membership = membership_[group->name()];
  membership::JoinTimeouts timeouts = membership::JoinTimeoutsFor(
      group->config().suspect_timeout_ms, group->config().exclude_timeout_ms);
  membership.joiner.SetTimeouts(timeouts);
  membership.admission.SetTimeouts(timeouts);
  return membership;
}

absl::Status Node::JoinGroup(const std::string& name) {
  absl::StatusOr<Group*> group = FindGroup(name);
  if (!group.ok()) return group.status();
  MembershipOf(*group).joiner.set_want_member(true);
  if (!(*group)->is_member()) SendJoinRequest(*group);
  return absl::OkStatus();
}

absl::Status Node::ProposeMembers(const std::string& name, const std::vector<NodeId>& members) {
  absl::StatusOr<Group*> group = FindGroup(name);
  if (!group.ok()) return group.status();
  std::vector<NodeId> remove, add;
  for (NodeId member : (*group)->members()) {
    if (std::find(members.begin(), members.end(), member) == members.end()) remove.push_back(member);
  }
  for (NodeId member : members) {
    if (!(*group)->IsMember(member)) add.push_back(member);
  }
  if (remove.empty() && add.empty()) return absl::OkStatus();
  if (!(*group)->is_member() || !(*group)->HasMajority()) {
    return absl::UnavailableError(absl::StrCat("group \"", name, "\": ", config_.node,
                                               " is no member with a majority to agree on a view"));
  }
  if (!add.empty() && !CanGiveState(*group)) {
    return absl::FailedPreconditionError(
        absl::StrCat("group \"", name, "\": no state here for the members added"));
  }
  Log("membership")->info("group {}: proposing a view without [{}] and with [{}] (peers changed)",
                          name, Names(remove), Names(add));
  ProposeViewChange(*group, remove, add);
  return absl::OkStatus();
}

std::vector<std::string> Node::GroupsNaming(const std::string& name) const {
  std::vector<std::string> naming;
  const PeerConfig* peer = FindPeer(name);
  for (const auto& [group_name, group] : groups_) {
    if (IsDaemonsOwnGroup(group_name)) continue;
    const std::vector<std::string>& configured = group->config().members;
    if (std::find(configured.begin(), configured.end(), name) != configured.end() ||
        (peer != nullptr && group->IsMember(peer->id))) {
      naming.push_back(group_name);
    }
  }
  return naming;
}

absl::Status Node::LeaveGroup(const std::string& name) {
  absl::StatusOr<Group*> group = FindGroup(name);
  if (!group.ok()) return group.status();
  if ((*group)->is_member() && (*group)->members().size() > 1 && !(*group)->HasMajority()) {
    // Refused, and nothing changes: the node does not leave later by itself (a leave accepted
    // is proposed again until it applies, node_leaving.cc).
    return absl::UnavailableError(absl::StrCat("group \"", name, "\": no majority to agree on ",
                                               "the view without ", config_.node));
  }
  MembershipOf(*group).joiner.Leave();
  if (!(*group)->is_member()) return absl::OkStatus();
  if ((*group)->members().size() == 1) {  // the last member: nobody to agree with
    consensus::Deliveries none;
    (*group)->InstallView((*group)->view_id() + 1, {}, &none);
    QueueViewMark(*group);
    Log("membership")->info("group {}: left by its last member", name);
    return absl::OkStatus();
  }
  ProposeLeave(*group);  // what this node's clients send until it is out waits (node_leaving.cc)
  return absl::OkStatus();
}

bool Node::RemoveGroup(const std::string& name, uint64_t incarnation, const std::string& why) {
  auto found = groups_.find(name);
  if (found == groups_.end() || found->second->group_incarnation() != incarnation) return false;
  // Out of the map first: what the calls' ends release (the causal barrier's held submits, see
  // SubmitInCausalOrder) finds no group, and traffic for it is dropped as for an unknown one.
  std::unique_ptr<Group> group = std::move(found->second);
  groups_.erase(found);
  removed_group_totals_.counters += group->counters();
  if (auto order = group->order_counters()) removed_group_totals_.order += *order;
  removed_group_totals_.times_behind += group->times_behind();
  const std::string gone = absl::StrCat("group \"", name, "\" ", why);
  std::vector<CallKey> calls;
  for (const auto& [key, call] : calls_) {
    if (call.group == name) calls.push_back(key);
  }
  for (const CallKey& key : calls) FinishCall(key, absl::NotFoundError(gone));
  std::vector<uint64_t> servants;
  for (const auto& [id, servant] : servants_) {
    if (servant.group == name) servants.push_back(id);
  }
  for (uint64_t id : servants) {
    ServantSink sink = std::move(servants_.at(id).sink);
    servants_.erase(id);
    ServantDelivery last;
    last.group = name;
    last.ended = gone;
    sink(std::move(last));
  }
  for (auto it = open_deliveries_.begin(); it != open_deliveries_.end();) {
    if (it->second.group != name) {
      ++it;
      continue;
    }
    open_delivery_by_call_.erase(it->second.cache_id);
    open_deliveries_.erase(it++);  // (a flat_hash_map's erase returns nothing)
  }
  for (auto it = state_requests_.begin(); it != state_requests_.end();) {
    it = it->second.group == name ? state_requests_.erase(it) : std::next(it);
  }
  for (auto it = state_senders_.begin(); it != state_senders_.end();) {
    it = it->first.first == name ? state_senders_.erase(it) : std::next(it);
  }
  for (auto it = left_managers_.begin(); it != left_managers_.end();) {
    it = it->first == name ? left_managers_.erase(it) : std::next(it);
  }
  if (auto membership = membership_.find(name); membership != membership_.end()) {
    std::vector<GroupMembership::Held> held = std::move(membership->second.held_while_leaving);
    membership_.erase(membership);
    for (GroupMembership::Held& call : held) call.resume(absl::NotFoundError(gone));
  }
  reply_caches_.erase(name);
  delivered_seq_.erase(name);
  for (auto it = kept_by_client_.begin(); it != kept_by_client_.end();) {
    it = it->first.second == name ? kept_by_client_.erase(it) : std::next(it);
  }
  preferred_manager_.erase(name);
  if (auto route = outside_routes_.find(name); route != outside_routes_.end()) {
    // One-way requests from here never to be ordered: no longer counted in flight by the
    // causal barrier (limits.max_unordered_requests).
    std::vector<uint64_t> dropped;
    for (const auto& [call_id, pending] : route->second.pending) dropped.push_back(call_id);
    outside_routes_.erase(route);
    for (uint64_t call_id : dropped) MarkOrdered(call_id);
  }
  standby_.erase(name);
  outside_fifo_.erase(name);
  Log("membership")->info("group {}: incarnation {} stopped: {} ({} call(s) ended, {} servant(s) "
                          "told)", name, incarnation, why, calls.size(), servants.size());
  group.reset();
  // The GroupConfig AddGroups kept for the group.
  added_configs_.erase(
      std::remove_if(added_configs_.begin(), added_configs_.end(),
                     [&](const std::unique_ptr<const GroupConfig>& config) {
                       return config->name == name && config->incarnation == incarnation;
                     }),
      added_configs_.end());
  return true;
}

void Node::ProposeViewChange(Group* group, std::vector<NodeId> remove, std::vector<NodeId> add,
                             std::vector<uint64_t> add_incarnations) {
  if (!group->is_member()) return;
  wire::GroupMessage message;
  wire::ViewChange* change = message.mutable_view_change();
  change->set_from_view(group->view_id());
  for (NodeId node : remove) change->add_remove(node);
  for (NodeId node : add) change->add_add(node);
  add_incarnations.resize(add.size(), 0);
  for (uint64_t incarnation : add_incarnations) change->add_add_incarnations(incarnation);
  change->set_provider(self_);
  consensus::Deliveries deliveries;
  group->BroadcastControl(message.SerializeAsString(), &deliveries);
  DeliverAll(group, std::move(deliveries));
}

bool Node::ApplyViewChange(Group* group, const wire::ViewChange& change,
                           consensus::Deliveries* next_view, uint64_t to_view,
                           bool awaits_readded) {
  membership::ViewChangeProposal proposal{change.from_view(),
                                          {change.remove().begin(), change.remove().end()},
                                          {change.add().begin(), change.add().end()},
                                          change.provider(), to_view};
  std::optional<membership::NextView> next =
      membership::ApplyChange({group->view_id(), group->members()}, proposal);
  if (!next) return false;  // stale (the view already changed) or empty
  event_log_.Note(
      "membership", spdlog::level::info, group->name(),
      absl::StrCat("view installed (removed [", Names(proposal.remove), "], added [",
                   Names(next->joiners), "])"),
      absl::StrCat("view ", next->view.id, " installed: members [", Names(next->view.members),
                   "] (removed [", Names(proposal.remove), "], added [", Names(next->joiners), "])"));
  // The state goes to the joiners from the member that proposed the change: it was up to date
  // then (a lagging member could not give it). If it fails, the joiner asks again.
  std::map<NodeId, uint64_t> added;
  for (int i = 0; i < change.add_size(); ++i) {
    added[change.add(i)] = i < change.add_incarnations_size() ? change.add_incarnations(i) : 0;
  }
  // The processes the new view counts, as Group::InstallView will take them: the state tells
  // the joiners (OnNewView).
  for (NodeId member : next->view.members) {
    auto named = added.find(member);
    next->view.incarnations.push_back(named != added.end() ? named->second
                                                           : group->MemberIncarnation(member));
  }
  GroupMembership& membership = MembershipOf(group);
  for (NodeId gone : proposal.remove) membership.admission.ProviderGone(gone);
  std::vector<NodeId> state_to;
  for (NodeId node : next->joiners) {
    if (node != self_) state_to.push_back(node);
    membership.admission.Added(node, proposal.provider, now_ms_, next->view.id);
  }
  if (proposal.provider == self_ && !state_to.empty()) {
    if (CanGiveState(group)) {
      RequestState(group, next->view, std::move(state_to));
    } else {
      Log("membership")->warn("group {}: no state here for [{}] added in view {}: taking them "
                              "out again, so that a member with the state re-adds them",
                              group->name(), Names(state_to), next->view.id);
      membership.declined = std::move(state_to);
      membership.declined_view = next->view.id;
    }
  }
  if ((membership.joiner.awaiting_state() || membership.servant_lost) &&
      std::find(next->joiners.begin(), next->joiners.end(), self_) != next->joiners.end()) {
    // Re-added while still waiting for a state (its provider crashed), or after its servant's
    // state was lost: the state of the new view comes, and holds every request of the old views.
    AwaitState(group, next->view.id, proposal.provider);
    membership.provider_process = next->view.IncarnationOf(proposal.provider);
  }
  // Wait-for-all no longer waits for removed members (issue 5).
  std::vector<CallKey> complete;
  for (auto& [key, call] : calls_) {
    if (call.group != group->name()) continue;
    for (NodeId gone : proposal.remove) {
      if (awaits_readded && added.count(gone) > 0) continue;
      call.collector.MemberGone(gone);
    }
    if (call.collector.complete()) complete.push_back(key);
  }
  group->InstallView(next->view.id, next->view.members, next_view, added);
  QueueViewMark(group);  // the servants' "$view", after the old view's deliveries
  if (!group->is_member()) LeftView(group);
  for (const CallKey& key : complete) FinishCall(key, absl::OkStatus());
  return true;
}

// ---- state transfer, provider side ------------------------------------------------------------

void Node::RequestState(Group* group, membership::View view, std::vector<NodeId> joiners) {
  uint64_t number = next_delivery_++;
  StateRequest& request = state_requests_[number];
  request.group = group->name();
  request.view = std::move(view);
  request.joiners = std::move(joiners);
  request.cache = reply_caches_[group->name()];
  request.delivered_seq = delivered_seq_[group->name()];
  uint64_t servant = 0;
  for (const auto& [id, candidate] : servants_) {
    if (candidate.group == group->name()) {
      servant = id;
      break;
    }
  }
  if (servant == 0) {
    // No servant here, so no state to give (an empty one would wipe the joiner's object): the
    // joiner asks again in time, and a member with a servant answers.
    state_requests_.erase(number);
    return;
  }
  // The servant reads its state in delivery order, right after the last delivery of the old view.
  open_deliveries_[number] = {{{0, 0, 0}, 0}, {}, group->name(), servant};
  servants_[servant].sink({number, group->name(), kGetStateMethod, "", false, group->view_id()});
}

bool Node::AnswerStateRequest(uint64_t delivery, const absl::Status& status, std::string& payload,
                              bool more) {
  auto it = state_requests_.find(delivery);
  if (it == state_requests_.end()) return false;
  StateRequest& request = it->second;
  TransferKey key{request.group, request.view.id};
  if (!status.ok()) {
    Log("membership")->error("group {}: servant could not give its state: {}", request.group,
                             status.ToString());
    state_senders_.erase(key);  // the joiner times out and asks again
    open_deliveries_.erase(delivery);
    state_requests_.erase(it);
    return true;
  }
  if (!request.started) {
    // The daemon's part, taken now: the servant answered every earlier delivery before reading
    // its state, so their replies are in the cache (003: a retried call is answered, not re-run).
    wire::GroupState meta;
    meta.set_view_id(request.view.id);
    meta.set_delivered_seq(request.delivered_seq);
    request.cache.FillAnswersFrom(reply_caches_[request.group]);
    request.cache.ToProto(&meta);
    Group* group = groups_.at(request.group).get();
    membership::JoinTimeouts timeouts = membership::JoinTimeoutsFor(
        group->config().suspect_timeout_ms, group->config().exclude_timeout_ms);
    state_senders_.erase(key);
    auto [sender, inserted] = state_senders_.emplace(
        key, membership::StateSender(request.view, request.joiners, meta.SerializeAsString(),
                                     now_ms_, timeouts.retry_ms, now_ms_ + 60000));
    request.started = true;
    request.cache = invocation::ReplyCache();  // sent: not held twice
    SendStatePieces(sender->second, request.group, sender->second.pieces());
  }
  auto sender = state_senders_.find(key);
  if (sender != state_senders_.end()) {
    size_t bytes = payload.size();
    SendStatePieces(sender->second, request.group, sender->second.Append(std::move(payload), !more));
    if (!more) {
      Log("membership")->info("group {}: state of view {} ({} + {} bytes) sent to nodes [{}]",
                              request.group, request.view.id, sender->second.meta_size(),
                              bytes, Names(request.joiners));
    }
  }
  if (!more) {
    open_deliveries_.erase(delivery);
    state_requests_.erase(it);
  }
  return true;
}

void Node::SendStatePieces(const membership::StateSender& sender, const std::string& group_name,
                           const std::vector<membership::StatePiece>& pieces) {
  Group* group = groups_.at(group_name).get();
  // Every chunk names the view and its members, so chunks may arrive in any order (the first to
  // arrive installs the view at the joiner).
  for (NodeId joiner : sender.joiners()) {
    for (const membership::StatePiece& piece : pieces) {
      wire::Envelope chunk;
      wire::MembershipMessage* message = chunk.mutable_membership();
      message->set_kind(wire::MembershipMessage::STATE_CHUNK);
      message->set_view_id(sender.view().id);
      for (NodeId member : sender.view().members) message->add_members(member);
      for (uint64_t process : sender.view().incarnations) message->add_member_incarnations(process);
      message->set_chunk_offset(piece.offset);
      message->set_meta_size(sender.meta_size());
      message->set_state(*piece.bytes);
      message->set_last_chunk(piece.last);
      group->SendTo(joiner, std::move(chunk));
    }
  }
}

void Node::ResendStates(Group* group) {
  // Resent until the joiner acknowledges it (STATE_ACK) or leaves the view: chunks may be lost,
  // and the transfer must not depend on a new view change (which needs a majority). The view may
  // have moved on meanwhile: a joiner without its state delivers nothing, not even the next view
  // change, so it stays behind, unable to help agree on anything, until its state arrives.
  for (auto it = state_senders_.begin(); it != state_senders_.end();) {
    membership::StateSender& sender = it->second;
    if (it->first.first != group->name()) {
      ++it;
      continue;
    }
    std::vector<NodeId> heard;
    for (NodeId joiner : sender.joiners()) {
      if (!group->IsMember(joiner)) heard.push_back(joiner);
    }
    for (NodeId joiner : heard) sender.JoinerDone(joiner);
    if (sender.done(now_ms_)) {
      it = state_senders_.erase(it);
      continue;
    }
    if (sender.ResendDue(now_ms_)) SendStatePieces(sender, group->name(), sender.pieces());
    ++it;
  }
}

// ---- joining and state transfer, joiner side ---------------------------------------------------

void Node::OnMembership(Group* group, NodeId from, const wire::Envelope& envelope) {
  const wire::MembershipMessage& message = envelope.membership();
  switch (message.kind()) {
    case wire::MembershipMessage::JOIN_REQUEST:
      return OnJoinRequest(group, from, envelope.incarnation(), message);
    case wire::MembershipMessage::NEW_VIEW: return OnNewView(group, from, message);
    case wire::MembershipMessage::STATE_CHUNK: return OnStateChunk(group, from, message);
    case wire::MembershipMessage::VIEW_NOTICE:
      // A later view: noted by Group::NoteView. Another process of this node counted in this
      // view: this one restarted, and is no member of it.
      if (message.counted_incarnation() != 0 && message.counted_incarnation() != incarnation_ &&
          envelope.view_id() == group->view_id() && group->IsMember(from)) {
        if (!group->NotCounted()) {
          Log("membership")->info("group {}: node {} counts an earlier process of this node in "
                                  "view {}: asking to join", group->name(), from,
                                  group->view_id());
        }
        group->NoteNotCounted();
      }
      return;
    case wire::MembershipMessage::SURVIVOR:
    case wire::MembershipMessage::REFOUND: return OnSurvivor(group, from, envelope);
    case wire::MembershipMessage::KEPT_STATE: return OnKeptState(group, from, envelope);
    case wire::MembershipMessage::STATE_ACK: {
      auto sender = state_senders_.find({group->name(), message.view_id()});
      if (sender != state_senders_.end()) sender->second.JoinerDone(from);
      return;
    }
    default:
      Log("membership")->warn("group {}: membership message of kind {} from node {} ignored",
                              group->name(), static_cast<int>(message.kind()), from);
  }
}

void Node::OnJoinRequest(Group* group, NodeId from, uint64_t from_incarnation,
                         const wire::MembershipMessage& message) {
  if (!group->is_member()) return;
  if (group->IsMember(from) && message.view_id() < group->view_id() && from_incarnation != 0 &&
      group->MemberIncarnation(from) == from_incarnation) {
    // It is in this view and does not know it (the state that would have told it never came:
    // its provider crashed). Told, it takes part in agreeing on the next views while it waits,
    // so the view can still change (and re-add it with a state) when the rest is no majority.
    // Only the process that is the member (Group::MemberIncarnation), not a restart of it, nor
    // one this node cannot tell: a restarted process remembers nothing of the view its earlier
    // one took part in (its votes; its broadcasts, delivered under the sequence numbers the new
    // one uses again, which it took for its own until Group::Delivered compared the payloads.
    // cohort-sim --stack --suspect-ms 5 --ordering sequencer --nodes 7 --streams-break, seed
    // 162090: a request from outside ordered before its predecessor, 5 calls refused while
    // their caller waited). It is removed and added again below, with the state.
    wire::Envelope view;
    view.mutable_membership()->set_kind(wire::MembershipMessage::NEW_VIEW);
    view.mutable_membership()->set_view_id(group->view_id());
    for (NodeId member : group->members()) {
      view.mutable_membership()->add_members(member);
      view.mutable_membership()->add_member_incarnations(group->MemberIncarnation(member));
    }
    view.mutable_membership()->set_provider(
        MembershipOf(group).admission.ProviderOf(from, group->view_id()));
    group->SendTo(from, std::move(view));
  }
  // A member whose servant holds the state answers (it will send the state); several may
  // propose, and only the first change applies (the others name a view that has passed).
  if (!CanGiveState(group)) {
    Log("membership")->debug("group {}: join request of node {}: no state here to give",
                             group->name(), from);
    return;
  }
  // Another process than the member the view counts: the member restarted, and a state on the
  // way is for its earlier process, which the new one ignores (OnNewView). It is re-added now
  // rather than after the state patience (the exclusion timeout).
  const uint64_t member_process = group->IsMember(from) ? group->MemberIncarnation(from) : 0;
  const bool restarted =
      from_incarnation != 0 && member_process != 0 && member_process != from_incarnation;
  if (restarted && RefoundIfLast(group, from, from_incarnation)) return;
  bool sending = false;  // the state of a view that counts `from`'s current process
  for (const auto& [key, sender] : state_senders_) {
    if (!restarted && key.first == group->name() && sender.joiners().count(from)) sending = true;
  }
  const membership::Admission& admission = MembershipOf(group).admission;
  if (!admission.ShouldPropose(
          from, group->IsMember(from) && !restarted, sending, now_ms_, group->view_id(),
          ProviderSuspected(group, admission.ProviderOf(from, group->view_id())))) {
    Log("membership")->debug("group {}: join request of node {}: its state is on the way",
                             group->name(), from);
    return;
  }
  // A member that is behind (it missed view changes, or restarted) is removed and added again
  // in one view change, and gets the state: this works whatever the order protocol can still
  // tell a lagging member about the old view.
  Log("membership")->info("group {}: node {} asks to join (it is in view {}, this is view {})",
                          group->name(), from, message.view_id(), group->view_id());
  std::vector<NodeId> remove;
  if (group->IsMember(from)) remove.push_back(from);
  ProposeViewChange(group, remove, {from}, {from_incarnation});
}

void Node::OnNewView(Group* group, NodeId from, const wire::MembershipMessage& message) {
  if (message.view_id() <= group->view_id()) return;  // already there (it delivered the change)
  std::vector<NodeId> members(message.members().begin(), message.members().end());
  if (std::find(members.begin(), members.end(), self_) == members.end()) return;
  std::map<NodeId, uint64_t> told;  // the process of each member the view counts
  for (int i = 0; i < message.members_size() && i < message.member_incarnations_size(); ++i) {
    const uint64_t process = message.member_incarnations(i);
    if (process != 0) told[message.members(i)] = process;
  }
  if (auto own = told.find(self_); own != told.end() && own->second != incarnation_) {
    // Meant for an earlier process of this node (a state resent, a NEW_VIEW in flight across the
    // restart): that process is the member, not this one, which remembers nothing of it. The
    // members notice the restart and add this process again with a state of its own.
    Log("membership")->info("group {}: view {} from node {} counts an earlier process of this "
                            "node (incarnation {}): ignored",
                            group->name(), message.view_id(), from, own->second);
    return;  // a state chunk is acknowledged (OnStateChunk): this process needs none of it
  }
  // A chunk comes from the provider itself; a NEW_VIEW names it (0 when its sender did not see
  // the addition).
  const NodeId provider =
      message.kind() == wire::MembershipMessage::STATE_CHUNK ? from : message.provider();
  Log("membership")->info("group {}: joined view {} (members [{}]); awaiting state from node {}",
                          group->name(), message.view_id(), Names(members), provider);
  AwaitState(group, message.view_id(), provider);
  GroupMembership& membership = MembershipOf(group);
  consensus::Deliveries deliveries;
  group->InstallView(message.view_id(), std::move(members), &deliveries, told, /*adopted=*/true);
  QueueViewMark(group);  // held with the requests: the servant gets it after the state
  membership.provider_process = provider != 0 ? group->MemberIncarnation(provider) : 0;
  DeliverAll(group, std::move(deliveries));  // buffered until the state is installed
}

void Node::OnStateChunk(Group* group, NodeId from, const wire::MembershipMessage& message) {
  OnNewView(group, from, message);  // the first chunk to arrive installs the view
  GroupMembership& membership = MembershipOf(group);
  if (!membership.joiner.awaiting_state() || message.view_id() != membership.joiner.state_view()) {
    // Installed already, or this node has moved past that view: the provider may stop.
    return SendStateAck(group, from, message.view_id());
  }
  membership::StateReceiver::Output out;
  absl::Status added = membership.receiver.Add(message.view_id(), message.chunk_offset(),
                                               message.state(), message.last_chunk(),
                                               message.meta_size(), &out);
  if (!added.ok()) {
    Log("membership")->warn("group {}: state chunk from node {} dropped: {}", group->name(), from,
                            added.ToString());
    return;
  }
  if (out.meta) {
    wire::GroupState meta;
    if (!meta.ParseFromString(*out.meta)) {
      // Cannot happen with a correct provider; the joiner gives up in time and asks again.
      Log("membership")->error("group {}: undecodable state for view {} from node {}",
                               group->name(), message.view_id(), from);
      membership.receiver.Begin(message.view_id());
      return;
    }
    reply_caches_[group->name()].FromProto(meta);
    delivered_seq_[group->name()] = meta.delivered_seq();
    Log("membership")->info("group {}: state of view {}: {} cached replies, {} deliveries so far",
                            group->name(), message.view_id(), meta.replies_size(),
                            meta.delivered_seq());
  }
  membership.joiner.StateProgress(now_ms_);
  GiveStateToServant(group, std::move(out.servant));
  if (!out.complete) return;
  Log("membership")->info("group {}: state of view {} installed", group->name(),
                          message.view_id());
  SendStateAck(group, from, message.view_id());
  membership.joiner.StateInstalled();
  group->SetAwaitingState(false);
  std::vector<wire::Request> buffered = std::move(membership.buffered);
  membership.buffered.clear();
  PendingViews views = std::move(membership.buffered_views);
  membership.buffered_views.clear();
  ReplayWithViews(group, std::move(buffered), std::move(views),
                  [&](const wire::Request& request) { ApplyRequest(group, request); });
  if (membership.joiner.left()) {
    // Added by a join request sent before LeaveGroup (peers_reload_e2e_test saw it: the node was
    // out of the view for a moment when LeaveGroup came, its request to rejoin already sent).
    Log("membership")->info("group {}: added in view {} after LeaveGroup (a join request was on "
                            "its way): leaving again", group->name(), message.view_id());
    ProposeLeave(group);
  }
}

void Node::AwaitState(Group* group, uint64_t view_id, NodeId provider) {
  GroupMembership& membership = MembershipOf(group);
  membership.joiner.JoinedView(view_id, now_ms_, provider);
  group->SetAwaitingState(true);
  membership.receiver.Begin(view_id);
  membership.buffered.clear();
  // What the servants had is replaced by the state: its view follows it (QueueViewMark).
  membership.buffered_views.clear();
  membership.no_servant.clear();
  membership.no_servant_views.clear();
  membership.servant_view.reset();
}

bool Node::ProviderGone(Group* group) {
  // The member that owes this node its state left the view, or the view counts another process
  // of it (it restarted and was added again): that state will never come.
  const GroupMembership& membership = MembershipOf(group);
  const NodeId provider = membership.joiner.provider();
  return membership.joiner.awaiting_state() && provider != 0 && provider != self_ &&
         membership.provider_process != 0 &&
         group->MemberIncarnation(provider) != membership.provider_process;
}

bool Node::ProviderSuspected(const Group* group, NodeId provider) const {
  return provider != 0 && provider != self_ && group->IsMember(provider) &&
         group->suspected(provider);
}

void Node::SendStateAck(Group* group, NodeId provider, uint64_t view_id) {
  wire::Envelope ack;
  ack.mutable_membership()->set_kind(wire::MembershipMessage::STATE_ACK);
  ack.mutable_membership()->set_view_id(view_id);
  group->SendTo(provider, std::move(ack));
}

void Node::GiveStateToServant(Group* group,
                              std::vector<membership::StateReceiver::ServantChunk> chunks) {
  if (chunks.empty()) return;
  GroupMembership& membership = membership_[group->name()];
  // The state's position in the group's order (a durable servant keeps it with the state, and
  // the calls it answered: invocation/kept_calls.h).
  const uint64_t position = delivered_seq_[group->name()];
  for (auto& [id, servant] : servants_) {
    if (servant.group != group->name()) continue;
    for (auto& chunk : chunks) {
      ServantDelivery delivery{0, group->name(), kSetStateMethod, std::move(chunk.bytes), true,
                               group->view_id(), position};
      delivery.state_offset = chunk.offset;
      delivery.state_last = chunk.last;
      if (chunk.last && group->config().durable) {
        auto calls = std::make_shared<api::KeptCalls>();
        invocation::ToKeptCalls(reply_caches_[group->name()], calls.get());
        delivery.kept_calls = std::move(calls);
      }
      servant.sink(std::move(delivery));
    }
    membership.state_partly_given = !chunks.back().last;
    return;
  }
  // No servant yet: kept, in order, for the first to attach (a new state replaces a partial one).
  if (chunks.front().offset == 0) {
    membership.pending_servant_state.clear();
    membership.state_broken = false;
  }
  // The rest of a state whose start went to a servant now gone (found by cohort-sim --stack
  // --stuck-servants, seed 15: a new servant got a state from offset 140).
  if (membership.state_broken) return;
  for (auto& chunk : chunks) membership.pending_servant_state.push_back(std::move(chunk));
}

void Node::SendJoinRequest(Group* group) {
  GroupMembership& membership = MembershipOf(group);
  membership.joiner.Asked(now_ms_);
  // To every daemon of the cluster: this node does not know the members of the views it missed.
  if (const uint64_t asks = membership.join_asks.Count(now_ms_); asks > 0) {
    event_log_.Note("membership", spdlog::level::info, group->name(), "asking to join",
                    absl::StrCat("asking to join (this node is in view ", group->view_id(),
                                 ", heard view ", group->highest_view_heard(), ")",
                                 asks > 1 ? absl::StrCat("; ", asks, " asks since the last such line")
                                          : std::string()));
  }
  for (const PeerConfig& peer : peers_) {
    if (peer.id == self_) continue;
    wire::Envelope envelope;
    envelope.mutable_membership()->set_kind(wire::MembershipMessage::JOIN_REQUEST);
    envelope.mutable_membership()->set_view_id(group->view_id());
    group->SendTo(peer.id, std::move(envelope));
  }
}

void Node::SendViewNotice(Group* group, NodeId to) {
  if (!MembershipOf(group).admission.NoticeDue(to, now_ms_)) return;
  wire::Envelope envelope;
  envelope.mutable_membership()->set_kind(wire::MembershipMessage::VIEW_NOTICE);
  group->SendTo(to, std::move(envelope));
}

void Node::TickMembership(Group* group) {
  ResendStates(group);
  const bool behind = group->Behind();
  if (membership_.count(group->name()) == 0) {
    // No entry yet: no servant ever wanted in, nothing was delivered; a joiner in that state does
    // nothing unless the node is behind. Idle groups get no entry (memory, issue 7); one made now
    // starts as a joiner that was not behind until now.
    if (!behind) return;
    MembershipOf(group).joiner.NotBehindUntil(now_ms_);
  }
  GroupMembership& membership = MembershipOf(group);
  if (!membership.declined.empty()) {
    // (Proposed here, not while delivering the view change that added them.)
    std::vector<NodeId> remove;
    if (group->view_id() == membership.declined_view && group->is_member() &&
        group->HasMajority()) {
      for (NodeId joiner : membership.declined) {
        if (group->IsMember(joiner)) remove.push_back(joiner);
      }
    }
    membership.declined.clear();
    if (!remove.empty()) ProposeViewChange(group, remove, {});
  }
  const NodeId provider = membership.joiner.provider();
  switch (membership.joiner.Tick(now_ms_, group->is_member(), behind,
                                 ProviderGone(group) || ProviderSuspected(group, provider))) {
    case membership::Joiner::Action::kNone: return;
    case membership::Joiner::Action::kStateLateAsk:
      Log("membership")->warn("group {}: no state for view {} yet: asking to be re-added",
                              group->name(), membership.joiner.state_view());
      return SendJoinRequest(group);
    case membership::Joiner::Action::kAskToJoin: return SendJoinRequest(group);
  }
}

}  // namespace cohort::nso
