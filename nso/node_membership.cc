// Node: group membership at run time. Views change by ordering a ViewChange in the old view
// (004 section 5: the membership is agreed by consensus among the current view), so members that
// move from view v to v + 1 delivered the same messages in v (virtual synchrony). A joiner
// receives the group's state from one member before any delivery of its first view.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {
namespace {

constexpr size_t kStateChunkBytes = 256 * 1024;

std::string Names(const std::vector<NodeId>& nodes) { return absl::StrJoin(nodes, ","); }

}  // namespace

absl::Status Node::JoinGroup(const std::string& name) {
  absl::StatusOr<Group*> group = FindGroup(name);
  if (!group.ok()) return group.status();
  membership_[name].want_member = true;
  if (!(*group)->is_member()) SendJoinRequest(*group);
  return absl::OkStatus();
}

absl::Status Node::LeaveGroup(const std::string& name) {
  absl::StatusOr<Group*> group = FindGroup(name);
  if (!group.ok()) return group.status();
  membership_[name].want_member = false;
  if (!(*group)->is_member()) return absl::OkStatus();
  if ((*group)->members().size() == 1) {  // the last member: nobody to agree with
    std::vector<consensus::Delivery> none;
    (*group)->InstallView((*group)->view_id() + 1, {}, &none);
    Log("membership")->info("group {}: left by its last member", name);
    return absl::OkStatus();
  }
  if (!(*group)->HasMajority()) {
    return absl::UnavailableError(absl::StrCat("group \"", name, "\": no majority to agree on ",
                                               "the view without ", config_.node));
  }
  ProposeViewChange(*group, {self_}, {});
  return absl::OkStatus();
}

void Node::ProposeViewChange(Group* group, std::vector<NodeId> remove, std::vector<NodeId> add) {
  if (!group->is_member()) return;
  wire::GroupMessage message;
  wire::ViewChange* change = message.mutable_view_change();
  change->set_from_view(group->view_id());
  for (NodeId node : remove) change->add_remove(node);
  for (NodeId node : add) change->add_add(node);
  change->set_provider(self_);
  std::vector<consensus::Delivery> deliveries;
  group->Broadcast(message.SerializeAsString(), &deliveries);
  DeliverAll(group, std::move(deliveries));
}

bool Node::ApplyViewChange(Group* group, const wire::ViewChange& change,
                           std::vector<consensus::Delivery>* next_view) {
  if (change.from_view() != group->view_id()) return false;  // stale: the view already changed
  std::vector<NodeId> old_members = group->members();
  std::vector<NodeId> members;
  for (NodeId member : old_members) {
    if (std::find(change.remove().begin(), change.remove().end(), member) == change.remove().end()) {
      members.push_back(member);
    }
  }
  std::vector<NodeId> joiners(change.add().begin(), change.add().end());
  for (NodeId node : joiners) members.push_back(node);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  if (members.empty()) return false;
  uint64_t view_id = group->view_id() + 1;
  Log("membership")->info("group {}: view {} installed: members [{}] (removed [{}], added [{}])",
                          group->name(), view_id, Names(members),
                          Names({change.remove().begin(), change.remove().end()}), Names(joiners));
  // The state goes to the joiners from the member that proposed the change: it was up to date
  // then (a lagging member could not give it). If it fails, the joiner asks again.
  NodeId provider = change.provider();
  std::vector<NodeId> state_to;
  for (NodeId node : joiners) {
    if (node != self_) state_to.push_back(node);
    membership_[group->name()].added_at_ms[node] = now_ms_;
  }
  if (provider == self_ && !state_to.empty()) {
    RequestState(group, state_to);
    state_requests_.rbegin()->second.view_id = view_id;
    state_requests_.rbegin()->second.members = members;
  }
  // Wait-for-all no longer waits for removed members (issue 5).
  std::vector<CallKey> complete;
  for (auto& [key, call] : calls_) {
    if (call.group != group->name()) continue;
    for (NodeId gone : change.remove()) call.collector.MemberGone(gone);
    if (call.collector.complete()) complete.push_back(key);
  }
  group->InstallView(view_id, members, next_view);
  for (const CallKey& key : complete) FinishCall(key, absl::OkStatus());
  return true;
}

void Node::RequestState(Group* group, std::vector<NodeId> joiners) {
  uint64_t number = next_delivery_++;
  StateRequest& request = state_requests_[number];
  request.group = group->name();
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
  if (servant == 0) return;  // no servant here: the state is the reply cache alone (sent below)
  // The servant reads its state in delivery order, right after the last delivery of the old view.
  open_deliveries_[number] = {{{0, 0, 0}, 0}, {}, group->name(), servant};
  servants_[servant].sink({number, group->name(), kGetStateMethod, "", false, group->view_id()});
}

bool Node::AnswerStateRequest(uint64_t delivery, const absl::Status& status, std::string payload) {
  auto it = state_requests_.find(delivery);
  if (it == state_requests_.end()) return false;
  open_deliveries_.erase(delivery);
  StateRequest request = std::move(it->second);
  state_requests_.erase(it);
  if (!status.ok()) {
    Log("membership")->error("group {}: servant could not give its state: {}", request.group,
                             status.ToString());
    return true;  // the joiner times out and asks again
  }
  wire::GroupState state;
  state.set_view_id(request.view_id);
  state.set_delivered_seq(request.delivered_seq);
  state.set_servant_state(std::move(payload));
  request.cache.FillAnswersFrom(reply_caches_[request.group]);
  request.cache.ToProto(&state);
  SendState(request.group, request.view_id, request.members, request.joiners, state);
  return true;
}

void Node::SendState(const std::string& group_name, uint64_t view_id,
                     const std::vector<NodeId>& members, const std::vector<NodeId>& joiners,
                     const wire::GroupState& state) {
  auto bytes = std::make_shared<const std::string>(state.SerializeAsString());
  for (NodeId joiner : joiners) {
    StateTransfer& transfer = state_transfers_[joiner];
    transfer = {group_name, view_id, members, bytes, 0, now_ms_ + 60000};
    SendStateChunks(joiner, transfer);
    Log("membership")->info("group {}: state of view {} ({} bytes) sent to node {}", group_name,
                            view_id, bytes->size(), joiner);
  }
}

void Node::SendStateChunks(NodeId joiner, const StateTransfer& transfer) {
  Group* group = groups_.at(transfer.group).get();
  const std::string& bytes = *transfer.bytes;
  // Large states are streamed in chunks. Every chunk names the view and its members, so chunks
  // may arrive in any order (the first to arrive installs the view at the joiner).
  size_t offset = 0;
  do {
    wire::Envelope chunk;
    wire::MembershipMessage* piece = chunk.mutable_membership();
    piece->set_kind(wire::MembershipMessage::STATE_CHUNK);
    piece->set_view_id(transfer.view_id);
    for (NodeId member : transfer.members) piece->add_members(member);
    piece->set_chunk_offset(offset);
    piece->set_state(bytes.substr(offset, kStateChunkBytes));
    piece->set_last_chunk(offset + kStateChunkBytes >= bytes.size());
    group->SendTo(joiner, std::move(chunk));
    offset += kStateChunkBytes;
  } while (offset < bytes.size());
}

void Node::ResendStates(Group* group) {
  uint64_t resend_ms = std::max<uint64_t>(4 * group->config().suspect_timeout_ms, 200);
  for (auto it = state_transfers_.begin(); it != state_transfers_.end();) {
    StateTransfer& transfer = it->second;
    bool done = transfer.group == group->name() &&
                (group->view_id() != transfer.view_id || group->HeardInView(it->first));
    if (done || now_ms_ >= transfer.give_up_at_ms) {
      it = state_transfers_.erase(it);
      continue;
    }
    if (transfer.group == group->name() && now_ms_ >= transfer.resend_at_ms) {
      if (transfer.resend_at_ms != 0) SendStateChunks(it->first, transfer);
      transfer.resend_at_ms = now_ms_ + resend_ms;
    }
    ++it;
  }
}

void Node::OnMembership(Group* group, NodeId from, const wire::Envelope& envelope) {
  const wire::MembershipMessage& message = envelope.membership();
  switch (message.kind()) {
    case wire::MembershipMessage::JOIN_REQUEST: return OnJoinRequest(group, from, message);
    case wire::MembershipMessage::NEW_VIEW: return OnNewView(group, from, message);
    case wire::MembershipMessage::STATE_CHUNK: return OnStateChunk(group, from, message);
    case wire::MembershipMessage::VIEW_NOTICE: return;  // noted by Group::NoteView
    default:
      Log("membership")->warn("group {}: membership message of kind {} from node {} ignored",
                              group->name(), static_cast<int>(message.kind()), from);
  }
}

void Node::OnJoinRequest(Group* group, NodeId from, const wire::MembershipMessage& message) {
  if (!group->is_member()) return;
  // A member whose servant holds the state answers (it will send the state); several may
  // propose, and only the first change applies (the others name a view that has passed).
  if (!HasServant(group->name())) {
    Log("membership")->debug("group {}: join request of node {}: no servant here to give the "
                             "state", group->name(), from);
    return;
  }
  // Just added, its state on the way: a repeated request must not re-add it again (the joiner asks
  // again by itself if the state never comes).
  GroupMembership& membership = membership_[group->name()];
  auto added = membership.added_at_ms.find(from);
  uint64_t patience_ms = std::max<uint64_t>(group->config().exclude_timeout_ms, 2000);
  if (group->IsMember(from) && added != membership.added_at_ms.end() &&
      now_ms_ < added->second + patience_ms) {
    return;
  }
  auto transfer = state_transfers_.find(from);
  if (transfer != state_transfers_.end() && transfer->second.group == group->name()) {
    Log("membership")->debug("group {}: join request of node {}: state transfer under way",
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
  ProposeViewChange(group, remove, {from});
}

void Node::OnNewView(Group* group, NodeId from, const wire::MembershipMessage& message) {
  if (message.view_id() <= group->view_id()) return;  // already there (it delivered the change)
  std::vector<NodeId> members(message.members().begin(), message.members().end());
  if (std::find(members.begin(), members.end(), self_) == members.end()) return;
  Log("membership")->info("group {}: joined view {} (members [{}]); awaiting state from node {}",
                          group->name(), message.view_id(), Names(members), from);
  GroupMembership& membership = membership_[group->name()];
  membership.awaiting_state = true;
  membership.awaiting_since_ms = now_ms_;
  membership.buffered.clear();
  membership.state_chunks.clear();
  membership.state_view = message.view_id();
  std::vector<consensus::Delivery> deliveries;
  group->InstallView(message.view_id(), std::move(members), &deliveries);
  DeliverAll(group, std::move(deliveries));  // buffered until the state is installed
}

void Node::OnStateChunk(Group* group, NodeId from, const wire::MembershipMessage& message) {
  OnNewView(group, from, message);  // the first chunk to arrive installs the view
  GroupMembership& membership = membership_[group->name()];
  if (!membership.awaiting_state || message.view_id() != membership.state_view) return;
  membership.state_chunks[message.chunk_offset()] = message.state();
  if (message.last_chunk()) {
    membership.state_end = message.chunk_offset() + message.state().size();
    membership.state_last_seen = true;
  }
  if (!membership.state_last_seen) return;
  uint64_t contiguous = 0;
  for (const auto& [offset, piece] : membership.state_chunks) {
    if (offset != contiguous) return;  // a gap: more chunks to come
    contiguous += piece.size();
  }
  if (contiguous != membership.state_end) return;
  // Assemble without holding the state twice: each chunk is released once copied.
  std::string bytes;
  bytes.reserve(contiguous);
  for (auto it = membership.state_chunks.begin(); it != membership.state_chunks.end();) {
    bytes += it->second;
    it = membership.state_chunks.erase(it);
  }
  wire::GroupState state;
  if (!state.ParseFromString(bytes)) {
    Log("membership")->error("group {}: undecodable state for view {}: asking again",
                             group->name(), message.view_id());
    return;
  }
  bytes.clear();
  bytes.shrink_to_fit();
  reply_caches_[group->name()].FromProto(state);
  delivered_seq_[group->name()] = state.delivered_seq();
  bool installed = false;
  for (auto& [id, servant] : servants_) {
    if (servant.group != group->name()) continue;
    servant.sink({0, group->name(), kSetStateMethod, state.servant_state(), true, group->view_id()});
    installed = true;
    break;
  }
  if (!installed) membership.pending_servant_state = state.servant_state();
  Log("membership")->info("group {}: state of view {} installed ({} cached replies)",
                          group->name(), message.view_id(), state.replies_size());
  membership.awaiting_state = false;
  DeliverAll(group, std::move(membership.buffered));
  membership.buffered.clear();
}

void Node::SendJoinRequest(Group* group) {
  GroupMembership& membership = membership_[group->name()];
  membership.last_join_request_ms = now_ms_;
  // To every daemon of the cluster: this node does not know the members of the views it missed,
  // and only the lowest-id trusted member of the current view answers.
  std::vector<NodeId> targets;
  for (const PeerConfig& peer : config_.peers) targets.push_back(peer.id);
  Log("membership")->info("group {}: asking to join (this node is in view {}, heard view {})",
                          group->name(), group->view_id(), group->highest_view_heard());
  for (NodeId target : targets) {
    if (target == self_) continue;
    wire::Envelope envelope;
    envelope.mutable_membership()->set_kind(wire::MembershipMessage::JOIN_REQUEST);
    envelope.mutable_membership()->set_view_id(group->view_id());
    group->SendTo(target, std::move(envelope));
  }
}

void Node::SendViewNotice(Group* group, NodeId to) {
  uint64_t& last_ms = membership_[group->name()].last_notice_ms[to];
  if (last_ms != 0 && now_ms_ < last_ms + 100) return;
  last_ms = now_ms_;
  wire::Envelope envelope;
  envelope.mutable_membership()->set_kind(wire::MembershipMessage::VIEW_NOTICE);
  group->SendTo(to, std::move(envelope));
}

void Node::TickMembership(Group* group) {
  ResendStates(group);
  GroupMembership& membership = membership_[group->name()];
  uint64_t retry_ms = std::max<uint64_t>(4 * group->config().suspect_timeout_ms, 200);
  if (membership.awaiting_state &&
      now_ms_ >= membership.awaiting_since_ms + std::max<uint64_t>(group->config().exclude_timeout_ms, 2000)) {
    Log("membership")->warn("group {}: no state for view {}: asking to join again", group->name(),
                            membership.state_view);
    membership.awaiting_state = false;
    membership.buffered.clear();
    SendJoinRequest(group);
    return;
  }
  if (membership.awaiting_state || now_ms_ < membership.last_join_request_ms + retry_ms) return;
  // Behind: this node missed view changes (excluded, partitioned away, restarted). It first gets
  // a chance to catch up through the others' retired order, then asks to be re-added.
  bool behind = group->highest_view_heard() > group->view_id() &&
                now_ms_ >= membership.behind_since_ms + 4 * retry_ms;
  if (group->highest_view_heard() <= group->view_id()) membership.behind_since_ms = now_ms_;
  bool outside = !group->is_member() && membership.want_member;
  if (behind || outside) SendJoinRequest(group);
}

}  // namespace cohort::nso
