// Calls from outside a group (003 section 4.1): through a request manager (open groups), to
// every member with one ordering (closed groups), one-way sends and multicasts along one route,
// kept in FIFO order per client across routes (invocation/outside_fifo.h); and the member side:
// the manager's re-issued call, the standby copies, the probes that find a frozen manager.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/scratch_arena.h"
#include "nso/spare_payloads.h"

namespace cohort::nso {
namespace {

// A managed call's reply to the caller's node fits in it with several members' replies.
constexpr size_t kManagedReplyArenaBytes = 2048;

}  // namespace

void Node::SendManaged(Group* group, Call* call) {
  call->sent_at_ms = now_ms_;
  // Rebind at once if the manager's stream goes down (kill) or it answers no probe (frozen,
  // WatchManagers), or after a long wait for its answer (the request or the answer was lost):
  // max(10 x suspect_timeout, 500 ms), once more per MiB of payload, doubled at each resend (up
  // to 16 x): a slow servant or a loaded group is not sent the call again and again.
  const uint64_t wait_ms = std::max<uint64_t>(10 * group->config().suspect_timeout_ms, 500) *
                           (1 + call->managed_request->payload().size() / (1 << 20));
  call->retry_at_ms = now_ms_ + (wait_ms << std::min<uint32_t>(call->managed_sends, 4));
  ++call->managed_sends;
  // No view known (this node left the view of the group's only member): it is retried later,
  // or ends at its deadline (found by the api fuzzer).
  std::optional<NodeId> manager = group->ManagerAt(call->manager_index);
  if (!manager) return;
  call->managed_request->set_reply_to(*manager);
  SendForward(*manager, group->name(), *call->managed_request);
}

void Node::SendClosedOut(Group* group, Call* call) {
  call->sent_at_ms = now_ms_;
  std::optional<NodeId> manager = group->ManagerAt(call->manager_index);
  call->closed_request->set_orderer(manager ? *manager : 0);
  // To every member; or, once this node is a member itself (it joined the view again), into the
  // order, after its client's previous request (found by cohort-sim --stack, seed 40017 with
  // --streams-break --liveness event: a resent closed call overtook an open one).
  SubmitAsMember(group, *call->closed_request);
}

void Node::WatchManagers() {
  // Probe every suspect_timeout / 2; silent after 2 x suspect_timeout (100 ms by default) while
  // this node has few requests there: a frozen manager's calls move on within issue 7's 150 ms,
  // and a busy one still answers probes on its protocol thread (EventLoop serves sockets between
  // batches of work). But the probe waits in the stream behind this node's earlier requests: with
  // a flood of them queued (one-way calls accepted at once), the manager answers only once it has
  // read them all. So the silence allowed grows with the requests this node has there, 2 x
  // suspect_timeout per 64, up to the exclusion timeout: moving a flood on a mere delay sent all of
  // it again through member after member, the load doubled and the group ordered nothing (the
  // bench's n = 7 app-open one-way rows, 0 delivered/s, as in session 9). Payload bytes count
  // too, 2 x suspect_timeout per MiB: the manager reads, orders and answers 4 MiB slower than a
  // probe, and on loaded cores more than 2 x 150 ms slower (large_payload_e2e_test in CI,
  // session 60: its open call went through all three members in turn and none answered).
  struct Load {
    const Group* group = nullptr;
    uint64_t requests = 0;
    uint64_t bytes = 0;
  };
  std::map<NodeId, Load> loads;
  for (const auto& [key, call] : calls_) {
    if (!call.managed_request) continue;
    const Group* group = groups_.at(call.group).get();
    if (std::optional<NodeId> manager = group->ManagerAt(call.manager_index)) {
      loads[*manager].group = group;
      ++loads[*manager].requests;
      loads[*manager].bytes += call.managed_request->payload().size();
    }
  }
  for (const auto& [name, route] : outside_routes_) {
    if (route.pending.empty()) continue;
    Load& load = loads[route.manager];
    load.group = groups_.at(name).get();
    load.requests += route.pending.size();
    load.bytes += route.pending_bytes;
  }
  std::map<NodeId, membership::ManagerWatch::Use> in_use;
  for (const auto& [manager, load] : loads) {
    const GroupConfig& config = load.group->config();
    const uint64_t suspect_ms = std::max<uint64_t>(config.suspect_timeout_ms, 2);
    const uint64_t calm_ms = std::max<uint64_t>(2 * suspect_ms, config.exclude_timeout_ms);
    const uint64_t silence_ms =
        std::min(2 * suspect_ms * (1 + load.requests / 64 + load.bytes / (1 << 20)), calm_ms);
    in_use[manager] = {suspect_ms / 2, silence_ms, calm_ms};
  }
  if (in_use.empty() && !manager_watch_.watching()) return;
  membership::ManagerWatch::Actions actions = manager_watch_.Tick(now_ms_, in_use);
  for (NodeId manager : actions.probe) {
    SendOutsideProbe(manager, loads[manager].group->name(), /*reply_wanted=*/true,
                     /*not_member=*/false);
  }
  for (NodeId manager : actions.silent) {
    Log("api")->warn("node {} has not answered for {} ms: sending what went through it through "
                     "the next member", NodeName(manager), in_use[manager].silence_ms);
    ++outside_counters_.managers_silent;
    silent_managers_.insert(manager);
  }
}

void Node::SendOutsideProbe(NodeId to, const std::string& group, bool reply_wanted,
                            bool not_member) {
  wire::Envelope envelope;
  wire::Heartbeat* heartbeat = envelope.mutable_heartbeat();
  heartbeat->set_outside_probe(true);
  heartbeat->set_reply_wanted(reply_wanted);
  heartbeat->set_not_member(not_member);
  heartbeat->set_sent_ms(now_ms_);
  SendEnvelope(to, group, std::move(envelope));
}

bool Node::ManagerLost(const std::string& group, NodeId manager) const {
  return silent_managers_.count(manager) > 0 || left_managers_.count({group, manager}) > 0 ||
         links_closed_.count(manager) > 0;
}

void Node::RetryManagedCalls() {
  for (auto& [key, call] : calls_) {
    if (!call.managed_request && !call.closed_request) continue;
    Group* group = groups_.at(call.group).get();
    std::optional<NodeId> manager = group->ManagerAt(call.manager_index);
    if (!manager) continue;  // no view: ExpireCalls ends it at its deadline
    // A closed call's orderer that left the group (it answered "not a member") orders nothing:
    // its copies elsewhere would wait for it until they are late (TickStandby), and with them
    // every later request of the client (outside_fifo.h).
    bool manager_down = (!transport_->Reachable(*manager) &&
                         now_ms_ >= call.sent_at_ms + group->config().suspect_timeout_ms) ||
                        links_closed_.count(*manager) > 0 ||
                        (call.managed_request && ManagerLost(call.group, *manager)) ||
                        (call.closed_request && left_managers_.count({call.group, *manager}) > 0);
    // A closed call's other members order it themselves if its orderer goes silent (StandBy).
    bool silent = call.managed_request && now_ms_ >= call.retry_at_ms;
    if (!silent && !manager_down) continue;
    call.manager_index++;
    preferred_manager_[call.group] = call.manager_index;  // later calls go there at once
    Log("api")->info("group {}: call {} not answered by its request manager; retrying through {}",
                     call.group, key.second,
                     NodeName(*group->ManagerAt(call.manager_index)));
    if (call.managed_request) {
      SendManaged(group, &call);
    } else {
      SendClosedOut(group, &call);
    }
  }
}

bool Node::StandBy(Group* group, wire::Request* kept) {
  const wire::Request& request = *kept;
  const NodeId orderer = request.orderer();
  if (orderer == 0 || orderer == self_ || !group->IsMember(orderer) || group->suspected(orderer)) {
    return false;
  }
  if (DeliveredHere(*group, invocation::OutsideFifo::ClientOf(request), request.call_id())) {
    return true;  // the orderer's copy was delivered before this one arrived
  }
  // Taken, not copied: the kept forward envelope it was read into gets a spare request's memory
  // for the next (nso/kept_envelopes.h), and this copy gives its own back once delivered.
  StandbyCopy& copy =
      standby_[group->name()][{request.origin(), request.origin_incarnation(), request.call_id()}];
  copy.request.Swap(kept);
  copy.arrived_at_ms = now_ms_;
  return true;
}

void Node::TickStandby(Group* group) {
  auto found = standby_.find(group->name());
  if (found == standby_.end()) return;
  if (!group->is_member()) {
    standby_.erase(found);
    return;
  }
  // A safety net for an orderer that never got its copy (the caller re-sends when that stream
  // breaks; this covers a copy lost otherwise).
  const uint64_t late_ms = std::max<uint64_t>(40 * group->config().suspect_timeout_ms, 2000);
  std::vector<wire::Request> take_over;
  for (auto it = found->second.begin(); it != found->second.end();) {
    const NodeId orderer = it->second.request.orderer();
    if (group->IsMember(orderer) && !group->suspected(orderer) &&
        now_ms_ < it->second.arrived_at_ms + late_ms) {
      ++it;
      continue;
    }
    take_over.push_back(std::move(it->second.request));
    it = found->second.erase(it);
  }
  outside_counters_.standby_takeovers += take_over.size();
  for (wire::Request& request : take_over) {
    Log("group")->debug("group {}: ordering call {} of node {}: its orderer {} is suspected or gone",
                        group->name(), request.call_id(), request.origin(),
                        NodeName(request.orderer()));
    OrderFromOutside(group, std::move(request));
  }
}

void Node::OrderFromOutside(Group* group, wire::Request request) {
  const uint64_t suspect_ms = group->config().suspect_timeout_ms;
  // Longer than the client's daemon takes to send the predecessor again through this member:
  // at once when its request manager's stream breaks, after 2 x suspect_timeout when it is
  // silent, and 4 x max(10 x suspect_timeout, 500 ms) after a lost message (RetryOutsideRequests);
  // and at least the request's deadline + 1 s (OutsideFifo::Admit: by then the daemon has had the
  // predecessor ordered or given it up).
  invocation::OutsideFifo& fifo =
      outside_fifo_.try_emplace(group->name(), std::max<uint64_t>(60 * suspect_ms, 3000))
          .first->second;
  const bool delivered =
      request.after_call_id() != 0 &&
      DeliveredHere(*group, invocation::OutsideFifo::ClientOf(request), request.after_call_id());
  const bool copy_waits = fifo.Holds(invocation::OutsideFifo::ClientOf(request), request.call_id());
  const uint64_t overflowed = fifo.overflowed();
  // (What is needed below once the request has moved into the FIFO.)
  const uint64_t call_id = request.call_id();
  const NodeId origin = request.origin();
  const uint64_t origin_incarnation = request.origin_incarnation();
  const uint64_t after_call_id = request.after_call_id();
  invocation::OutsideFifo::Requests now = fifo.Admit(std::move(request), delivered, now_ms_);
  if (fifo.overflowed() != overflowed) {
    ++outside_counters_.fifo_gave_up;  // too many waiting (a peer naming unknown predecessors?)
    Log("group")->warn("group {}: {} requests from outside already wait for their predecessors: "
                       "call {} of node {} ordered without waiting", group->name(), fifo.held(),
                       call_id, origin);
  }
  if (!now.empty()) return ProposeFromOutside(group, absl::MakeSpan(now));
  if (!copy_waits) {  // not a copy sent again, already held
    ++outside_counters_.fifo_held;
    Log("group")->debug("group {}: call {} of node {} waits for its client's call {}",
                        group->name(), call_id, origin, after_call_id);
  }
  // The predecessor is a closed call this member keeps a copy of, waiting for its orderer: this
  // member orders it now (its copy at the orderer may be lost, or the orderer gone; the reply
  // cache executes it once), and with it what waited for it.
  auto standby = standby_.find(group->name());
  if (standby == standby_.end()) return;
  auto copy = standby->second.find({origin, origin_incarnation, after_call_id});
  if (copy == standby->second.end()) return;
  wire::Request predecessor = std::move(copy->second.request);
  standby->second.erase(copy);
  ++outside_counters_.standby_takeovers;
  OrderFromOutside(group, std::move(predecessor));
}

void Node::AskForPredecessor(const Group* group, const invocation::OutsideFifo::ClientKey& client,
                             uint64_t call_id) {
  // Waited for suspect_timeout and not seen at all: its forward was lost, most likely while the
  // origin was cut off, and the origin would resend it only after resend_ms
  // (RetryOutsideRequests), by when its deadline may be past, and a closed call not at all. A
  // later request came through, so the link works again: the origin is asked for it now
  // (Reply.predecessor_missing; found by cohort-sim --stack --calls-per-step 4, seeds 40108 and
  // 40149: a daemon outside the group cut off for about a second lost a dozen one-way calls).
  // Not at once when a request is held: the predecessor is usually on its way (the simulated
  // network reorders a link's messages; TCP does not, but a failover changes the route).
  const auto& [origin, origin_incarnation, client_nso] = client;
  // Not this node's own request: asking itself to send again everything up to it (tried:
  // cohort-sim --stack --kill-percent 0 --leaves, seed 70150, lost nothing then) let its requests
  // kept from an exclusion be overtaken (--streams-break --liveness event --leaves
  // --calls-per-step 4 --ordering sequencer, seed 60042: 10 one-way calls lost).
  if (origin == self_) return;
  wire::Reply ask;
  ask.set_call_id(call_id);
  ask.set_origin(origin);
  ask.set_origin_incarnation(origin_incarnation);
  ask.set_replier(self_);
  ask.set_client_nso(client_nso);
  ask.set_predecessor_missing(true);
  ++outside_counters_.fifo_asked;
  Log("group")->debug("group {}: call {} of node {}, which its client's later request waits "
                      "for, has not come: asking for it", group->name(), call_id,
                      NodeName(origin));
  SendReply(origin, group->name(), std::move(ask));
}

void Node::OnPredecessorMissing(NodeId from, const std::string& name, const wire::Reply& ask) {
  // Only for a request this daemon still awaits. Not answered otherwise: one given up at its
  // deadline may still be held by another member and ordered later, and a member told "not
  // coming" that let its client's later requests go on had it refused as out of order then
  // (tried: cohort-sim --stack --calls-per-step 4, seed 40133; more one-way calls lost).
  if (ask.origin() != self_ || ask.origin_incarnation() != incarnation_) return;
  if (!StillAwaited(ask.client_nso(), name, ask.call_id())) {
    // A call (not a one-way request) that failed here: its caller was told, so refusing a copy
    // ordered after the client's later requests loses nothing acknowledged, and waiting for it
    // would only hold those (until hold_max_ms) until they were refused in turn (cohort-sim
    // --stack --leaves --streams-break --nodes 5, seed 210430: an open call lost in a partition
    // held the four one-way calls after it 3 s, past the client's later calls as a member).
    if (failed_here_.count(ask.call_id()) == 0) return;
    wire::Reply gone = ask;
    gone.set_replier(self_);
    gone.set_predecessor_gone(true);
    return SendReply(from, name, std::move(gone));
  }
  SendMissingAgain(from, name, ask.call_id());
}

void Node::OnPredecessorGone(NodeId from, const std::string& name, const wire::Reply& answer) {
  auto fifo = outside_fifo_.find(name);
  if (fifo == outside_fifo_.end()) return;
  if (from != answer.origin()) {
    Log("group")->warn("group {}: node {} says call {} of node {} failed; only its origin can: "
                       "ignored", name, NodeName(from), answer.call_id(),
                       NodeName(answer.origin()));
    return;
  }
  Log("group")->debug("group {}: call {} of node {} failed there: what waits for it goes on",
                      name, answer.call_id(), NodeName(answer.origin()));
  fifo->second.Delivered({answer.origin(), answer.origin_incarnation(), answer.client_nso()},
                         answer.call_id());
}

void Node::SendMissingAgain(NodeId asker, const std::string& name, uint64_t last) {
  // Every request of this node to the group up to the one asked for and not known ordered goes
  // to the member that asked: each names its own predecessor, so sent alone they would be asked
  // for one round trip at a time. One-way calls and multicasts along their route; open calls
  // rebound to that member as their request manager (RetryManagedCalls would move them on only
  // at their retry time, to the next member in turn); closed calls to every member again. A
  // duplicate of one still in flight elsewhere is executed once (the reply cache). One the causal
  // barrier holds is not sent yet.
  auto found = groups_.find(name);
  if (found == groups_.end()) return;
  Group* group = found->second.get();
  const std::vector<NodeId>& members = group->members();
  auto position = std::find(members.begin(), members.end(), asker);
  if (position == members.end()) return;  // not a member in this node's view of the group
  const uint32_t index = static_cast<uint32_t>(position - members.begin());
  // Not again what was just sent (a burst of held requests asks for overlapping prefixes).
  const uint64_t suspect_ms = group->config().suspect_timeout_ms;
  const uint64_t again_ms = now_ms_ - std::min(now_ms_, suspect_ms);
  size_t one_way = 0;
  size_t open = 0;
  size_t closed = 0;
  auto route = outside_routes_.find(name);
  if (route != outside_routes_.end()) {
    for (auto it = route->second.pending.begin();
         it != route->second.pending.end() && it->first <= last; ++it) {
      if (it->second.sent_at_ms > again_ms) continue;
      it->second.sent_at_ms = now_ms_;
      ++outside_counters_.resent;
      SendForward(asker, name, it->second.request);
      ++one_way;
    }
  }
  for (auto it = calls_.lower_bound({self_, 0}); it != calls_.end() && it->first.first == self_ &&
                                                 it->first.second <= last;
       ++it) {
    Call& call = it->second;
    if (call.group != name) continue;
    if (call.closed_request) {
      // Every copy lost (sent while this node was cut off): a closed call is otherwise sent
      // again only when its orderer's stream breaks (cohort-sim --stack --calls-per-step 4,
      // seed 40149: its client's later requests waited for it 3 s, then were refused).
      if (call.sent_at_ms > again_ms) continue;
      ++outside_counters_.resent;
      SendClosedOut(group, &call);
      ++closed;
      continue;
    }
    if (!call.managed_request) continue;
    if (group->ManagerAt(call.manager_index) == asker && call.sent_at_ms > again_ms) continue;
    call.manager_index += (index + members.size() - call.manager_index % members.size()) %
                          members.size();
    ++outside_counters_.resent;
    SendManaged(group, &call);
    ++open;
  }
  Log("api")->debug("group {}: node {} asks for call {} (not seen there): sent again with {} "
                    "one-way, {} open and {} closed call(s) before it", name, NodeName(asker),
                    last, one_way, open, closed);
}

void Node::ProposeFromOutside(Group* group, absl::Span<wire::Request> requests) {
  const bool leaving = Leaving(group);
  for (wire::Request& request : requests) {
    if (leaving && !request.managed() &&
        MadeHere(request.origin(), request.origin_incarnation())) {
      // Broadcast after this node proposed its leave, it would be ordered after the view
      // without this node and dropped (cohort-sim --stack --leaves --calls-per-step 4
      // --ordering sequencer, seed 60029: a one-way call and two calls released as the node
      // left were lost). It goes from outside once the node is out (TickOutsideFifo).
      MembershipOf(group).own_released_while_leaving.push_back(std::move(request));
      continue;
    }
    if (request.managed()) {
      StartManagedCall(group, &request);
    } else {
      Submit(group, request);
    }
    SpareOutsideRequests().Keep(&request);  // ordered: its memory holds the next one read
  }
}

uint64_t Node::PreviousOutsideRequest(uint64_t nso, Group* group, uint64_t call_id) {
  // This node's own requests still held from when it was a member go outside first, as the next
  // tick would send them (TickOutsideFifo), so that this one names the latest of them: made
  // between leaving the view and that tick, it named its client's older request from outside,
  // went first, and they were refused as out of order while their callers waited (cohort-sim
  // --stack --suspect-ms 10 --leaves --calls-per-step 4 --ordering sequencer, seed 164097: a
  // node left on losing its servant with calls 115-133 held behind 114; 134 named 114).
  if (!group->is_member()) TickOutsideFifo(group);
  uint64_t& last = last_outside_request_[nso][group->name()];
  const uint64_t previous = last;
  last = call_id;
  // The later of its previous request from outside still awaited and its last one kept from an
  // exclusion (sent again once this node rejoins): call numbers grow in the order made. Naming
  // the one from outside when later requests were kept let this one be ordered before them, and
  // they were refused as out of order while their callers waited (cohort-sim --stack --link-ms
  // 30 --nodes 7 --leaves --calls-per-step 2, seed 150004: call 60 named 50, not 59; 51-59 were
  // refused after 64).
  const uint64_t awaited =
      previous != 0 && StillAwaited(nso, group->name(), previous) ? previous : 0;
  return std::max(awaited, KeptPredecessor(nso, group->name()));
}

bool Node::StillAwaited(uint64_t nso, const std::string& group, uint64_t call_id) const {
  // A call not finished, a one-way request or multicast not reported ordered (nor given up), or
  // a request the causal barrier holds.
  if (calls_.count({self_, call_id}) > 0 || causal_barrier_.Holds(nso, call_id)) return true;
  auto route = outside_routes_.find(group);
  return route != outside_routes_.end() && route->second.pending.count(call_id) > 0;
}

void Node::ForgetOutsideOrder(uint64_t nso) {
  last_outside_request_.erase(nso);
  kept_by_client_.erase(kept_by_client_.lower_bound({nso, std::string()}),
                        kept_by_client_.lower_bound({nso + 1, std::string()}));
  member_held_.erase(member_held_.lower_bound({nso, std::string()}),
                     member_held_.lower_bound({nso + 1, std::string()}));
}

uint64_t Node::PendingOutsidePredecessor(uint64_t nso, const std::string& group) const {
  auto client = last_outside_request_.find(nso);
  if (client == last_outside_request_.end()) return 0;
  auto last = client->second.find(group);
  if (last == client->second.end() || last->second == 0) return 0;
  return StillAwaited(nso, group, last->second) ? last->second : 0;
}

void Node::SubmitAsMember(Group* group, const wire::Request& request) {
  if (!group->is_member()) return Submit(group, request);
  uint64_t after = request.after_call_id();
  if (!member_held_.empty()) {
    // The client's previous request made here as a member may still wait (behind one from
    // outside): this one waits behind it rather than overtake it (cohort-sim --stack, seed 40122
    // with --streams-break --liveness event). Not a request made before it and sent again (a
    // closed call from outside resent, SendClosedOut): that one keeps its own predecessor.
    auto previous = member_held_.find({request.client_nso(), group->name()});
    if (previous != member_held_.end()) {
      auto fifo = outside_fifo_.find(group->name());
      if (fifo == outside_fifo_.end() ||
          !fifo->second.Holds(invocation::OutsideFifo::ClientOf(request), previous->second)) {
        member_held_.erase(previous);
      } else if (previous->second < request.call_id()) {
        // The later of the two: a call from outside made after the held one (an open call
        // resent through another member) is the nearer predecessor (cohort-sim --stack
        // --leaves, seed 40171: a closed call named the held one, went with it, and overtook
        // the two open calls between, which were refused).
        after = std::max(after, previous->second);
      }
    }
  }
  if (after == 0) return Submit(group, request);
  uint64_t& last_held = member_held_[{request.client_nso(), group->name()}];
  last_held = std::max(last_held, request.call_id());
  if (after == request.after_call_id()) return OrderFromOutside(group, request);
  wire::Request behind = request;
  behind.set_after_call_id(after);
  OrderFromOutside(group, std::move(behind));
}

bool Node::DeliveredHere(const Group& group, const invocation::ReplyCache::ClientKey& client,
                         uint64_t call_id) const {
  auto cache = reply_caches_.find(group.name());
  return cache != reply_caches_.end() && cache->second.Known(client, call_id);
}

bool Node::AwaitedHere(const Group* group, const wire::Request& request) const {
  auto fifo = outside_fifo_.find(group->name());
  return fifo != outside_fifo_.end() &&
         fifo->second.Awaited(invocation::OutsideFifo::ClientOf(request), request.call_id());
}

void Node::NoteOutsideDelivered(Group* group, const wire::Request& request) {
  auto fifo = outside_fifo_.find(group->name());
  if (fifo == outside_fifo_.end() || !fifo->second.has_work()) return;
  fifo->second.Delivered(invocation::OutsideFifo::ClientOf(request), request.call_id());
}

std::vector<wire::Request> Node::TakeOwnReleased(Group* group) {
  auto membership = membership_.find(group->name());
  if (membership == membership_.end() || Leaving(group)) return {};
  std::vector<wire::Request> own = std::move(membership->second.own_released_while_leaving);
  membership->second.own_released_while_leaving.clear();
  if (!group->is_member()) return own;
  for (wire::Request& request : own) Submit(group, request);  // it stayed: in the order made
  return {};
}

void Node::TickOutsideFifo(Group* group) {
  std::vector<wire::Request> own = TakeOwnReleased(group);  // own requests to send from outside
  auto fifo = outside_fifo_.find(group->name());
  if (fifo == outside_fifo_.end() && own.empty()) return;
  if (!group->is_member()) {
    // The clients' daemons go through another member; this node's own requests, held as a
    // member behind its earlier one from outside, now go outside too, in the order made, and
    // its clients' next requests from outside name them (cohort-sim --stack --calls-per-step 4,
    // seed 40136: they did not, and overtook them).
    if (fifo != outside_fifo_.end()) {
      for (wire::Request& request : fifo->second.Clear()) {
        if (MadeHere(request.origin(), request.origin_incarnation())) {
          own.push_back(std::move(request));
        }
      }
    }
    std::sort(own.begin(), own.end(), [](const wire::Request& a, const wire::Request& b) {
      return a.call_id() < b.call_id();
    });
    for (wire::Request& request : own) {
      request.set_notify_ordered(true);
      uint64_t& last = last_outside_request_[request.client_nso()][group->name()];
      last = std::max(last, request.call_id());
      Submit(group, request);
    }
    return;
  }
  size_t expired = 0;
  invocation::OutsideFifo::Requests now = fifo->second.Take(
      now_ms_, &expired,
      [&](const invocation::OutsideFifo::ClientKey& client, uint64_t call_id) {
        if (DeliveredHere(*group, client, call_id)) return true;
        // This node's own request from outside, which its requests as a member wait for: no
        // longer awaited here (ordered, finished, or given up at its deadline), and not itself
        // waiting here.
        return MadeHere(std::get<0>(client), std::get<1>(client)) &&
               !StillAwaited(std::get<2>(client), group->name(), call_id) &&
               !fifo->second.Holds(client, call_id);
      });
  for (const auto& [client, call_id] :
       fifo->second.Unseen(now_ms_, std::max<uint64_t>(group->config().suspect_timeout_ms, 1))) {
    AskForPredecessor(group, client, call_id);
  }
  if (expired > 0) {
    outside_counters_.fifo_gave_up += expired;
    Log("group")->info("group {}: {} request(s) from outside ordered without their client's "
                       "previous one, which did not come in time", group->name(), expired);
  }
  ProposeFromOutside(group, absl::MakeSpan(now));
}

void Node::StartManagedCall(Group* group, wire::Request* managed) {
  wire::Request& request = *managed;
  CallKey key{request.origin(), request.call_id()};
  auto existing = calls_.find(key);
  if (existing != calls_.end()) {
    if (MadeHere(request.origin(), request.origin_incarnation()) &&
        existing->second.managed_request) {
      // This node's own open call from when it was outside the group, sent again through
      // itself now that it is a member (RetryManagedCalls): it orders the call as a member
      // would, and every replica answers here, where the call's collector takes the replies.
      // (It used to be taken for a duplicate and never ordered until the next retry through
      // another member, while the FIFO hold let its client's later requests go first:
      // cohort-sim --stack, seed 40137 with --streams-break --liveness event.)
      request.set_managed(false);
      request.set_reply_to(self_);
      request.set_reply_from_manager_only(false);
      Submit(group, request);
    }
    return;  // otherwise already managing it (a duplicate of a retry)
  }
  if (request.reply_from_manager_only() && group->members().size() <= 3 &&
      config_.consensus.optimisation_3) {
    // Wait-for-first (003 section 4.2's asynchronous forwarding) with n <= 3 and optimisation 3
    // (without it the manager decides first, and answers alone as below): the request manager
    // orders the request and collects nothing; every member's replica answers the caller's node
    // directly and the first answer completes the call there. With optimisation 3 a participant
    // decides on the proposal, the manager only on the first ACK, so a participant answers one hop
    // earlier than a reply relayed by the manager would (issue 7); and any live member's answer
    // completes the call if the manager dies after ordering it. (With n >= 5 the manager decides
    // first: it alone answers, as below.) A retry through another manager orders the request
    // again; the reply cache executes it once.
    request.set_managed(false);
    request.set_reply_from_manager_only(false);
    request.set_reply_to(request.origin());
    Submit(group, request);
    return;
  }
  auto mode = static_cast<invocation::Mode>(request.mode());
  uint32_t view_size = request.reply_from_manager_only() ? 1 : group->members().size();
  uint64_t deadline_ms =
      request.deadline_ms() ? request.deadline_ms() : limits_.default_deadline_ms;
  Call call{group->name(), invocation::ReplyCollector(mode, view_size), now_ms_ + deadline_ms,
            deadline_ms, nullptr};
  call.managed_for = Call::ManagedFor{request.origin(), request.origin_incarnation()};
  AddCall(key, std::move(call));
  request.set_managed(false);
  request.set_reply_to(self_);
  Submit(group, request);
}

void Node::SendManagedReply(const std::string& group, Call::ManagedFor to, uint64_t call_id,
                            InvokeResult result) {
  // Built on a stack arena, the payloads moved in (issue 7: the reply, each member's reply and
  // their strings were allocated, and the payloads copied, per call).
  alignas(16) char block[kManagedReplyArenaBytes];
  google::protobuf::Arena arena(ArenaOn(block, sizeof(block)));
  auto& envelope = *google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena);
  wire::ManagedReply* reply = envelope.mutable_managed_reply();
  reply->set_call_id(call_id);
  reply->set_origin_incarnation(to.origin_incarnation);
  reply->set_view_id(result.view_id);
  reply->set_wanted(result.wanted);
  reply->set_status_code(static_cast<int>(result.status.code()));
  if (!result.status.message().empty()) reply->set_error(std::string(result.status.message()));
  for (auto& member_reply : result.replies) {
    wire::Reply* out = reply->add_replies();
    out->set_call_id(call_id);
    out->set_replier(member_reply.node);
    out->set_status_code(static_cast<int>(member_reply.status.code()));
    if (!member_reply.status.message().empty()) {
      out->set_error(std::string(member_reply.status.message()));
    }
    out->set_payload(std::move(member_reply.payload));
  }
  SendEnvelopeInPlace(to.origin, group, &envelope);
  // Written: the payloads hold the next replies read here, the vector the next call's replies.
  for (wire::Reply& out : *reply->mutable_replies()) {
    KeepWrittenPayload(out.mutable_payload());
  }
  RecycleReplies(std::move(result.replies));
}

void Node::SendOutside(Group* group, const wire::Request& request) {
  // The same member as the client's managed calls (restricted group, 003 section 4.2), so that
  // its one-way and open calls keep their order along one route.
  std::optional<NodeId> manager = group->ManagerAt(preferred_manager_[group->name()]);
  if (!manager) {  // no view known here (found by the api fuzzer)
    Log("api")->warn("group {}: no member known; a one-way call or multicast is dropped",
                     group->name());
    return;
  }
  OutsideRoute& route = outside_routes_[group->name()];
  if (route.pending.empty()) {
    route.manager = *manager;
    route.unreachable_since_ms = 0;
    route.progress_ms = now_ms_;  // a new backlog: nothing of it is overdue yet
  }
  // Otherwise after the earlier ones, to the same member (FIFO per sender), until its stream
  // goes down (RetryOutsideRequests).
  uint64_t deadline_ms =
      request.deadline_ms() ? request.deadline_ms() : limits_.default_deadline_ms;
  auto [pending, added] = route.pending.try_emplace(request.call_id());
  if (!added) route.pending_bytes -= pending->second.request.payload().size();
  pending->second = {request, now_ms_, now_ms_ + deadline_ms, now_ms_};
  route.pending_bytes += request.payload().size();
  SendForward(route.manager, group->name(), request);
}

void Node::Reroute(Group* group, OutsideRoute* route, NodeId manager) {
  route->manager = manager;
  // Sent into a partition, they are sent again once the stream is back (RetryOutsideRequests).
  route->unreachable_since_ms = transport_->Reachable(manager) ? 0 : now_ms_;
  outside_counters_.resent += route->pending.size();
  for (auto& [call_id, pending] : route->pending) {
    pending.sent_at_ms = now_ms_;
    SendForward(manager, group->name(), pending.request);
  }
}

void Node::RetryOutsideRequests() {
  for (auto route_it = outside_routes_.begin(); route_it != outside_routes_.end();) {
    const std::string& name = route_it->first;
    OutsideRoute& route = route_it->second;
    // Past its deadline a request is given up (it may have been ordered: its notice is lost).
    size_t given_up = 0;
    while (!route.pending.empty() && now_ms_ >= route.pending.begin()->second.give_up_at_ms) {
      route.pending_bytes -= route.pending.begin()->second.request.payload().size();
      route.pending.erase(route.pending.begin());
      ++given_up;
    }
    outside_counters_.given_up += given_up;
    if (given_up > 0) {
      Log("api")->warn("group {}: {} one-way call(s) or multicast(s) from this node not known "
                       "ordered by their deadline: no longer resent", name, given_up);
    }
    if (route.pending.empty()) {
      route_it = outside_routes_.erase(route_it);
      continue;
    }
    Group* group = groups_.at(name).get();
    const uint64_t suspect_ms = group->config().suspect_timeout_ms;
    const uint64_t retry_ms = std::max<uint64_t>(10 * suspect_ms, 500);
    if (transport_->Reachable(route.manager)) {
      if (route.unreachable_since_ms != 0) {
        // Its stream is back (a partition healed): what was sent to it while it was down was
        // lost, and the resend below would come only resend_ms after those sends.
        Log("api")->info("group {}: node {} is reachable again; sending the {} one-way call(s) "
                         "or multicast(s) not known ordered again", name,
                         NodeName(route.manager), route.pending.size());
        Reroute(group, &route, route.manager);
      }
      route.unreachable_since_ms = 0;
    } else if (route.unreachable_since_ms == 0) {
      route.unreachable_since_ms = now_ms_;
    }
    OutsideRequest& front = route.pending.begin()->second;
    // At least twice within its deadline (cohort-sim --stack: with a 1.5 s deadline a lost
    // forward was never resent, and a one-way call its caller was told was accepted given up).
    const uint64_t resend_ms = std::min(
        4 * retry_ms, std::max(retry_ms / 2, (front.give_up_at_ms - front.first_sent_ms) / 3));
    // Gone (its stream is down) or silent (frozen: it keeps its stream but answers no probe,
    // WatchManagers): the next member gets every pending request. A member that is only slow is
    // not left: under overload its notices lag by seconds, and sending it all again through
    // another member doubled the load until nothing was ordered (issue 7's bench, the first
    // version of this code); a slow member still answers probes.
    bool down = (route.unreachable_since_ms != 0 &&
                 now_ms_ >= route.unreachable_since_ms + suspect_ms) ||
                ManagerLost(name, route.manager);
    std::optional<NodeId> manager = group->ManagerAt(preferred_manager_[name]);
    if (down && manager && *manager == route.manager) {
      manager = group->ManagerAt(++preferred_manager_[name]);
    }
    if (down && manager && *manager != route.manager) {
      Log("api")->info("group {}: node {} is unreachable; sending the {} one-way call(s) or "
                       "multicast(s) not known ordered through {}", name, NodeName(route.manager),
                       route.pending.size(), NodeName(*manager));
      Reroute(group, &route, *manager);
    } else if (now_ms_ >= front.sent_at_ms + resend_ms) {
      // The manager orders the others: this one's notice was lost (it was ordered by another
      // member after a view change, or the notice's stream broke), or the request itself was.
      // Sent again to be sure: one request per tick, a duplicate at worst.
      front.sent_at_ms = now_ms_;
      ++outside_counters_.resent;
      SendForward(route.manager, name, front.request);
    }
    ++route_it;
  }
}

}  // namespace cohort::nso
