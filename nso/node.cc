#include "nso/node.h"

#include <algorithm>
#include <set>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

// FNV-1a: the same value in every daemon, whatever the standard library.
uint64_t StableHash(const std::string& text) {
  uint64_t hash = 1469598103934665603ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ULL;
  return hash;
}

invocation::Mode ToMode(GroupConfig::DefaultMode mode) {
  switch (mode) {
    case GroupConfig::DefaultMode::kOneWay: return invocation::Mode::kOneWay;
    case GroupConfig::DefaultMode::kFirst: return invocation::Mode::kFirst;
    case GroupConfig::DefaultMode::kMajority: return invocation::Mode::kMajority;
    case GroupConfig::DefaultMode::kAll: return invocation::Mode::kAll;
  }
  return invocation::Mode::kAll;
}

}  // namespace

Node::Node(const Config& config, Transport* transport, uint64_t incarnation, uint64_t now_ms)
    : Node(std::make_shared<const Config>(config), transport, incarnation, now_ms) {}

Node::Node(std::shared_ptr<const Config> config, Transport* transport, uint64_t incarnation,
           uint64_t now_ms)
    : config_owner_(std::move(config)),
      config_(*config_owner_),
      peers_(config_.peers),
      transport_(transport),
      self_(config_.node_id),
      incarnation_(incarnation),
      now_ms_(now_ms),
      next_nso_(((incarnation & 0xffffffffULL) << 32) | 1),
      // A request never ordered (its group unreachable) holds the next ones for at most this long.
      causal_barrier_(std::max<int64_t>(config_.limits.default_deadline_ms / 5, 200)) {
  for (const GroupConfig& group_config : config_.groups) StartGroup(group_config, "");
}

bool Node::StartGroup(const GroupConfig& group_config, const char* why) {
  std::vector<NodeId> members;
  for (const std::string& member : group_config.members) {
    const PeerConfig* peer = FindPeer(member);
    if (peer == nullptr) {
      Log("group")->warn("group {}: not started: member \"{}\" is not a peer of the running "
                         "configuration", group_config.name, member);
      return false;
    }
    members.push_back(peer->id);
  }
  groups_[group_config.name] = std::make_unique<Group>(
      group_config, config_, std::move(members), transport_, incarnation_, now_ms_, &links_closed_);
  Log("group")->info("group {}: view 1 with {} members ({} ordering, {}, {} style){}{}",
                     group_config.name, group_config.members.size(),
                     ToString(group_config.ordering), ToString(group_config.liveness),
                     ToString(group_config.style),
                     groups_[group_config.name]->is_member() ? "" : "; this node is not a member",
                     why);
  return true;
}

std::vector<std::string> Node::AddGroups(std::shared_ptr<const Config> fresh,
                                         const std::vector<std::string>& names, const char* why) {
  std::vector<std::string> started;
  for (const std::string& name : names) {
    const GroupConfig* group_config = fresh->FindGroup(name);
    if (group_config == nullptr || groups_.count(name)) continue;
    if (StartGroup(*group_config, why)) started.push_back(name);
  }
  if (!started.empty()) added_from_.push_back(std::move(fresh));
  return started;
}

Node::~Node() {
  for (auto& [id, call] : calls_) {
    call.done({absl::CancelledError("daemon shutting down"), call.collector.TakeReplies(), 0,
               call.collector.wanted()});
  }
}

std::string Node::NodeName(NodeId node) const {
  const PeerConfig* peer = FindPeerById(node);
  return peer ? peer->name : absl::StrCat("node-", node);
}

std::vector<const Group*> Node::groups() const {
  std::vector<const Group*> out;
  for (const auto& [name, group] : groups_) out.push_back(group.get());
  return out;
}

void Node::ApplyTimeouts(const Config& fresh) {
  for (const GroupConfig& group_config : fresh.groups) {
    auto it = groups_.find(group_config.name);
    if (it == groups_.end()) continue;
    it->second->SetTimeouts(group_config.suspect_timeout_ms, group_config.exclude_timeout_ms,
                            group_config.silence_ms);
    Log("membership")->info("group {}: timeouts now suspect {} ms, exclude {} ms, silence {} ms",
                            group_config.name, group_config.suspect_timeout_ms,
                            group_config.exclude_timeout_ms, group_config.silence_ms);
  }
}

// ---- NSOs -------------------------------------------------------------------------------------

absl::StatusOr<uint64_t> Node::Attach(const std::string& client_name, bool expires_when_idle,
                                      uint64_t owner) {
  if (static_cast<int64_t>(nsos_.size()) >= config_.limits.max_nsos) {
    return absl::ResourceExhaustedError(
        absl::StrCat("limits.max_nsos (", config_.limits.max_nsos, ") NSOs already attached"));
  }
  uint64_t nso = next_nso_++;
  nsos_[nso] = {client_name, expires_when_idle, now_ms_, owner};
  Log("api")->debug("NSO {} attached for client \"{}\"", nso, client_name);
  return nso;
}

uint64_t Node::OwnerFingerprint(const std::string& caller) {
  if (caller.empty()) return 0;
  const uint64_t hash = absl::Hash<std::string>{}(caller);
  return hash == 0 ? 1 : hash;
}

absl::Status Node::Detach(uint64_t nso, uint64_t requester) {
  auto entry = nsos_.find(nso);
  if (entry == nsos_.end()) return absl::NotFoundError(absl::StrCat("unknown NSO ", nso));
  if (entry->second.owner != 0 && entry->second.owner != requester) {
    return absl::PermissionDeniedError(
        absl::StrCat("NSO ", nso, " was attached by another client: only it may detach it"));
  }
  Log("api")->debug("NSO {} of client \"{}\" detached", nso, entry->second.client_name);
  nsos_.erase(entry);
  last_outside_request_.erase(nso);
  ++nsos_detached_;
  std::vector<uint64_t> gone;
  for (const auto& [id, servant] : servants_) {
    if (servant.nso == nso) gone.push_back(id);
  }
  for (uint64_t id : gone) UnregisterServant(id);
  return absl::OkStatus();
}

absl::Status Node::CheckNso(uint64_t nso) const {
  auto it = nsos_.find(nso);
  if (it == nsos_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown NSO ", nso, ": call Attach first"));
  }
  it->second.last_used_ms = now_ms_;
  return absl::OkStatus();
}

void Node::ExpireIdleNsos() {
  const uint64_t idle_ms = static_cast<uint64_t>(config_.limits.nso_idle_ms);
  if (idle_ms == 0 || now_ms_ < next_nso_sweep_ms_) return;
  // A walk over every NSO, at most every tenth of the idle time (and every second).
  next_nso_sweep_ms_ = now_ms_ + std::max<uint64_t>(idle_ms / 10, 1000);
  std::set<uint64_t> serving;
  for (const auto& [id, servant] : servants_) serving.insert(servant.nso);
  size_t detached = 0;
  for (auto it = nsos_.begin(); it != nsos_.end();) {
    const NsoEntry& entry = it->second;
    if (entry.expires_when_idle && now_ms_ >= entry.last_used_ms + idle_ms &&
        serving.count(it->first) == 0 && causal_barrier_.in_flight(it->first) == 0) {
      last_outside_request_.erase(it->first);
      it = nsos_.erase(it);
      ++detached;
    } else {
      ++it;
    }
  }
  nsos_detached_idle_ += detached;
  if (detached > 0) {
    Log("api")->info("{} NSO(s) unused for {} ms detached (limits.nso_idle_ms); {} attached",
                     detached, idle_ms, nsos_.size());
  }
}

absl::Status Node::CheckInFlight(uint64_t nso, const std::string& group, size_t bytes) const {
  const size_t in_flight = causal_barrier_.in_flight(nso);
  if (in_flight == 0) return absl::OkStatus();  // one request alone is bounded by its payload limit
  if (static_cast<int64_t>(in_flight) >= config_.limits.max_unordered_requests) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "group \"", group, "\": this client has ", in_flight,
        " requests not yet ordered (limits.max_unordered_requests): retry once they are"));
  }
  const size_t in_flight_bytes = causal_barrier_.in_flight_bytes(nso);
  if (static_cast<int64_t>(in_flight_bytes + bytes) > config_.limits.max_unordered_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "group \"", group, "\": this client has ", in_flight_bytes, " bytes of requests not yet "
        "ordered; ", bytes, " more exceed limits.max_unordered_bytes (",
        config_.limits.max_unordered_bytes, "): retry once they are"));
  }
  return absl::OkStatus();
}

absl::Status Node::Admit(uint64_t nso, const Group& group, invocation::Mode mode,
                         size_t payload_bytes) const {
  if (static_cast<int64_t>(payload_bytes) > config_.limits.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("payload of ", payload_bytes,
                                                   " bytes exceeds limits.max_payload_bytes (",
                                                   config_.limits.max_payload_bytes, ")"));
  }
  if (absl::Status room = CheckInFlight(nso, group.name(), payload_bytes); !room.ok()) return room;
  if (absl::Status reachable = CheckReachable(group, mode); !reachable.ok()) return reachable;
  if (mode == invocation::Mode::kOneWay) return CheckOutsideRoute(group);
  return absl::OkStatus();
}

absl::Status Node::CheckReachable(const Group& group, invocation::Mode mode) const {
  const uint32_t view_size = group.members().size();
  const uint32_t wanted = invocation::RepliesWanted(mode, view_size);
  // Fail fast rather than wait for the deadline when the mode cannot be met: ordering needs a
  // majority of the view (primary partition), and the mode needs `wanted` members.
  // Only members silent for fail_fast_after_ms count as gone: a suspicion alone (50 ms) lets
  // consensus move on (004 section 5), but on a loaded machine a live member is often that late,
  // and refusing calls then turned overload into errors (issue 7's one-way floods).
  // An idle event-driven group's suspicions are stale (nobody watched while it was idle: a
  // partition may have healed since); the call wakes it up and it watches again, so calls made
  // while it is active fail fast as in a lively group.
  const uint64_t grace_ms =
      std::max<uint64_t>(group.config().suspect_timeout_ms, config_.failure_detector.fail_fast_after_ms);
  const uint32_t reachable =
      group.suspicions_current() ? group.heard_within_count(now_ms_, grace_ms) : view_size;
  const uint32_t needed = std::max(wanted, view_size / 2 + 1);
  if (reachable >= needed) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "group \"", group.name(), "\": ", invocation::ModeName(mode), " needs ", needed, " of ",
      view_size, " members, ", reachable, " reachable (the others silent for over ", grace_ms,
      " ms)"));
}

absl::Status Node::CheckOutsideRoute(const Group& group) const {
  // From outside, one-way calls and multicasts wait at the request manager while the group
  // orders nothing (its majority cut off, or overload), and past their deadline they are given
  // up unconfirmed (RetryOutsideRequests). Once the oldest has waited half its deadline, new ones
  // are refused instead: the caller learns of it while those accepted still have time.
  if (group.is_member()) return absl::OkStatus();
  auto route = outside_routes_.find(group.name());
  if (route == outside_routes_.end() || route->second.pending.empty()) return absl::OkStatus();
  const OutsideRequest& oldest = route->second.pending.begin()->second;
  const uint64_t deadline_ms = oldest.give_up_at_ms - oldest.first_sent_ms;
  const uint64_t waited_ms = now_ms_ - oldest.first_sent_ms;
  if (2 * waited_ms <= deadline_ms) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "group \"", group.name(), "\": ", route->second.pending.size(),
      " one-way call(s) or multicast(s) from this node not yet known ordered, the oldest for ",
      waited_ms, " ms, over half its deadline (", deadline_ms, " ms): the group is not ordering "
      "them (its majority cut off from the request manager, or overload); retry later"));
}

absl::StatusOr<Group*> Node::FindGroup(const std::string& group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("unknown group \"", group, "\""));
  return it->second.get();
}

absl::StatusOr<GroupInfo> Node::GroupDetails(const std::string& name) const {
  auto it = groups_.find(name);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("unknown group \"", name, "\""));
  const Group& group = *it->second;
  GroupInfo info;
  info.name = name;
  info.view_id = group.view_id();
  info.config = &group.config();
  for (NodeId member : group.members()) {
    info.members.push_back({NodeName(member), member, group.suspected(member), member == self_});
  }
  return info;
}

// ---- invocation -------------------------------------------------------------------------------

absl::Status Node::Multicast(uint64_t nso, const std::string& group_name, std::string payload) {
  if (absl::Status status = CheckNso(nso); !status.ok()) return status;
  absl::StatusOr<Group*> group = FindGroup(group_name);
  if (!group.ok()) return group.status();
  // Admitted as a one-way call is: where no majority of the view is reachable (a minority
  // partition, or no view known here) it is refused at once rather than wait unordered.
  if (absl::Status admitted = Admit(nso, **group, invocation::Mode::kOneWay, payload.size());
      !admitted.ok()) {
    return admitted;
  }
  wire::Request request;
  request.set_call_id(next_call_id_++);
  request.set_origin(self_);
  request.set_origin_incarnation(incarnation_);
  request.set_client_nso(nso);
  request.set_payload(std::move(payload));
  request.set_one_way(true);
  request.set_notify_ordered(!(*group)->is_member());
  if (!(*group)->is_member()) {
    request.set_after_call_id(PreviousOutsideRequest(nso, group_name, request.call_id()));
  }
  SubmitInCausalOrder(request, *group, [this, request](Group* target) { Submit(target, request); });
  return absl::OkStatus();
}

void Node::Invoke(uint64_t nso, InvokeOptions options, InvokeDone done) {
  auto fail = [&](absl::Status status) { done({std::move(status), {}, 0, 0}); };
  if (absl::Status status = CheckNso(nso); !status.ok()) return fail(status);
  absl::StatusOr<Group*> found = FindGroup(options.group);
  if (!found.ok()) return fail(found.status());
  Group* group = *found;
  if (options.method.empty()) return fail(absl::InvalidArgumentError("method name is empty"));
  if (options.method[0] == '$') {  // kGetStateMethod, kSetStateMethod: the daemon's own
    return fail(absl::InvalidArgumentError(
        absl::StrCat("method \"", options.method, "\" is reserved (names starting with '$')")));
  }
  invocation::Mode mode = options.mode_given ? options.mode : ToMode(group->config().default_mode);
  if (absl::Status admitted = Admit(nso, *group, mode, options.payload.size()); !admitted.ok()) {
    return fail(admitted);
  }
  GroupConfig::Style style = options.style.value_or(group->config().style);
  uint32_t view_size = group->members().size();
  uint64_t deadline_ms = options.deadline_ms ? options.deadline_ms : config_.limits.default_deadline_ms;
  wire::Request request;
  request.set_call_id(next_call_id_++);
  request.set_origin(self_);
  request.set_origin_incarnation(incarnation_);
  request.set_client_nso(nso);
  request.set_method(std::move(options.method));
  request.set_payload(std::move(options.payload));
  request.set_mode(static_cast<int>(mode));
  request.set_reply_to(self_);
  request.set_deadline_ms(deadline_ms);
  request.set_caller_group(options.caller_group);
  request.set_group_call_id(options.group_call_id);
  bool open = style == GroupConfig::Style::kOpen;
  // 003 section 4.2, asynchronous forwarding: for wait-for-first through an open group only the
  // request manager's replica answers; the others execute silently.
  request.set_reply_from_manager_only(open && mode == invocation::Mode::kFirst);
  request.set_notify_ordered(!group->is_member());
  if (!group->is_member() && request.caller_group().empty()) {
    // FIFO per client across routes (invocation/outside_fifo.h): its previous request here.
    request.set_after_call_id(PreviousOutsideRequest(nso, group->name(), request.call_id()));
  }
  if (mode == invocation::Mode::kOneWay) {
    request.set_one_way(true);
    SubmitInCausalOrder(request, group, [this, request](Group* live) { Submit(live, request); });
    return done({absl::OkStatus(), {}, group->view_id(), 0});
  }
  CallKey key{self_, request.call_id()};
  Call call{options.group,
            invocation::ReplyCollector(mode, request.reply_from_manager_only() ? 1 : view_size),
            now_ms_ + deadline_ms, deadline_ms, std::move(done)};
  if (open && !group->is_member()) {
    // Open group: the client/server group holds this NSO and one server, the request manager,
    // which re-issues the call in the server group and returns the replies (003 section 4.1).
    request.set_managed(true);
    // The managed reply (or the call's end) tells this node the call was ordered: no member
    // needs to send an ordered notice (three wake-ups of this node per call, issue 7).
    request.set_notify_ordered(false);
    call.managed_request = request;
    call.manager_index = preferred_manager_[group->name()];  // restricted group: one manager
    calls_.emplace(key, std::move(call));
    SubmitInCausalOrder(request, group, [this, key](Group* live) {
      auto it = calls_.find(key);
      if (it != calls_.end()) SendManaged(live, &it->second);  // unless it expired meanwhile
    });
    return;
  }
  if (!group->is_member() && request.caller_group().empty()) {
    // Closed group from outside: every member gets the call, one orders it (wire.proto, orderer),
    // the member the client's open and one-way calls go to, so they keep their order.
    call.closed_request = request;
    call.manager_index = preferred_manager_[group->name()];
    calls_.emplace(key, std::move(call));
    SubmitInCausalOrder(request, group, [this, key](Group* live) {
      auto it = calls_.find(key);
      if (it != calls_.end()) SendClosedOut(live, &it->second);
    });
    return;
  }
  calls_.emplace(key, std::move(call));
  SubmitInCausalOrder(request, group, [this, key, request](Group* live) {
    if (calls_.count(key)) Submit(live, request);
  });
}

void Node::SubmitInCausalOrder(const wire::Request& request, Group* group,
                               std::function<void(Group*)> submit) {
  // A held submission may be released past a DeleteGroup (and a new group of the same name): it
  // goes to the group it was made for, or nowhere.
  auto make_held = [&]() -> invocation::CausalBarrier::Submit {
    return [this, name = group->name(), incarnation = group->group_incarnation(),
            submit = std::move(submit)] {
      auto it = groups_.find(name);
      if (it != groups_.end() && it->second->group_incarnation() == incarnation) {
        submit(it->second.get());
      }
    };
  };
  if (causal_barrier_.AdmitOrHold(request.client_nso(), group->name(), request.call_id(), now_ms_,
                                  request.payload().size(), make_held)) {
    submit(group);
  }
}

void Node::MarkOrdered(uint64_t call_id) {
  for (auto& submit : causal_barrier_.Ordered(call_id, now_ms_)) submit();
}

void Node::SendManaged(Group* group, Call* call) {
  call->sent_at_ms = now_ms_;
  // Rebind at once if the manager's stream goes down (kill) or it answers no probe (frozen,
  // WatchManagers), or after a long wait for its answer (the request or the answer was lost).
  call->retry_at_ms = now_ms_ + std::max<uint64_t>(10 * group->config().suspect_timeout_ms, 500);
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
  Submit(group, *call->closed_request);  // to every member
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
  // bench's n = 7 app-open one-way rows, 0 delivered/s, as in session 9).
  struct Load {
    const Group* group = nullptr;
    uint64_t requests = 0;
  };
  std::map<NodeId, Load> loads;
  for (const auto& [key, call] : calls_) {
    if (!call.managed_request) continue;
    const Group* group = groups_.at(call.group).get();
    if (std::optional<NodeId> manager = group->ManagerAt(call.manager_index)) {
      loads[*manager].group = group;
      ++loads[*manager].requests;
    }
  }
  for (const auto& [name, route] : outside_routes_) {
    if (route.pending.empty()) continue;
    loads[route.manager].group = groups_.at(name).get();
    loads[route.manager].requests += route.pending.size();
  }
  std::map<NodeId, membership::ManagerWatch::Use> in_use;
  for (const auto& [manager, load] : loads) {
    const GroupConfig& config = load.group->config();
    const uint64_t suspect_ms = std::max<uint64_t>(config.suspect_timeout_ms, 2);
    const uint64_t silence_ms =
        std::min(2 * suspect_ms * (1 + load.requests / 64),
                 std::max<uint64_t>(2 * suspect_ms, config.exclude_timeout_ms));
    in_use[manager] = {suspect_ms / 2, silence_ms};
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

bool Node::StandBy(Group* group, const wire::Request& request) {
  const NodeId orderer = request.orderer();
  if (orderer == 0 || orderer == self_ || !group->IsMember(orderer) || group->suspected(orderer)) {
    return false;
  }
  if (DeliveredHere(*group, invocation::OutsideFifo::ClientOf(request), request.call_id())) {
    return true;  // the orderer's copy was delivered before this one arrived
  }
  standby_[group->name()][{request.origin(), request.origin_incarnation(), request.call_id()}] =
      {request, now_ms_};
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
  if (found->second.empty()) standby_.erase(found);
  outside_counters_.standby_takeovers += take_over.size();
  for (const wire::Request& request : take_over) {
    Log("group")->debug("group {}: ordering call {} of node {}: its orderer {} is suspected or gone",
                        group->name(), request.call_id(), request.origin(),
                        NodeName(request.orderer()));
    OrderFromOutside(group, request);
  }
}

void Node::OrderFromOutside(Group* group, const wire::Request& request) {
  const uint64_t suspect_ms = group->config().suspect_timeout_ms;
  // Longer than the client's daemon takes to send the predecessor again through this member:
  // at once when its request manager's stream breaks, after 2 x suspect_timeout when it is
  // silent, and 4 x max(10 x suspect_timeout, 500 ms) after a lost message (RetryOutsideRequests).
  invocation::OutsideFifo& fifo =
      outside_fifo_.try_emplace(group->name(), std::max<uint64_t>(60 * suspect_ms, 3000))
          .first->second;
  const bool delivered =
      request.after_call_id() != 0 &&
      DeliveredHere(*group, invocation::OutsideFifo::ClientOf(request), request.after_call_id());
  const uint64_t overflowed = fifo.overflowed();
  std::vector<wire::Request> now = fifo.Admit(request, delivered, now_ms_);
  if (fifo.overflowed() != overflowed) {
    ++outside_counters_.fifo_gave_up;  // too many waiting (a peer naming unknown predecessors?)
    Log("group")->warn("group {}: {} requests from outside already wait for their predecessors: "
                       "call {} of node {} ordered without waiting", group->name(), fifo.held(),
                       request.call_id(), request.origin());
  }
  if (!now.empty()) return ProposeFromOutside(group, std::move(now));
  ++outside_counters_.fifo_held;
  Log("group")->debug("group {}: call {} of node {} waits for its client's call {}",
                      group->name(), request.call_id(), request.origin(),
                      request.after_call_id());
  // The predecessor is a closed call this member keeps a copy of, waiting for its orderer: this
  // member orders it now (its copy at the orderer may be lost, or the orderer gone; the reply
  // cache executes it once), and with it what waited for it.
  auto standby = standby_.find(group->name());
  if (standby == standby_.end()) return;
  auto copy = standby->second.find({request.origin(), request.origin_incarnation(),
                                    request.after_call_id()});
  if (copy == standby->second.end()) return;
  wire::Request predecessor = std::move(copy->second.request);
  standby->second.erase(copy);
  if (standby->second.empty()) standby_.erase(standby);
  ++outside_counters_.standby_takeovers;
  OrderFromOutside(group, predecessor);
}

void Node::ProposeFromOutside(Group* group, std::vector<wire::Request> requests) {
  for (wire::Request& request : requests) {
    if (request.managed()) {
      StartManagedCall(group, std::move(request));
    } else {
      Submit(group, request);
    }
  }
}

uint64_t Node::PreviousOutsideRequest(uint64_t nso, const std::string& group, uint64_t call_id) {
  uint64_t& last = last_outside_request_[nso][group];
  const uint64_t previous = last;
  last = call_id;
  if (previous == 0) return 0;
  // Still waited for here: a call not finished, a one-way request or multicast not reported
  // ordered (nor given up), or a request the causal barrier holds.
  if (calls_.count({self_, previous}) > 0 || causal_barrier_.Holds(nso, previous)) return previous;
  auto route = outside_routes_.find(group);
  if (route != outside_routes_.end() && route->second.pending.count(previous) > 0) return previous;
  return 0;
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

void Node::TickOutsideFifo(Group* group) {
  auto fifo = outside_fifo_.find(group->name());
  if (fifo == outside_fifo_.end()) return;
  if (!group->is_member()) {
    fifo->second.Clear();  // the clients' daemons go through another member
    return;
  }
  size_t expired = 0;
  std::vector<wire::Request> now = fifo->second.Take(
      now_ms_, &expired,
      [&](const invocation::OutsideFifo::ClientKey& client, uint64_t call_id) {
        return DeliveredHere(*group, client, call_id);
      });
  if (expired > 0) {
    outside_counters_.fifo_gave_up += expired;
    Log("group")->info("group {}: {} request(s) from outside ordered without their client's "
                       "previous one, which did not come in time", group->name(), expired);
  }
  ProposeFromOutside(group, std::move(now));
}

void Node::StartManagedCall(Group* group, wire::Request request) {
  CallKey key{request.origin(), request.call_id()};
  if (calls_.count(key)) return;  // already managing it (a duplicate of a retry)
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
  NodeId origin = request.origin();
  std::string group_name = group->name();
  uint64_t deadline_ms =
      request.deadline_ms() ? request.deadline_ms() : config_.limits.default_deadline_ms;
  Call call{group_name, invocation::ReplyCollector(mode, view_size), now_ms_ + deadline_ms,
            deadline_ms,
            [this, origin, group_name, call_id = request.call_id(),
             origin_incarnation = request.origin_incarnation()](InvokeResult result) {
              wire::Envelope envelope;
              wire::ManagedReply* reply = envelope.mutable_managed_reply();
              reply->set_call_id(call_id);
              reply->set_origin_incarnation(origin_incarnation);
              reply->set_view_id(result.view_id);
              reply->set_wanted(result.wanted);
              reply->set_status_code(static_cast<int>(result.status.code()));
              reply->set_error(std::string(result.status.message()));
              for (const auto& member_reply : result.replies) {
                wire::Reply* out = reply->add_replies();
                out->set_call_id(call_id);
                out->set_replier(member_reply.node);
                out->set_status_code(static_cast<int>(member_reply.status.code()));
                out->set_error(std::string(member_reply.status.message()));
                out->set_payload(member_reply.payload);
              }
              SendEnvelope(origin, group_name, std::move(envelope));
            }};
  calls_.emplace(key, std::move(call));
  request.set_managed(false);
  request.set_reply_to(self_);
  Submit(group, request);
}

void Node::SendForward(NodeId to, const std::string& group, const wire::Request& request) {
  wire::Envelope envelope;
  *envelope.mutable_forward() = request;
  SendEnvelope(to, group, std::move(envelope));
}

void Node::SendEnvelope(NodeId to, const std::string& group, wire::Envelope envelope) {
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(group);
  // Replies are routed by call id before the receiver looks at the group (Receive): only the
  // rest needs the group's incarnation.
  if (!envelope.has_reply() && !envelope.has_managed_reply()) {
    auto it = groups_.find(group);
    if (it != groups_.end() && it->second->group_incarnation() != 0) {
      envelope.set_group_incarnation(it->second->group_incarnation());
    }
  }
  envelope.set_sender_node(self_);
  envelope.set_incarnation(incarnation_);
  if (to == self_) return Receive(self_, envelope);
  transport_->Send(to, std::move(envelope));
}

void Node::Submit(Group* group, const wire::Request& request) {
  if (group->is_member()) {
    wire::GroupMessage message;
    *message.mutable_request() = request;
    std::vector<consensus::Delivery> deliveries;
    group->Broadcast(message.SerializeAsString(), &deliveries);
    DeliverAll(group, std::move(deliveries));
    return;
  }
  // A multicast or one-way call from outside the group: one member orders it.
  if (request.method().empty() || request.one_way()) return SendOutside(group, request);
  wire::Envelope envelope;
  *envelope.mutable_forward() = request;
  // Closed group from outside the server group: the client multicasts to every server
  // (003 section 4.1); the one named in `orderer` orders it, the others stand by (StandBy), and
  // the reply cache executes it once whoever ordered it.
  for (NodeId member : group->members()) SendEnvelope(member, group->name(), envelope);
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
  }
  // Otherwise after the earlier ones, to the same member (FIFO per sender), until its stream
  // goes down (RetryOutsideRequests).
  uint64_t deadline_ms =
      request.deadline_ms() ? request.deadline_ms() : config_.limits.default_deadline_ms;
  route.pending[request.call_id()] = {request, now_ms_, now_ms_ + deadline_ms, now_ms_};
  SendForward(route.manager, group->name(), request);
}

void Node::Reroute(Group* group, OutsideRoute* route, NodeId manager) {
  route->manager = manager;
  route->unreachable_since_ms = 0;
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
      route.unreachable_since_ms = 0;
    } else if (route.unreachable_since_ms == 0) {
      route.unreachable_since_ms = now_ms_;
    }
    OutsideRequest& front = route.pending.begin()->second;
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
    } else if (now_ms_ >= front.sent_at_ms + 4 * retry_ms) {
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

void Node::DeliverAll(Group* group, std::vector<consensus::Delivery> deliveries) {
  // Nothing delivered to a group without membership state (an idle one): it gets none (memory).
  if (deliveries.empty() && membership_.count(group->name()) == 0) return;
  GroupMembership& membership = membership_[group->name()];
  if (membership.joiner.awaiting_state() && membership.servant_lost) {
    // Re-admitted by a view change (it may never have seen the view that removed it): the state
    // on its way replaces the one its servant lost.
    membership.servant_lost = false;
    membership.joiner.set_want_member(AnyServantAttached(group->name()));
    Log("membership")->info("group {}: re-admitted after losing its servant; the state follows",
                            group->name());
  }
  for (size_t i = 0; i < deliveries.size(); ++i) {
    group->Delivered(deliveries[i]);
    wire::GroupMessage message;
    if (!message.ParseFromString(deliveries[i].payload)) {
      Log("group")->error("group {}: undecodable message from node {} seq {} skipped",
                          group->name(), deliveries[i].origin, deliveries[i].seq);
      continue;
    }
    if (message.has_view_change()) {
      // The view ends here: whatever the old order delivers after this point is discarded at
      // every member, and its senders re-broadcast it in the new view. A joiner still waiting
      // for its state follows the view changes too (it helps agree on the next views; its
      // requests wait), so a provider's crash cannot leave it behind for good.
      std::vector<consensus::Delivery> next_view;
      if (ApplyViewChange(group, message.view_change(), &next_view)) {
        return DeliverAll(group, std::move(next_view));
      }
      continue;
    }
    if (membership.joiner.awaiting_state()) {  // no request is applied before the state arrives
      membership.buffered.push_back(std::move(*message.mutable_request()));
      continue;
    }
    ApplyRequest(group, message.request(), deliveries[i].origin);
  }
}

void Node::ApplyRequest(Group* group, const wire::Request& request, NodeId orderer) {
  GroupMembership& membership = membership_[group->name()];
  if (!standby_.empty()) {
    auto standby = standby_.find(group->name());
    if (standby != standby_.end()) {
      standby->second.erase({request.origin(), request.origin_incarnation(), request.call_id()});
    }
  }
  if (request.origin() == self_ && request.origin_incarnation() == incarnation_) {
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
    SendReply(request.origin(), group->name(), notice);
  }
  if (membership.servant_lost) return;  // leaving: its replica is gone (see node.h)
  if (!HasServant(group->name())) {
    // A member with no servant attached yet (it starts before its application, or restarted):
    // the group's object is not here to execute anything, so the requests wait for it, in
    // order, rather than being answered or lost (found by the linearizability checks).
    if (membership.no_servant.size() < kNoServantBufferMax) {
      membership.no_servant.push_back(request);
    } else if (!membership.no_servant_overflow) {
      membership.no_servant_overflow = true;
      Log("group")->warn("group {}: no servant attached and {} requests waiting: later ones "
                         "are dropped; the servant will get the state by rejoining",
                         group->name(), kNoServantBufferMax);
    }
    return;
  }
  DeliverRequest(group, request);
}

bool Node::CanGiveState(const Group* group) {
  // Its servant holds the group's state: it is attached, and this node is not itself waiting
  // for a state (a joiner whose provider crashed must not hand on an empty object).
  if (!HasServant(group->name())) return false;
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

void Node::DeliverRequest(Group* group, const wire::Request& request) {
  if (request.origin() != self_ && !outside_fifo_.empty()) NoteOutsideDelivered(group, request);
  if (!request.method().empty()) return DeliverInvocation(group, request);
  uint64_t group_seq = ++delivered_seq_[group->name()];
  if (request.notify_ordered()) {
    // From outside the group: it may come twice (resent through another member, SendOutside).
    // The reply cache knows it as it knows a one-way call: delivered once.
    invocation::ReplyCache::ClientKey client{request.origin(), request.origin_incarnation(),
                                             request.client_nso()};
    invocation::ReplyCache& cache = reply_caches_[group->name()];
    const wire::Reply* cached = nullptr;
    if (cache.OnDelivery(client, request.call_id(), &cached) !=
        invocation::ReplyCache::Verdict::kExecute) {
      return;
    }
    wire::Reply done;
    done.set_replier(self_);
    cache.Completed(client, request.call_id(), done);
  }
  for (auto& [id, servant] : servants_) {  // a multicast: every servant of the group gets it
    if (servant.group == group->name()) {
      servant.sink({0, group->name(), "", request.payload(), true, group->view_id(), group_seq});
    }
  }
}

void Node::DeliverInvocation(Group* group, const wire::Request& request) {
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
      // notices lag); an original only if it was ordered after 256 later calls of its client,
      // which outside_fifo.h prevents unless a wait for a predecessor ran out.
      Log("group")->warn("group {}: call {} of node {} is older than the 256 latest calls of its "
                         "client delivered here (a late copy of one delivered before): ignored",
                         group->name(), request.call_id(), request.origin());
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
  servants_[servant].sink({number, group->name(), request.method(), request.payload(),
                           request.one_way(), group->view_id(), group_seq});
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

void Node::Answer(uint64_t servant, uint64_t delivery, absl::Status status, std::string payload,
                  bool more) {
  if (AnswerStateRequest(delivery, status, payload, more)) return;
  auto it = open_deliveries_.find(delivery);
  if (it == open_deliveries_.end() || it->second.servant != servant) {
    Log("api")->warn("servant {} answered unknown delivery {}: ignored", servant, delivery);
    return;
  }
  OpenDelivery open = std::move(it->second);
  open_deliveries_.erase(it);
  open_delivery_by_call_.erase(open.cache_id);
  wire::Reply reply;
  reply.set_replier(self_);
  reply.set_status_code(static_cast<int>(status.code()));
  reply.set_error(std::string(status.message()));
  reply.set_payload(std::move(payload));
  reply_caches_[open.group].Completed(open.cache_id.first, open.cache_id.second, reply);
  for (const ReplyTarget& target : open.targets) SendReplyTo(target, open.group, reply);
}

void Node::SendReplyTo(const ReplyTarget& target, const std::string& group, wire::Reply reply) {
  reply.set_call_id(target.call_id);
  reply.set_origin(target.origin);
  reply.set_origin_incarnation(target.origin_incarnation);
  SendReply(target.to, group, reply);
}

void Node::SendReply(NodeId to, const std::string& group, const wire::Reply& reply) {
  if (to == self_) return OnReply(reply);
  wire::Envelope envelope;
  *envelope.mutable_reply() = reply;
  SendEnvelope(to, group, std::move(envelope));
}

void Node::OnReply(const wire::Reply& reply) {
  // A reply to a call of an earlier incarnation of this daemon (same call id, another call).
  if (reply.origin() == self_ && reply.origin_incarnation() != incarnation_) return;
  if (reply.ordered_notice()) {
    if (reply.origin() != self_) return;
    MarkOrdered(reply.call_id());
    // Call ids are unique per node: at most one route holds it (routes: one per group in use).
    for (auto& [group, route] : outside_routes_) {
      if (route.pending.erase(reply.call_id()) > 0) break;
    }
    return;
  }
  auto it = calls_.find({reply.origin(), reply.call_id()});
  if (it == calls_.end()) return;  // late reply of a finished call
  invocation::MemberReply member_reply;
  member_reply.node = reply.replier();
  member_reply.member = NodeName(reply.replier());
  member_reply.status = absl::Status(static_cast<absl::StatusCode>(reply.status_code()), reply.error());
  member_reply.payload = reply.payload();
  if (it->second.collector.Add(std::move(member_reply))) FinishCall(it->first, absl::OkStatus());
}

void Node::OnManagedReply(const wire::ManagedReply& reply) {
  if (reply.origin_incarnation() != incarnation_) return;  // for an earlier incarnation
  auto it = calls_.find({self_, reply.call_id()});
  if (it == calls_.end() || !it->second.managed_request) return;
  Call call = std::move(it->second);
  calls_.erase(it);
  MarkOrdered(reply.call_id());
  InvokeResult result;
  result.status = absl::Status(static_cast<absl::StatusCode>(reply.status_code()), reply.error());
  result.view_id = reply.view_id();
  result.wanted = reply.wanted();
  for (const wire::Reply& from : reply.replies()) {
    result.replies.push_back({from.replier(), NodeName(from.replier()),
                              absl::Status(static_cast<absl::StatusCode>(from.status_code()),
                                           from.error()),
                              from.payload()});
  }
  call.done(std::move(result));
}

void Node::FinishCall(CallKey key, absl::Status status) {
  auto it = calls_.find(key);
  if (it == calls_.end()) return;
  if (key.first == self_) MarkOrdered(key.second);  // replied (so ordered), or given up
  Call call = std::move(it->second);
  calls_.erase(it);
  uint64_t view_id = groups_.count(call.group) ? groups_[call.group]->view_id() : 0;
  call.done({std::move(status), call.collector.TakeReplies(), view_id, call.collector.wanted()});
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

// ---- servants ---------------------------------------------------------------------------------

absl::StatusOr<uint64_t> Node::RegisterServant(uint64_t nso, const std::string& group_name,
                                               ServantSink sink) {
  if (absl::Status status = CheckNso(nso); !status.ok()) return status;
  absl::StatusOr<Group*> group = FindGroup(group_name);
  if (!group.ok()) return group.status();
  uint64_t id = next_servant_++;
  servants_[id] = {nso, group_name, std::move(sink)};
  Log("api")->info("group {}: servant {} (NSO {}) attached", group_name, id, nso);
  GroupMembership& membership = MembershipOf(*group);
  membership.joiner.set_want_member(true);
  // State that arrived before any servant did, in order.
  std::vector<membership::StateReceiver::ServantChunk> state =
      std::move(membership.pending_servant_state);
  membership.pending_servant_state.clear();
  GiveStateToServant(*group, std::move(state));
  // Requests ordered while no servant was here, in order, after the state.
  std::vector<wire::Request> waiting = std::move(membership.no_servant);
  membership.no_servant.clear();
  for (const wire::Request& request : waiting) DeliverRequest(*group, request);
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
  membership.no_servant_overflow = false;
  membership.joiner.set_want_member(false);
  if (!(*group)->is_member() || (*group)->members().size() == 1) return;
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
    membership.joiner.set_want_member(AnyServantAttached(group->name()));
    Log("membership")->info("group {}: left after losing its servant{}", group->name(),
                            membership.joiner.want_member() ? "; a new servant is attached: rejoining" : "");
    return;
  }
  // Proposed again until it applies: a proposal can be lost with its view, or wait for a majority.
  uint64_t retry_ms = std::max<uint64_t>(group->config().exclude_timeout_ms, 500);
  if (membership.leave_proposed_ms != 0 && now_ms_ < membership.leave_proposed_ms + retry_ms) return;
  if (!group->HasMajority()) return;
  membership.leave_proposed_ms = now_ms_;
  ProposeViewChange(group, {self_}, {});
}

// ---- transport and time -----------------------------------------------------------------------

void Node::Receive(NodeId from, const wire::Envelope& envelope) {
  if (manager_watch_.watching()) manager_watch_.Heard(from, now_ms_);
  if (envelope.has_heartbeat() && envelope.heartbeat().outside_probe()) {
    // A probe from a daemon outside the group that sends requests through this one (answered
    // here, on the protocol thread, whatever the servants do), or the answer to ours.
    if (envelope.heartbeat().not_member()) {
      left_managers_.emplace(envelope.group(), from);  // for this tick's retries
    } else if (envelope.heartbeat().reply_wanted()) {
      SendOutsideProbe(from, envelope.group(), /*reply_wanted=*/false, /*not_member=*/false);
    }
    return;
  }
  if (envelope.has_reply()) return OnReply(envelope.reply());
  if (envelope.has_managed_reply()) return OnManagedReply(envelope.managed_reply());
  auto it = groups_.find(envelope.group());
  if (it == groups_.end() || it->second->group_incarnation() != envelope.group_incarnation()) {
    // Normal for a while when a reload adds a group (its members reload one after another), or
    // when the daemons create or delete a group (they deliver it one after another): said once
    // per peer and group, then every 1000th.
    if (unknown_group_drops_.size() >= 1024) unknown_group_drops_.clear();  // a peer's nonsense
    uint64_t& dropped = unknown_group_drops_[{from, envelope.group()}];
    if (dropped++ % 1000 == 0) {
      if (it == groups_.end()) {
        Log("peer")->warn("envelope from node {} for unknown group \"{}\" dropped ({} so far; "
                          "is the group in this daemon's configuration?)",
                          from, envelope.group(), dropped);
      } else {
        Log("peer")->info("envelope from node {} for incarnation {} of group \"{}\" dropped "
                          "(this daemon runs incarnation {}; {} so far)", from,
                          envelope.group_incarnation(), envelope.group(),
                          it->second->group_incarnation(), dropped);
      }
    }
    return;
  }
  Group* group = it->second.get();
  if (envelope.has_forward()) {
    auto membership = membership_.find(group->name());  // not MembershipOf: idle groups have none
    if (!group->is_member() ||
        (membership != membership_.end() && membership->second.servant_lost)) {
      // Excluded, left or leaving (its servant is gone), or not yet joined: the sender moves on
      // to another member at once rather than wait for its call's retry (a leaving manager's
      // replica cannot answer) or its one-way request's deadline.
      Log("peer")->debug("group {}: forwarded request from node {} but not a member: dropped, "
                         "the sender told", group->name(), from);
      SendOutsideProbe(from, group->name(), /*reply_wanted=*/false, /*not_member=*/true);
      return;
    }
    if (!envelope.forward().managed() && !AwaitedHere(group, envelope.forward()) &&
        StandBy(group, envelope.forward())) {
      return;
    }
    return OrderFromOutside(group, envelope.forward());
  }
  group->NoteView(from, envelope.view_id());
  if (envelope.view_id() != 0 && envelope.view_id() < group->view_id() && group->is_member()) {
    SendViewNotice(group, from);
  }
  if (envelope.has_membership()) return OnMembership(group, from, envelope);
  std::vector<consensus::Delivery> deliveries;
  group->Receive(from, envelope, &deliveries);
  DeliverAll(group, std::move(deliveries));
}

void Node::LinkChanged(NodeId peer, bool up) {
  if (!config_.failure_detector.suspect_on_disconnect) return;
  if (up) {
    links_closed_.erase(peer);
  } else {
    links_closed_.insert(peer);
  }
  for (auto& [name, group] : groups_) {
    std::vector<consensus::Delivery> deliveries;
    group->LinkChanged(peer, up, &deliveries);
    DeliverAll(group.get(), std::move(deliveries));
  }
  if (!up) {
    // Calls and one-way requests waiting at the peer as request manager (or orderer) from
    // outside its group go through the next member now, not at the next tick's timeouts.
    RetryManagedCalls();
    RetryOutsideRequests();
  }
}

void Node::Tick(uint64_t now_ms) {
  now_ms_ = std::max(now_ms_, now_ms);
  // Per group, counted once per tick (not a scan of every call for every group: a daemon may
  // host thousands of groups and calls).
  std::map<std::string, size_t, std::less<>> calls_by_group;  // copies: calls end during the loop
  for (const auto& [key, call] : calls_) ++calls_by_group[call.group];
  std::map<std::string, size_t, std::less<>> open_by_group;
  for (const auto& [number, open] : open_deliveries_) ++open_by_group[open.group];
  for (auto& [name, group] : groups_) {
    bool app_pending = calls_by_group.count(name) > 0;
    std::vector<consensus::Delivery> deliveries;
    group->Tick(now_ms_, app_pending, &deliveries);
    DeliverAll(group.get(), std::move(deliveries));
    // Primary partition (004 section 5): only a member that trusts a majority of its view
    // proposes exclusions; a member cut off from the majority waits to be excluded instead of
    // proposing a view of its minority.
    for (NodeId gone : group->TakeExclusions()) {
      if (group->HasMajority()) ProposeViewChange(group.get(), {gone}, {});
    }
    for (NodeId laggard : group->TakeBeyondLog()) {
      // It fell behind further than the decisions kept for it: only the state can bring it up
      // to date, as for a restarted member.
      if (!CanGiveState(group.get()) || !group->HasMajority()) continue;
      Log("membership")->warn("group {}: node {} is behind the decisions kept for it: "
                              "re-admitting it with the state", name, laggard);
      ProposeViewChange(group.get(), {laggard}, {laggard});
    }
    if (group->TakeWokeUp() && group->is_member()) {
      // An event-driven group woke up: a configured member outside the view (excluded while
      // cut off or crashed) learns of the view it missed and asks to rejoin, as a lively
      // group's member would from the heartbeats it keeps sending. Idle, it would never know.
      for (const std::string& name : group->config().members) {
        const PeerConfig* peer = FindPeer(name);
        if (peer != nullptr && peer->id != self_ && !group->IsMember(peer->id)) {
          SendViewNotice(group.get(), peer->id);
        }
      }
    }
    for (NodeId restarted : group->TakeRestarts()) {
      // Re-admitted with the state of a member whose servant holds it.
      if (CanGiveState(group.get())) ProposeViewChange(group.get(), {restarted}, {restarted});
    }
    TickServantLost(group.get());
    TickStandby(group.get());
    TickOutsideFifo(group.get());
    TickMembership(group.get());
    auto open = open_by_group.find(name);
    TickWatchdog(group.get(), open == open_by_group.end() ? 0 : open->second);
  }
  WatchManagers();
  RetryManagedCalls();
  RetryOutsideRequests();
  ExpireIdleNsos();
  silent_managers_.clear();
  left_managers_.clear();
  ExpireCalls();
  for (auto& submit : causal_barrier_.Expire(now_ms_)) submit();
}

}  // namespace cohort::nso
