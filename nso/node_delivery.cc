// What the order delivers: requests applied to the servants once each (reply cache), their
// answers sent to whoever collects them, and the collected replies completing calls.

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "consensus/spare.h"
#include "invocation/kept_calls.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/scratch_arena.h"
#include "nso/spare_payloads.h"

namespace cohort::nso {

namespace {

// The first block of a delivery's parsing arena (a request of a 100-byte payload takes ~600).
constexpr size_t kDeliveryArenaBytes = 2048;
// Reply vectors kept for new calls (RecycleReplies): how many, and their largest capacity.
constexpr size_t kSpareReplyVectors = 64;
constexpr size_t kSpareRepliesMax = 16;
// An envelope's header strings, for a reply sent (SendReply).
constexpr size_t kReplyEnvelopeArenaBytes = 1024;

// FNV-1a: the same value in every daemon, whatever the standard library.
uint64_t StableHash(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
  return hash;
}

// Empties `message` for the next parse into it (a merge), keeping its request's object and
// strings; the payload a servant's delivery took is refilled from this thread's spare payloads
// (spare_payloads.h). Clear() would delete the request (a oneof's object goes with it). Anything
// else, or unknown fields, is cleared whole (as local_api.cc's RecycleFrame does with frames).
void RecycleGroupMessage(wire::GroupMessage* message) {
  if (!message->has_request() || !NoUnknownFields(*message)) {
    message->Clear();
    return;
  }
  wire::Request* request = message->mutable_request();
  request->Clear();
  SparePayloads().Refill(request->mutable_payload());
}

}  // namespace

void Node::DeliverAll(Group* group, consensus::Deliveries deliveries) {
  // Nothing delivered to a group without membership state (an idle one): it gets none (memory).
  if (deliveries.empty() && membership_.count(group->name()) == 0) return;
  GroupMembership& membership = membership_[group->name()];
  if (membership.joiner.awaiting_state() && membership.servant_lost && !membership.state_broken) {
    // Re-admitted by a view change (it may never have seen the view that removed it): the state
    // on its way replaces the one its servant lost (unless part of it went to that servant).
    membership.servant_lost = false;
    membership.joiner.set_want_member(AnyServantAttached(group->name()));
    Log("membership")->info("group {}: re-admitted after losing its servant; the state follows",
                            group->name());
  }
  // Each delivery is parsed into delivery_message_, whose request's strings keep their memory
  // from one delivery to the next (omniORB2, 001 sections 5-6: no allocation per message), or,
  // while that one is in use further up the stack (a servant dispatched inline calls on), into
  // an arena whose first block is on the stack. What is kept beyond this loop is copied out.
  bool holding = !delivery_message_busy_;
  delivery_message_busy_ = true;
  absl::Cleanup release = [this, &holding] {
    if (holding) delivery_message_busy_ = false;
  };
  alignas(16) char block[kDeliveryArenaBytes];
  google::protobuf::Arena arena(ArenaOn(block, sizeof(block)));
  for (size_t i = 0; i < deliveries.size(); ++i) {
    group->Delivered(deliveries[i]);
    wire::GroupMessage* parsed = &delivery_message_;
    if (holding) {
      RecycleGroupMessage(&delivery_message_);
      if (!delivery_message_.MergeFromString(deliveries[i].payload)) parsed = nullptr;
    } else {
      arena.Reset();
      parsed = google::protobuf::Arena::CreateMessage<wire::GroupMessage>(&arena);
      if (!parsed->ParseFromString(deliveries[i].payload)) parsed = nullptr;
    }
    group->GiveBack(&deliveries[i]);  // parsed: its memory takes a later one's (issue 7)
    if (parsed == nullptr) {
      Log("group")->error("group {}: undecodable message from node {} seq {} skipped",
                          group->name(), deliveries[i].origin, deliveries[i].seq);
      continue;
    }
    wire::GroupMessage& message = *parsed;
    if (message.has_view_change()) {
      // The view ends here: whatever the old order delivers after this point is discarded at
      // every member, and its senders re-broadcast it in the new view. A joiner still waiting
      // for its state follows the view changes too (it helps agree on the next views; its
      // requests wait), so a provider's crash cannot leave it behind for good.
      consensus::Deliveries next_view;
      if (ApplyViewChange(group, message.view_change(), &next_view)) {
        if (holding) delivery_message_busy_ = holding = false;  // not used past this point
        return DeliverAll(group, std::move(next_view));
      }
      continue;
    }
    if (membership.joiner.awaiting_state()) {  // no request is applied before the state arrives
      membership.buffered.push_back(std::move(*message.mutable_request()));
      continue;
    }
    ApplyRequest(group, message.request(), deliveries[i].origin,
                 message.mutable_request()->mutable_payload());
  }
}

void Node::ApplyRequest(Group* group, const wire::Request& request, NodeId orderer,
                        std::string* payload) {
  GroupMembership& membership = membership_[group->name()];
  if (!standby_.empty()) {
    auto standby = standby_.find(group->name());
    if (standby != standby_.end()) {
      auto copy =
          standby->second.find({request.origin(), request.origin_incarnation(), request.call_id()});
      if (copy != standby->second.end()) {
        SpareOutsideRequests().Keep(&copy->second.request);  // its memory holds the next read
        standby->second.erase(copy);
      }
    }
  }
  if (MadeHere(request.origin(), request.origin_incarnation())) {
    MarkOrdered(request.call_id());
  } else if (request.notify_ordered() && (orderer == self_ || orderer == 0)) {
    // A non-member's request: the member that broadcast it tells the caller's node, one notice
    // where every member used to send one (n per one-way call, n x n per closed call from
    // outside). If that member dies first, the caller's causal barrier releases on its timeout.
    wire::Reply notice;
    notice.set_call_id(request.call_id());
    notice.set_origin(request.origin());
    notice.set_origin_incarnation(request.origin_incarnation());
    notice.set_replier(self_);
    notice.set_ordered_notice(true);
    SendReply(request.origin(), group->name(), std::move(notice));
  }
  if (membership.servant_lost) return;  // leaving: its replica is gone (see node.h)
  if (!HasServant(group->name())) {
    // A member with no servant attached yet (it starts before its application, or restarted):
    // the group's object is not here to execute anything, so the requests wait for it, in
    // order, rather than being answered or lost (found by the linearizability checks).
    if (membership.no_servant.size() < kNoServantBufferMax) {
      // The view they were ordered in comes first to the servant (node_views.cc).
      if (membership.no_servant.empty() && !membership.servant_view) {
        membership.servant_view = CurrentViewMark(group);
      }
      membership.no_servant.push_back(request);
    } else if (!membership.no_servant_overflow) {
      membership.no_servant_overflow = true;
      Log("group")->warn("group {}: no servant attached and {} requests waiting: later ones "
                         "are dropped; the servant will get the state by rejoining",
                         group->name(), kNoServantBufferMax);
    }
    return;
  }
  DeliverRequest(group, request, payload);
}

bool Node::CanGiveState(const Group* group) {
  // Its servant holds the group's state: it is attached, and this node is not itself waiting
  // for a state (a joiner whose provider crashed must not hand on an empty object).
  if (!HasServant(group->name())) return false;
  if (group->durable_claim()) return false;  // its servant's object is not the group's state yet
  auto found = membership_.find(group->name());
  return found == membership_.end() || !found->second.joiner.awaiting_state();
}

bool Node::AnyServantAttached(const std::string& group) const {
  for (const auto& [id, servant] : servants_) {
    if (servant.group == group) return true;
  }
  return false;
}

bool Node::HasServant(const std::string& group) const {
  auto membership = membership_.find(group);
  if (membership != membership_.end() && membership->second.servant_lost) return false;
  return AnyServantAttached(group);
}

void Node::DeliverRequest(Group* group, const wire::Request& request, std::string* payload) {
  if (!outside_fifo_.empty()) NoteOutsideDelivered(group, request);
  if (request.retire_client()) {
    // Its client is gone and every request it made was ordered before this one (RetireClient):
    // its replies go, here as at every member at this point of the order. Not for the servants.
    reply_caches_[group->name()].Retire(
        {request.origin(), request.origin_incarnation(), request.client_nso()});
    return;
  }
  if (request.replies_taken_below() > 0 && request.caller_group().empty()) {
    // Its client's daemon awaits none of its calls below it: they are forgotten, here as at every
    // member at this point of the order (a late copy is neither executed nor answered).
    reply_caches_[group->name()].TakeRepliesBelow(
        {request.origin(), request.origin_incarnation(), request.client_nso()},
        request.replies_taken_below());
  }
  if (!request.method().empty()) return DeliverInvocation(group, request, payload);
  uint64_t group_seq = ++delivered_seq_[group->name()];
  if (request.notify_ordered()) {
    // From outside the group: it may come twice (resent through another member, SendOutside).
    // The reply cache knows it as it knows a one-way call: delivered once.
    invocation::ReplyCache::ClientKey client{request.origin(), request.origin_incarnation(),
                                             request.client_nso()};
    invocation::ReplyCache& cache = reply_caches_[group->name()];
    const wire::Reply* cached = nullptr;
    switch (cache.OnDelivery(client, request.call_id(), &cached)) {
      case invocation::ReplyCache::Verdict::kExecute:
        break;
      case invocation::ReplyCache::Verdict::kOutOfOrder:
        cache.Completed(client, request.call_id(), RefuseOutOfOrder(*group, request));
        return;
      default:
        return;
    }
    wire::Reply done;
    done.set_replier(self_);
    cache.Completed(client, request.call_id(), done);
  }
  for (auto& [id, servant] : servants_) {  // a multicast: every servant of the group gets it
    if (servant.group == group->name()) {
      ServantDelivery delivery{0, group->name(), "", request.payload(), true, group->view_id(),
                               group_seq};
      if (request.notify_ordered() && group->config().durable) {
        // Kept with the state: the copy resent across a power cut is not delivered again.
        delivery.call = invocation::KeptCallIdentity(
            {request.origin(), request.origin_incarnation(), request.client_nso()},
            request.call_id());
      }
      servant.sink(std::move(delivery));
    }
  }
}

void Node::DeliverInvocation(Group* group, const wire::Request& request, std::string* payload) {
  bool replies = !request.one_way() &&
                 (!request.reply_from_manager_only() || request.reply_to() == self_);
  ReplyTarget target{request.reply_to() ? request.reply_to() : request.origin(), request.origin(),
                     request.origin_incarnation(), request.call_id()};
  // A group's call (003 section 4.3) is one call whichever member of the group made it.
  CacheId cache_id =
      request.caller_group().empty()
          ? CacheId{{request.origin(), request.origin_incarnation(), request.client_nso()},
                    request.call_id()}
          : CacheId{{0, StableHash(request.caller_group()), 0}, request.group_call_id()};
  const wire::Reply* cached = nullptr;
  invocation::ReplyCache& cache = reply_caches_[group->name()];
  uint64_t group_seq = ++delivered_seq_[group->name()];
  switch (cache.OnDelivery(cache_id.first, cache_id.second, &cached)) {
    case invocation::ReplyCache::Verdict::kAnswered:
      if (replies) SendReplyTo(target, group->name(), *cached);
      return;
    case invocation::ReplyCache::Verdict::kInProgress: {
      auto it = open_delivery_by_call_.find(cache_id);
      if (replies && it != open_delivery_by_call_.end()) {
        open_deliveries_[it->second].targets.push_back(target);
      }
      return;
    }
    case invocation::ReplyCache::Verdict::kForgotten:
      // Almost always a copy resent after the original was delivered (a flood whose ordered
      // notices lag, a failover); an original only if its client's daemon had given it up (its
      // deadline passed, or a one-way call) and the client's later call said so
      // (Request.replies_taken_below), or it was ordered after 256 later calls of its client;
      // outside_fifo.h keeps both from happening unless a wait for a predecessor ran out.
      // Said for the first and then every 1000th: a one-way flood from outside makes hundreds
      // (cohort-bench's application-process rows: 331 lines in one run, session 31).
      if (late_copies_ignored_++ % 1000 == 0) {
        Log("group")->warn("group {}: call {} of node {} was forgotten here (its client's daemon "
                           "awaits it no more, or it is older than its client's 256 latest "
                           "calls): a late copy of one delivered before, ignored ({} such copies "
                           "so far; said every 1000th)",
                           group->name(), request.call_id(), request.origin(),
                           late_copies_ignored_);
      }
      return;
    case invocation::ReplyCache::Verdict::kOutOfOrder:
      // A group's call is numbered by its caller group, not by one client's daemon: executed.
      // A client's call: refused at every member alike (FIFO per client).
      if (!request.caller_group().empty()) break;
      {
        wire::Reply refused = RefuseOutOfOrder(*group, request);
        cache.Completed(cache_id.first, cache_id.second, refused);
        if (replies) SendReplyTo(target, group->name(), refused);
      }
      return;
    case invocation::ReplyCache::Verdict::kExecute:
      break;
  }
  uint64_t servant = 0;
  for (const auto& [id, candidate] : servants_) {
    if (candidate.group == group->name()) {
      servant = id;  // the first servant registered for the group executes invocations here
      break;
    }
  }
  uint64_t number = next_delivery_++;
  open_deliveries_[number] = {cache_id, {}, group->name(), servant};
  if (replies) open_deliveries_[number].targets.push_back(target);
  open_delivery_by_call_[cache_id] = number;
  if (servant == 0) {
    Answer(0, number,
           absl::UnavailableError(absl::StrCat("no servant attached for group \"", group->name(),
                                               "\" at ", config_.node)),
           "");
    return;
  }
  // The payload is taken from the parsed request when the caller allows (DeliverAll): its last
  // use here.
  ServantDelivery delivery{number, group->name(), request.method(),
                           payload != nullptr ? std::move(*payload) : request.payload(),
                           request.one_way(), group->view_id(), group_seq};
  if (group->config().durable) {
    // The servant keeps the call's answer with its state (invocation/kept_calls.h).
    delivery.call = invocation::KeptCallIdentity(cache_id.first, cache_id.second);
  }
  servants_[servant].sink(std::move(delivery));
  if (request.one_way()) {
    // A one-way call gets no answer (proto/api.proto, ServantEvent.one_way): it is done once
    // handed to the servant. The reply cache records it, so a duplicate is not executed again.
    auto it = open_deliveries_.find(number);
    if (it == open_deliveries_.end()) return;  // the sink answered or detached meanwhile
    const std::string group_name = it->second.group;
    open_deliveries_.erase(it);
    open_delivery_by_call_.erase(cache_id);
    wire::Reply done;
    done.set_replier(self_);
    reply_caches_[group_name].Completed(cache_id.first, cache_id.second, done);
  }
}

wire::Reply Node::RefuseOutOfOrder(const Group& group, const wire::Request& request) {
  // Its client's later request was delivered first: the member that ordered that one waited for
  // this one longer than its limit (invocation/outside_fifo.h) and ordered without it. Executing
  // it now would break FIFO per client (003 section 4.1); every member refuses it at this same
  // point of the total order, so none executes it and the replicas stay alike.
  ++outside_counters_.fifo_refused;
  const uint64_t later = reply_caches_[group.name()].LatestCall(
      {request.origin(), request.origin_incarnation(), request.client_nso()});
  Log("group")->warn("group {}: call {} of node {} (client NSO {}) ordered after a later call of "
                     "its client (call {}): refused, not executed",
                     group.name(), request.call_id(), NodeName(request.origin()),
                     request.client_nso(), later);
  wire::Reply reply;
  reply.set_replier(self_);
  reply.set_status_code(static_cast<int>(absl::StatusCode::kAborted));
  reply.set_error(absl::StrCat(
      "call ", request.call_id(), " was ordered in group \"", group.name(),
      "\" after a later call of the same client (the member ordering that one stopped waiting "
      "for it): refused, not executed, to keep the client's calls in order"));
  return reply;
}

void Node::AnswerSwapping(uint64_t servant, uint64_t delivery, absl::Status status,
                          std::string* payload_pointer, bool more) {
  std::string& payload = *payload_pointer;
  if (AnswerStateRequest(delivery, status, payload, more)) return;
  if (!kept_restores_.empty() && AnswerRestore(servant, delivery, status, payload)) return;
  auto it = open_deliveries_.find(delivery);
  if (it == open_deliveries_.end() || it->second.servant != servant) {
    Log("api")->warn("servant {} answered unknown delivery {}: ignored", servant, delivery);
    return;
  }
  OpenDelivery open = std::move(it->second);
  open_deliveries_.erase(it);
  open_delivery_by_call_.erase(open.cache_id);
  if (static_cast<int64_t>(payload.size()) > limits_.max_payload_bytes) {
    // As a request's payload is bounded (Admit): the callers get an error naming why, from
    // this member, instead of a reply no link between daemons may be able to carry.
    if (oversized_replies_++ % 1000 == 0) {
      Log("api")->warn("group {}: a servant answered {} bytes, more than limits.max_payload_bytes "
                       "({}): sent as an error ({} such answers so far; said every 1000th)",
                       open.group, payload.size(), limits_.max_payload_bytes, oversized_replies_);
    }
    status = absl::ResourceExhaustedError(absl::StrCat(
        "the servant's reply of ", payload.size(), " bytes at ", config_.node,
        " exceeds limits.max_payload_bytes (", limits_.max_payload_bytes, "): not sent"));
    payload.clear();
  }
  SendAnswer(open, status, &payload);
}

void Node::SendAnswer(const OpenDelivery& open, absl::Status status, std::string* payload) {
  wire::Envelope own_envelope;  // only while answer_envelope_ is in use further up the stack
  wire::Envelope* envelope = answer_envelope_busy_ ? &own_envelope : &answer_envelope_;
  const bool reused = envelope == &answer_envelope_;
  answer_envelope_busy_ = true;
  // Only the fields SendEnvelopeInPlace sets are ever set on answer_envelope_: its header is
  // rewritten whole each time, and its reply cleared (keeping its strings' memory).
  wire::Reply& reply = *envelope->mutable_reply();
  reply.Clear();
  reply.set_replier(self_);
  reply.set_status_code(static_cast<int>(status.code()));
  if (!status.ok()) reply.set_error(std::string(status.message()));
  reply.mutable_payload()->swap(*payload);  // *payload gets the last answer's memory, to reuse
  reply_caches_[open.group].Completed(open.cache_id.first, open.cache_id.second, reply);
  for (size_t i = 0; i < open.targets.size(); ++i) {
    const ReplyTarget& target = open.targets[i];
    reply.set_call_id(target.call_id);
    reply.set_origin(target.origin);
    reply.set_origin_incarnation(target.origin_incarnation);
    if (target.to != self_) {
      SendEnvelopeInPlace(target.to, open.group, envelope);
    } else if (i + 1 < open.targets.size()) {
      wire::Reply own = reply;  // later targets still need the payload
      OnReply(own, own.mutable_payload());
    } else {
      OnReply(reply, reply.mutable_payload());  // the last target takes it, uncopied
    }
  }
  if (!reused) return;
  answer_envelope_busy_ = false;
  // A large answer's memory goes rather than stay with the envelope until the next answer.
  if (reply.payload().capacity() > consensus::kSpareBytesMax) std::string().swap(*reply.mutable_payload());
}

void Node::SendReplyTo(const ReplyTarget& target, const std::string& group, wire::Reply reply) {
  reply.set_call_id(target.call_id);
  reply.set_origin(target.origin);
  reply.set_origin_incarnation(target.origin_incarnation);
  SendReply(target.to, group, std::move(reply));
}

void Node::SendReply(NodeId to, const std::string& group, wire::Reply reply) {
  if (to == self_) return OnReply(reply, reply.mutable_payload());
  // The envelope on a stack arena (its group name's string), the reply lent to it: a member's
  // reply allocated its envelope's reply and group strings per call (issue 7).
  alignas(16) char block[kReplyEnvelopeArenaBytes];
  google::protobuf::Arena arena(ArenaOn(block, sizeof(block)));
  auto& envelope = *google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
  envelope.unsafe_arena_set_allocated_reply(&reply);
  SendEnvelopeInPlace(to, group, &envelope);
  envelope.unsafe_arena_release_reply();
}

void Node::OnReply(const wire::Reply& reply, std::string* payload) {
  // A reply to a call of an earlier incarnation of this daemon (same call id, another call).
  if (reply.origin() == self_ && reply.origin_incarnation() != incarnation_) return;
  if (reply.ordered_notice()) {
    if (reply.origin() != self_) return;
    MarkOrdered(reply.call_id());
    // Call ids are unique per node: at most one route holds it (routes: one per group in use).
    for (auto& [group, route] : outside_routes_) {
      auto pending = route.pending.find(reply.call_id());
      if (pending == route.pending.end()) continue;
      route.pending_bytes -= pending->second.request.payload().size();
      route.pending.erase(pending);
      route.progress_ms = now_ms_;
      break;
    }
    return;
  }
  auto it = calls_.find({reply.origin(), reply.call_id()});
  if (it == calls_.end()) return;  // late reply of a finished call
  invocation::MemberReply member_reply;
  member_reply.node = reply.replier();
  member_reply.member = NodeName(reply.replier());
  member_reply.status = absl::Status(static_cast<absl::StatusCode>(reply.status_code()), reply.error());
  // (Not one conditional expression: with one side const, it is a const prvalue, and the
  // assignment copied even the payload given to be moved.)
  if (payload != nullptr) {
    member_reply.payload = std::move(*payload);
  } else {
    member_reply.payload = reply.payload();
  }
  if (it->second.collector.Add(std::move(member_reply))) FinishCall(it->first, absl::OkStatus());
}

void Node::OnManagedReply(wire::ManagedReply* managed) {
  const wire::ManagedReply& reply = *managed;
  if (reply.origin_incarnation() != incarnation_) return;  // for an earlier incarnation
  auto it = calls_.find({self_, reply.call_id()});
  if (it == calls_.end() || !it->second.managed_request) return;
  Call call = TakeCall(it);
  if (auto client = nsos_.find(call.nso); client != nsos_.end()) {
    client->second.awaited.Remove(reply.call_id());  // its later requests say it has this result
  }
  MarkOrdered(reply.call_id());
  InvokeResult result;
  result.status = absl::Status(static_cast<absl::StatusCode>(reply.status_code()), reply.error());
  result.view_id = reply.view_id();
  result.wanted = reply.wanted();
  // In the vector the call's collector took from those recycled (AddCall), the payloads moved
  // (issue 7: the vector and a copy of each payload were allocated per call).
  result.replies = call.collector.TakeReplies();
  result.replies.clear();
  for (wire::Reply& from : *managed->mutable_replies()) {
    result.replies.push_back({from.replier(), NodeName(from.replier()),
                              absl::Status(static_cast<absl::StatusCode>(from.status_code()),
                                           from.error()),
                              std::move(*from.mutable_payload())});
  }
  call.done(std::move(result));
}

void Node::RecycleReplies(std::vector<invocation::MemberReply> replies) {
  if (replies.capacity() == 0 || replies.capacity() > kSpareRepliesMax ||
      spare_replies_.size() >= kSpareReplyVectors) {
    return;
  }
  replies.clear();
  spare_replies_.push_back(std::move(replies));
}

void Node::AddCall(CallKey key, Call call) {
  if (!spare_replies_.empty()) {
    call.collector.GiveStorage(std::move(spare_replies_.back()));
    spare_replies_.pop_back();
  }
  if (spare_call_.empty()) {
    calls_.emplace(key, std::move(call));
    return;
  }
  spare_call_.key() = key;
  spare_call_.mapped() = std::move(call);
  calls_.insert(std::move(spare_call_));
  spare_call_ = {};
}

Node::Call Node::TakeCall(std::map<CallKey, Call>::iterator it) {
  spare_call_ = calls_.extract(it);
  Call call = std::move(spare_call_.mapped());
  // An outside call's request gives its memory back for the next one (KeepOutsideRequest).
  if (call.managed_request) spare_outside_request_.Swap(&*call.managed_request);
  if (call.closed_request) spare_outside_request_.Swap(&*call.closed_request);
  return call;
}

void Node::FinishCall(CallKey key, absl::Status status) {
  auto it = calls_.find(key);
  if (it == calls_.end()) return;
  if (key.first == self_) MarkOrdered(key.second);  // replied (so ordered), or given up
  if (key.first == self_ && !status.ok()) {
    // Its caller is told it failed: a member holding the client's later requests for it need
    // not (OnPredecessorMissing). Call ids grow: the oldest go first.
    failed_here_.insert(key.second);
    if (failed_here_.size() > 4096) failed_here_.erase(failed_here_.begin());
  }
  Call call = TakeCall(it);
  if (auto client = nsos_.find(call.nso); client != nsos_.end()) {
    client->second.awaited.Remove(key.second);  // its later requests say it has this result
  }
  uint64_t view_id = groups_.count(call.group) ? groups_[call.group]->view_id() : 0;
  InvokeResult result{std::move(status), call.collector.TakeReplies(), view_id,
                      call.collector.wanted()};
  if (call.managed_for) {
    return SendManagedReply(call.group, *call.managed_for, key.second, std::move(result));
  }
  call.done(std::move(result));
}

void Node::ExpireCalls() {
  std::vector<CallKey> expired;
  for (const auto& [key, call] : calls_) {
    if (now_ms_ >= call.deadline_at_ms) expired.push_back(key);
  }
  for (const CallKey& key : expired) {
    const Call& call = calls_.at(key);
    FinishCall(key, absl::DeadlineExceededError(absl::StrCat(
                        "group \"", call.group, "\": ", call.collector.replies().size(), " of ",
                        call.collector.wanted(), " replies within ", call.deadline_ms, " ms")));
  }
}

}  // namespace cohort::nso
