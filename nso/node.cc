#include "nso/node.h"

#include <algorithm>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "consensus/reuse_ring.h"
#include "invocation/backpressure.h"
#include "nso/logging.h"
#include "nso/spare_payloads.h"

namespace cohort::nso {
namespace {

invocation::Mode ToMode(GroupConfig::DefaultMode mode) {
  switch (mode) {
    case GroupConfig::DefaultMode::kOneWay: return invocation::Mode::kOneWay;
    case GroupConfig::DefaultMode::kFirst: return invocation::Mode::kFirst;
    case GroupConfig::DefaultMode::kMajority: return invocation::Mode::kMajority;
    case GroupConfig::DefaultMode::kAll: return invocation::Mode::kAll;
  }
  return invocation::Mode::kAll;
}

// A method name, or the calling group a group-to-group call names, longer than this is refused:
// each travels with the request to every member (and comes back in errors), outside
// limits.max_payload_bytes.
constexpr size_t kMaxMethodBytes = 1024;
constexpr size_t kMaxCallerGroupBytes = 1024;

}  // namespace

Node::Node(const Config& config, Transport* transport, uint64_t incarnation, uint64_t now_ms)
    : Node(std::make_shared<const Config>(config), transport, incarnation, now_ms) {}

Node::Node(std::shared_ptr<const Config> config, Transport* transport, uint64_t incarnation,
           uint64_t now_ms)
    : config_owner_(std::move(config)),
      config_(*config_owner_),
      limits_(config_.limits),
      peers_(config_.peers),
      transport_(transport),
      self_(config_.node_id),
      incarnation_(incarnation),
      now_ms_(now_ms),
      next_nso_(((incarnation & 0xffffffffULL) << 32) | 1),
      // A request never ordered (its group unreachable) holds the next ones for at most this
      // long, and counts against its client's backlog (limits.max_unordered_requests) for at
      // most the default deadline.
      causal_barrier_(std::max<int64_t>(config_.limits.default_deadline_ms / 5, 200),
                      std::max<int64_t>(config_.limits.default_deadline_ms, 200)) {
  for (const GroupConfig& group_config : config_.groups) StartGroup(group_config, "");
}

void Node::RestartedFrom(uint64_t previous) {
  restarted_from_ = previous;
  for (auto& [name, group] : groups_) group->ClaimAsRestarted(previous);
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
      group_config, config_, std::move(members), transport_, incarnation_, now_ms_, &links_closed_,
      &event_log_);
  // Gathered: a daemon that starts 2,000 groups says so in a line per kind of group.
  std::string started = absl::StrCat(
      "view 1 with ", group_config.members.size(), " members (",
      std::string(ToString(group_config.ordering)), " ordering, ",
      std::string(ToString(group_config.liveness)), ", ", std::string(ToString(group_config.style)),
      " style)",
      groups_[group_config.name]->is_member() ? "" : "; this node is not a member", why);
  event_log_.Note("group", spdlog::level::info, group_config.name, started, started);
  return true;
}

std::vector<std::string> Node::AddGroups(const Config& fresh,
                                         const std::vector<std::string>& names, const char* why,
                                         bool existed) {
  std::vector<std::string> started;
  for (const std::string& name : names) {
    const GroupConfig* group_config = fresh.FindGroup(name);
    if (group_config == nullptr || groups_.count(name)) continue;
    // Each group keeps a copy of its own GroupConfig: `fresh` is a whole file when
    // a reload adds a group, and kept whole it held every group of the file once more per reload
    // (2,000 groups in the file, 100 reloads adding one group each: RSS 24 MB -> 77 MB); and
    // RemoveGroup frees a group's own.
    auto own = std::make_unique<const GroupConfig>(*group_config);
    if (!StartGroup(*own, why)) continue;
    if (existed && restarted_from_ != 0) groups_[name]->ClaimAsRestarted(restarted_from_);
    added_configs_.push_back(std::move(own));
    started.push_back(name);
  }
  return started;
}

Node::~Node() {
  for (auto& [id, call] : calls_) {
    // Only this node's clients' calls end here. A call managed for another node (this one its
    // request manager) is left to that node, which sends it again through the next member when
    // this one goes: told CANCELLED, it failed a call that could go on, and its client's later
    // requests waited for it at the other members (cohort-sim --stack --drift-ppm 0
    // --calls-per-step 3 --streams-break, seed 70032: two open calls failed, the requests after
    // them held 3 s, and two one-way calls were given up).
    if (id.first != self_) continue;
    call.done({absl::CancelledError("daemon shutting down"), call.collector.TakeReplies(), 0,
               call.collector.wanted()});
  }
  // So do the calls its clients made while it left a group, held until it is out
  // (HoldWhileLeaving): their callers were never answered (cohort-sim --stack --nodes 5 --leaves
  // --calls-per-step 4 --streams-break, seed 80097: 9 calls of a node that crashed while leaving
  // after losing its servant never completed).
  for (auto& [name, membership] : membership_) {
    std::vector<GroupMembership::Held> held = std::move(membership.held_while_leaving);
    membership.held_while_leaving.clear();
    for (GroupMembership::Held& call : held) {
      call.resume(absl::CancelledError("daemon shutting down"));
    }
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
    const GroupConfig& running = it->second->config();
    if (running.suspect_timeout_ms == group_config.suspect_timeout_ms &&
        running.exclude_timeout_ms == group_config.exclude_timeout_ms &&
        running.silence_ms == group_config.silence_ms) {
      continue;  // unchanged: nothing to apply or say (a reload of 3,000 groups said it 3,000 times)
    }
    it->second->SetTimeouts(group_config.suspect_timeout_ms, group_config.exclude_timeout_ms,
                            group_config.silence_ms);
    std::string now = absl::StrCat("timeouts now suspect ", group_config.suspect_timeout_ms,
                                   " ms, exclude ", group_config.exclude_timeout_ms,
                                   " ms, silence ", group_config.silence_ms, " ms");
    event_log_.Note("membership", spdlog::level::info, group_config.name, now, now);
  }
}

void Node::ApplyLimits(const LimitsConfig& fresh) {
  limits_ = fresh;
  Log("daemon")->info(
      "limits now: max_payload_bytes {}, max_nsos {}, nso_idle_ms {}, max_unordered_requests {}, "
      "max_unordered_bytes {}, servant_stall_ms {}, servant_cutoff_bytes {}",
      limits_.max_payload_bytes, limits_.max_nsos, limits_.nso_idle_ms,
      limits_.max_unordered_requests, limits_.max_unordered_bytes, limits_.servant_stall_ms,
      limits_.servant_cutoff_bytes);
}

// ---- NSOs -------------------------------------------------------------------------------------

absl::StatusOr<uint64_t> Node::Attach(const std::string& client_name, bool expires_when_idle,
                                      uint64_t owner) {
  if (static_cast<int64_t>(nsos_.size()) >= limits_.max_nsos) {
    return absl::ResourceExhaustedError(
        absl::StrCat("limits.max_nsos (", limits_.max_nsos, ") NSOs already attached"));
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
  std::vector<std::string> called = std::move(entry->second.groups_called);
  nsos_.erase(entry);
  RetireClient(nso, called);
  ForgetOutsideOrder(nso);
  ++nsos_detached_;
  std::vector<uint64_t> gone;
  for (const auto& [id, servant] : servants_) {
    if (servant.nso == nso) gone.push_back(id);
  }
  for (uint64_t id : gone) UnregisterServant(id);
  return absl::OkStatus();
}

void Node::NoteGroupCalled(NsoEntry* client, const std::string& group) {
  std::vector<std::string>& called = client->groups_called;
  if (std::find(called.begin(), called.end(), group) == called.end()) called.push_back(group);
}

wire::Request Node::ClientRequest(uint64_t nso, const NsoEntry* entry, Group* group,
                                  bool group_call) {
  wire::Request request;
  FillClientRequest(&request, nso, entry, group, group_call);
  return request;
}

void Node::FillClientRequest(wire::Request* request, uint64_t nso, const NsoEntry* entry,
                             Group* group, bool group_call) {
  request->Clear();
  request->set_call_id(next_call_id_++);
  request->set_origin(self_);
  request->set_origin_incarnation(incarnation_);
  request->set_client_nso(nso);
  request->set_notify_ordered(!group->is_member());
  if (group_call) return;
  if (entry != nullptr) {
    request->set_replies_taken_below(RepliesTakenBelow(*entry, request->call_id()));
  }
  // FIFO per client across routes (invocation/outside_fifo.h): its previous request here, or,
  // from a member, its last one made from outside if still awaited.
  request->set_after_call_id(group->is_member()
                                 ? PendingOutsidePredecessor(nso, group->name())
                                 : PreviousOutsideRequest(nso, group, request->call_id()));
}

void Node::RetireClient(uint64_t nso, const std::vector<std::string>& groups) {
  if (groups.empty()) return;
  if (causal_barrier_.in_flight(nso) > 0) {
    // A request of it may still be ordered after a retirement; its replies stay (a limit).
    ++clients_not_retired_;
    return;
  }
  for (const std::string& name : groups) {
    auto found = groups_.find(name);
    if (found == groups_.end() || MustHold(found->second.get())) continue;
    Group* group = found->second.get();
    wire::Request request = ClientRequest(nso, nullptr, group);  // (its entry is gone)
    request.set_one_way(true);
    request.set_retire_client(true);
    request.set_deadline_ms(static_cast<uint32_t>(limits_.default_deadline_ms));
    SubmitAsMember(group, request);
  }
  ++clients_retired_;
}

std::pair<size_t, size_t> Node::reply_cache_size(const std::string& group) const {
  auto cache = reply_caches_.find(group);
  if (cache == reply_caches_.end()) return {0, 0};
  return {cache->second.calls(), cache->second.reply_bytes()};
}

size_t Node::reply_cache_clients(const std::string& group) const {
  auto cache = reply_caches_.find(group);
  return cache == reply_caches_.end() ? 0 : cache->second.clients();
}

size_t Node::retired_client_ranges(const std::string& group) const {
  auto cache = reply_caches_.find(group);
  return cache == reply_caches_.end() ? 0 : cache->second.retired_ranges();
}

namespace {

absl::Status UnknownNso(uint64_t nso) {
  return absl::NotFoundError(absl::StrCat("unknown NSO ", nso, ": call Attach first"));
}

}  // namespace

absl::Status Node::CheckNso(uint64_t nso) const {
  auto it = nsos_.find(nso);
  if (it == nsos_.end()) return UnknownNso(nso);
  it->second.last_used_ms = now_ms_;
  return absl::OkStatus();
}

absl::StatusOr<Node::NsoEntry*> Node::UseNso(uint64_t nso) {
  auto it = nsos_.find(nso);
  if (it == nsos_.end()) return UnknownNso(nso);
  it->second.last_used_ms = now_ms_;
  return &it->second;
}

void Node::ExpireIdleNsos() {
  const uint64_t idle_ms = static_cast<uint64_t>(limits_.nso_idle_ms);
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
      const uint64_t nso = it->first;
      std::vector<std::string> called = std::move(it->second.groups_called);
      it = nsos_.erase(it);
      RetireClient(nso, called);
      ForgetOutsideOrder(nso);
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

// The one bound of both backlogs of requests: a client's not yet ordered (CheckInFlight) and this
// daemon's held by flow control (CheckHeld). With `count` of them (`bytes` of payload) and a new
// one of `more` bytes: kNone with room; else which limit is reached. One request alone is bounded
// by its payload limit only.
Node::BacklogLimit Node::BacklogFull(size_t count, size_t bytes, size_t more) const {
  if (count == 0) return BacklogLimit::kNone;
  if (static_cast<int64_t>(count) >= limits_.max_unordered_requests) return BacklogLimit::kCount;
  if (static_cast<int64_t>(bytes + more) > limits_.max_unordered_bytes) return BacklogLimit::kBytes;
  return BacklogLimit::kNone;
}

absl::Status Node::CheckInFlight(uint64_t nso, const std::string& group, size_t bytes) const {
  const size_t in_flight = causal_barrier_.in_flight(nso);
  const size_t in_flight_bytes = causal_barrier_.in_flight_bytes(nso);
  switch (BacklogFull(in_flight, in_flight_bytes, bytes)) {
    case BacklogLimit::kNone:
      return absl::OkStatus();
    case BacklogLimit::kCount:
      return invocation::BacklogError(absl::StrCat("group \"", group, "\": this client has ",
                                                   in_flight, " requests not yet ordered "
                                                   "(limits.max_unordered_requests)"));
    case BacklogLimit::kBytes:
      break;
  }
  return invocation::BacklogError(absl::StrCat(
      "group \"", group, "\": this client has ", in_flight_bytes, " bytes of requests not yet "
      "ordered; ", bytes, " more exceed limits.max_unordered_bytes (",
      limits_.max_unordered_bytes, ")"));
}

absl::Status Node::CheckHeld(const Group& group, size_t bytes) const {
  // Flow control (nso/group_flow.h) holds this daemon's requests while a member's servants are
  // behind. Each client's backlog is bounded, but many clients, or requests held past the
  // deadline for which a client's backlog counts them, would grow the held queue without end:
  // it is bounded as one client's backlog is, and new requests wait for room meanwhile.
  if (BacklogFull(group.held_count(), group.held_bytes(), bytes) == BacklogLimit::kNone) {
    return absl::OkStatus();
  }
  return invocation::BacklogError(absl::StrCat(
      "group \"", group.name(), "\": ", group.held_count(), " requests (", group.held_bytes(),
      " bytes) of this daemon wait for a member's servants to catch up (flow control: "
      "limits.servant_backlog_bytes; held up to limits.max_unordered_requests / _bytes)"));
}

absl::Status Node::Admit(uint64_t nso, const Group& group, invocation::Mode mode,
                         size_t payload_bytes) const {
  if (static_cast<int64_t>(payload_bytes) > limits_.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("payload of ", payload_bytes,
                                                   " bytes exceeds limits.max_payload_bytes (",
                                                   limits_.max_payload_bytes, ")"));
  }
  if (absl::Status room = CheckInFlight(nso, group.name(), payload_bytes); !room.ok()) return room;
  if (absl::Status room = CheckHeld(group, payload_bytes); !room.ok()) return room;
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
  // orders nothing (its majority cut off) or orders them slower than they come (overload), and
  // past their deadline they are given up unconfirmed (RetryOutsideRequests). Once the oldest
  // has waited half its deadline, new ones are refused instead: the caller learns of it while
  // those accepted still have time. If the group reported one of them ordered within
  // fail_fast_after_ms (or they began to wait since), it is ordering, only slower: a
  // backpressure refusal, which a client waits out (invocation/backpressure.h); if not,
  // UNAVAILABLE.
  if (group.is_member()) return absl::OkStatus();
  auto route = outside_routes_.find(group.name());
  if (route == outside_routes_.end() || route->second.pending.empty()) return absl::OkStatus();
  const OutsideRequest& oldest = route->second.pending.begin()->second;
  const uint64_t deadline_ms = oldest.give_up_at_ms - oldest.first_sent_ms;
  const uint64_t waited_ms = now_ms_ - oldest.first_sent_ms;
  if (2 * waited_ms <= deadline_ms) return absl::OkStatus();
  const std::string backlog = absl::StrCat(
      "group \"", group.name(), "\": ", route->second.pending.size(),
      " one-way call(s) or multicast(s) from this node not yet known ordered, the oldest for ",
      waited_ms, " ms, over half its deadline (", deadline_ms, " ms)");
  if (route->second.unreachable_since_ms != 0) {
    // Not overload: the stream to the request manager is down (this node cut off, or the
    // manager gone), whatever the group ordered lately (cohort-sim --stack --leaves
    // --streams-break --calls-per-step 4, seed 210293: refusals at t=1475-1565 blamed overload).
    return absl::UnavailableError(absl::StrCat(
        backlog, ": the stream to its request manager ", NodeName(route->second.manager),
        " has been down for ", now_ms_ - route->second.unreachable_since_ms,
        " ms (this node cut off, or the manager gone); retry later"));
  }
  const uint64_t since_progress_ms = now_ms_ - route->second.progress_ms;
  if (since_progress_ms <= static_cast<uint64_t>(config_.failure_detector.fail_fast_after_ms)) {
    return invocation::BacklogError(absl::StrCat(
        backlog, ": the group orders them slower than they come (overload; one was reported "
        "ordered ", since_progress_ms, " ms ago)"));
  }
  return absl::UnavailableError(absl::StrCat(
      backlog, ": the group is not ordering them (its majority cut off from the request manager, "
      "or overload); retry later"));
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
  absl::StatusOr<NsoEntry*> client = UseNso(nso);
  if (!client.ok()) return client.status();
  absl::StatusOr<Group*> group = FindGroup(group_name);
  if (!group.ok()) return group.status();
  // Admitted as a one-way call is: where no majority of the view is reachable (a minority
  // partition, or no view known here) it is refused at once rather than wait unordered.
  if (absl::Status admitted = Admit(nso, **group, invocation::Mode::kOneWay, payload.size());
      !admitted.ok()) {
    return admitted;
  }
  NoteGroupCalled(*client, group_name);
  if (MustHold(*group)) {  // made again from outside once this node is out (node_leaving.cc)
    return HoldWhileLeaving(*group, now_ms_ + limits_.default_deadline_ms,
                            [this, nso, group_name, payload = std::move(payload)](absl::Status status) {
      if (status.ok()) status = Multicast(nso, group_name, payload);
      if (!status.ok()) {
        Log("api")->warn("group {}: a multicast of client {} made while this node left the group "
                         "was not sent: {}", group_name, nso, status.ToString());
      }
    });
  }
  wire::Request request = ClientRequest(nso, *client, *group);
  request.set_payload(std::move(payload));
  request.set_one_way(true);
  SubmitRequestInCausalOrder(*group, request, std::nullopt);
  return absl::OkStatus();
}

void Node::Invoke(uint64_t nso, InvokeOptions options, InvokeDone done) {
  auto fail = [&](absl::Status status) { done({std::move(status), {}, 0, 0}); };
  absl::StatusOr<NsoEntry*> client = UseNso(nso);
  if (!client.ok()) return fail(client.status());
  absl::StatusOr<Group*> found = FindGroup(options.group);
  if (!found.ok()) return fail(found.status());
  Group* group = *found;
  if (options.method.empty()) return fail(absl::InvalidArgumentError("method name is empty"));
  if (options.method.size() > kMaxMethodBytes) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "method name of ", options.method.size(), " bytes is longer than ", kMaxMethodBytes)));
  }
  if (options.caller_group.size() > kMaxCallerGroupBytes) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("caller group name of ", options.caller_group.size(),
                     " bytes is longer than ", kMaxCallerGroupBytes)));
  }
  if (options.method[0] == '$') {  // kGetStateMethod, kSetStateMethod: the daemon's own
    return fail(absl::InvalidArgumentError(
        absl::StrCat("method \"", options.method, "\" is reserved (names starting with '$')")));
  }
  invocation::Mode mode = options.mode_given ? options.mode : ToMode(group->config().default_mode);
  if (absl::Status admitted = Admit(nso, *group, mode, options.payload.size()); !admitted.ok()) {
    return fail(admitted);
  }
  // A group's call (caller_group) is cached under its caller group, not this client.
  if (options.caller_group.empty()) NoteGroupCalled(*client, group->name());
  const uint64_t deadline_ms =
      options.deadline_ms ? options.deadline_ms : limits_.default_deadline_ms;
  if (MustHold(group)) {  // made again from outside once this node is out (node_leaving.cc)
    const uint64_t since_ms = now_ms_;
    absl::Status held = HoldWhileLeaving(
        group, since_ms + deadline_ms,
        [this, nso, options, done, deadline_ms, since_ms](absl::Status status) mutable {
          if (!status.ok()) return done({std::move(status), {}, 0, 0});
          options.deadline_ms = deadline_ms - std::min(deadline_ms - 1, now_ms_ - since_ms);
          Invoke(nso, std::move(options), std::move(done));
        });
    if (!held.ok()) fail(held);
    return;
  }
  GroupConfig::Style style = options.style.value_or(group->config().style);
  uint32_t view_size = group->members().size();
  wire::Request own_request;  // (when the kept one is in use: a nested call)
  const bool kept = !invoke_request_busy_;
  wire::Request& request = kept ? invoke_request_ : own_request;
  invoke_request_busy_ = true;
  absl::Cleanup release = [this, kept, &request] {
    if (!kept) return;
    invoke_request_busy_ = false;
    consensus::EmptyForReuse(request.mutable_payload());  // (a large payload's memory goes)
  };
  FillClientRequest(&request, nso, *client, group,
                    /*group_call=*/!options.caller_group.empty());
  request.set_method(std::move(options.method));
  request.mutable_payload()->swap(options.payload);
  SparePayloads().Keep(std::move(options.payload));  // the kept request's last one's memory
  request.set_mode(static_cast<int>(mode));
  request.set_reply_to(self_);
  request.set_deadline_ms(deadline_ms);
  // (Set only when there is one: setting even an empty string allocates one.)
  if (!options.caller_group.empty()) request.set_caller_group(options.caller_group);
  request.set_group_call_id(options.group_call_id);
  bool open = style == GroupConfig::Style::kOpen;
  // 003 section 4.2, asynchronous forwarding: for wait-for-first through an open group only the
  // request manager's replica answers; the others execute silently.
  request.set_reply_from_manager_only(open && mode == invocation::Mode::kFirst);
  if (mode == invocation::Mode::kOneWay) {
    request.set_one_way(true);
    SubmitRequestInCausalOrder(group, request, std::nullopt);
    return done({absl::OkStatus(), {}, group->view_id(), 0});
  }
  CallKey key{self_, request.call_id()};
  Call call{options.group,
            invocation::ReplyCollector(mode, request.reply_from_manager_only() ? 1 : view_size),
            now_ms_ + deadline_ms, deadline_ms, std::move(done)};
  call.nso = nso;
  (*client)->awaited.Add(request.call_id());
  if (open && !group->is_member()) {
    // Open group: the client/server group holds this NSO and one server, the request manager,
    // which re-issues the call in the server group and returns the replies (003 section 4.1).
    request.set_managed(true);
    // The managed reply (or the call's end) tells this node the call was ordered: no member
    // needs to send an ordered notice (three wake-ups of this node per call, issue 7).
    request.set_notify_ordered(false);
    const CausalTicket ticket = TicketOf(request);
    KeepOutsideRequest(&request, kept, &call.managed_request);
    call.manager_index = preferred_manager_[group->name()];  // restricted group: one manager
    AddCall(key, std::move(call));
    SubmitInCausalOrder(ticket, group, [this, key](Group* live) {
      auto it = calls_.find(key);
      if (it != calls_.end()) SendManaged(live, &it->second);  // unless it expired meanwhile
    });
    return;
  }
  if (!group->is_member() && request.caller_group().empty()) {
    // Closed group from outside: every member gets the call, one orders it (wire.proto, orderer),
    // the member the client's open and one-way calls go to, so they keep their order.
    const CausalTicket ticket = TicketOf(request);
    KeepOutsideRequest(&request, kept, &call.closed_request);
    call.manager_index = preferred_manager_[group->name()];
    AddCall(key, std::move(call));
    SubmitInCausalOrder(ticket, group, [this, key](Group* live) {
      auto it = calls_.find(key);
      if (it != calls_.end()) SendClosedOut(live, &it->second);
    });
    return;
  }
  AddCall(key, std::move(call));
  SubmitRequestInCausalOrder(group, request, key);
}

void Node::KeepOutsideRequest(wire::Request* request, bool kept,
                              std::optional<wire::Request>* into) {
  into->emplace();
  (*into)->Swap(request);  // heap messages: their objects change hands, nothing is copied
  if (kept) request->Swap(&spare_outside_request_);
}

void Node::SubmitRequestInCausalOrder(Group* group, const wire::Request& request,
                                      std::optional<CallKey> key) {
  auto submit_now = [this, key, &request](Group* live) {
    if (!key || calls_.count(*key)) SubmitAsMember(live, request);
  };
  SubmitInCausalOrder(TicketOf(request), group, submit_now, [this, key, &request] {
    return [this, key, request = request](Group* live) {  // (a copy: the caller's goes)
      if (!key || calls_.count(*key)) SubmitAsMember(live, request);
    };
  });
}

template <typename SubmitFn>
void Node::SubmitInCausalOrder(const CausalTicket& ticket, Group* group, SubmitFn submit) {
  SubmitInCausalOrder(ticket, group, submit, [&submit] { return std::move(submit); });
}

template <typename SubmitFn, typename MakeHeldFn>
void Node::SubmitInCausalOrder(const CausalTicket& ticket, Group* group, SubmitFn& submit_now,
                               MakeHeldFn make_held) {
  // A held submission may be released past a DeleteGroup (and a new group of the same name): it
  // goes to the group it was made for, or nowhere.
  auto held = [&]() -> invocation::CausalBarrier::Submit {
    return [this, name = group->name(), incarnation = group->group_incarnation(),
            submit = make_held()] {
      auto it = groups_.find(name);
      if (it != groups_.end() && it->second->group_incarnation() == incarnation) {
        submit(it->second.get());
      }
    };
  };
  if (causal_barrier_.AdmitOrHold(ticket.client_nso, group->name(), ticket.call_id, now_ms_,
                                  ticket.bytes, held)) {
    submit_now(group);
  }
}

void Node::MarkOrdered(uint64_t call_id) {
  for (auto& submit : causal_barrier_.Ordered(call_id, now_ms_)) submit();
}

void Node::SendForward(NodeId to, const std::string& group, const wire::Request& request) {
  SendForwardTo({to}, group, request, /*with_view=*/true);
}

void Node::SendForwardTo(absl::Span<const NodeId> to, const std::string& group,
                         const wire::Request& request, bool with_view) {
  wire::Envelope own;
  const bool kept = !forward_envelope_busy_ && std::find(to.begin(), to.end(), self_) == to.end();
  wire::Envelope& envelope = kept ? forward_envelope_ : own;
  if (kept) {
    // The request is lent to the kept envelope while it is written (the transport serialises
    // before Send returns), as Submit lends it to its GroupMessage: no copy (issue 7).
    // SendEnvelopeInPlace sets the rest.
    forward_envelope_busy_ = true;
    envelope.Clear();
    envelope.unsafe_arena_set_allocated_forward(const_cast<wire::Request*>(&request));
  } else {
    *envelope.mutable_forward() = request;
  }
  absl::Cleanup release = [this, kept] {
    if (!kept) return;
    forward_envelope_.unsafe_arena_release_forward();  // given back before anything reads it
    forward_envelope_busy_ = false;
  };
  // The latest view this node knows: a member that is behind it may have been excluded (Receive).
  auto known = with_view ? groups_.find(group) : groups_.end();
  if (known != groups_.end()) {
    envelope.set_view_id(known->second->view_id());
    if (known->second->holds_no_state()) envelope.set_awaiting_state(true);
  }
  for (NodeId member : to) {
    if (kept) {
      SendEnvelopeInPlace(member, group, &envelope);
    } else {
      SendEnvelope(member, group, envelope);  // a copy each: a receiver here may take it apart
    }
  }
}

void Node::SendEnvelopeInPlace(NodeId to, const std::string& group, wire::Envelope* envelope) {
  envelope->set_version(wire::VERSION_1);
  envelope->set_group(group);
  // Replies are routed by call id before the receiver looks at the group (Receive): only the
  // rest needs the group's incarnation.
  if (!envelope->has_reply() && !envelope->has_managed_reply()) {
    auto it = groups_.find(group);
    if (it != groups_.end() && it->second->group_incarnation() != 0) {
      envelope->set_group_incarnation(it->second->group_incarnation());
    }
  }
  envelope->set_sender_node(self_);
  envelope->set_incarnation(incarnation_);
  if (to == self_) return Receive(self_, *envelope);
  transport_->Send(to, *envelope);
}

void Node::Submit(Group* group, const wire::Request& request) {
  if (group->is_member()) {
    // Serialised as a GroupMessage without copying the request into one (issue 7).
    wire::GroupMessage message;
    message.unsafe_arena_set_allocated_request(const_cast<wire::Request*>(&request));
    std::string payload = group->SparePayload();  // a delivered one's memory (issue 7)
    message.AppendToString(&payload);
    message.unsafe_arena_release_request();
    consensus::Deliveries deliveries;
    group->Broadcast(std::move(payload), &deliveries);
    DeliverAll(group, std::move(deliveries));
    return;
  }
  // A multicast or one-way call from outside the group: one member orders it.
  if (request.method().empty() || request.one_way()) return SendOutside(group, request);
  // Closed group from outside the server group: the client multicasts to every server
  // (003 section 4.1); the one named in `orderer` orders it, the others stand by (StandBy), and
  // the reply cache executes it once whoever ordered it.
  SendForwardTo(group->members(), group->name(), request, /*with_view=*/false);
}

// ---- transport and time -----------------------------------------------------------------------

void Node::Receive(NodeId from, wire::Envelope& envelope) {
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
  if (envelope.has_reply()) {
    const wire::Reply& reply = envelope.reply();
    if (reply.predecessor_missing()) {
      if (reply.predecessor_gone()) return OnPredecessorGone(from, envelope.group(), reply);
      return OnPredecessorMissing(from, envelope.group(), reply);
    }
    // Its payload moved to the result, not copied (issue 7: no copy per message).
    return OnReply(reply, envelope.mutable_reply()->mutable_payload());
  }
  if (envelope.has_managed_reply()) return OnManagedReply(envelope.mutable_managed_reply());
  auto it = groups_.find(envelope.group());
  if (it == groups_.end() || it->second->group_incarnation() != envelope.group_incarnation()) {
    // Normal for a moment when a reload adds a group (its members reload one after another), or
    // when the daemons create or delete a group (they deliver it one after another): noted at
    // info, and a warning only if it lasts kUnknownGroupWarnMs (every create-group warned).
    if (unknown_group_drops_.size() >= 1024) unknown_group_drops_.clear();  // a peer's nonsense
    UnknownGroupDrops& drops = unknown_group_drops_[{from, envelope.group()}];
    if (drops.count == 0 || now_ms_ > drops.last_ms + kUnknownGroupStreakMs) {
      drops = {0, now_ms_, now_ms_, false};  // a new streak (the group may have come and gone)
    }
    drops.count++;
    drops.last_ms = now_ms_;
    const bool warn = now_ms_ >= drops.first_ms + kUnknownGroupWarnMs &&
                      (!drops.warned || drops.count % 1000 == 0);
    if (drops.count == 1 || warn) {
      drops.warned = drops.warned || warn;
      if (it == groups_.end()) {
        Log("peer")->log(warn ? spdlog::level::warn : spdlog::level::info,
                         "envelope from node {} for unknown group \"{}\" dropped ({} in {} ms; {})",
                         from, envelope.group(), drops.count, now_ms_ - drops.first_ms,
                         warn ? "is the group in this daemon's configuration?"
                              : "normal while the daemons create, delete or reload it");
      } else {
        Log("peer")->info("envelope from node {} for incarnation {} of group \"{}\" dropped "
                          "(this daemon runs incarnation {}; {} so far)", from,
                          envelope.group_incarnation(), envelope.group(),
                          it->second->group_incarnation(), drops.count);
      }
    }
    return;
  }
  Group* group = it->second.get();
  if (envelope.has_forward()) {
    // The sender knows a later view than this member: this member may have been excluded
    // without knowing it yet (cut off, then healed), and would order the request in a view
    // that no longer orders anything (cohort-sim --stack, seed 40137: two one-way calls waited
    // there 500 ms, until that member died, and were then refused as out of order). The sender
    // goes through another member; this one learns of the later view.
    const bool behind = envelope.view_id() > group->view_id();
    if (behind) {
      group->NoteView(from, envelope.view_id(), envelope.incarnation(), envelope.awaiting_state());
    }
    if (!group->is_member() || Leaving(group) || behind) {
      // Excluded, left or leaving (told to, or its servant is gone), or not yet joined: the
      // sender moves on to another member at once rather than wait for its call's retry (a
      // leaving manager's replica cannot answer) or its one-way request's deadline.
      Log("peer")->debug("group {}: forwarded request from node {} but not a member: dropped, "
                         "the sender told", group->name(), from);
      SendOutsideProbe(from, group->name(), /*reply_wanted=*/false, /*not_member=*/true);
      return;
    }
    if (!envelope.forward().managed() && !AwaitedHere(group, envelope.forward()) &&
        StandBy(group, envelope.mutable_forward())) {
      return;
    }
    return OrderFromOutside(group, std::move(*envelope.mutable_forward()));
  }
  group->NoteView(from, envelope.view_id(), envelope.incarnation(), envelope.awaiting_state());
  if (envelope.view_id() != 0 && envelope.view_id() < group->view_id() && group->is_member()) {
    SendViewNotice(group, from);
  }
  if (envelope.has_membership()) return OnMembership(group, from, envelope);
  consensus::Deliveries deliveries;
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
    consensus::Deliveries deliveries;
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
  // host thousands of groups and calls), by name (copies: calls end during the loop).
  tick_calls_.Reset();
  for (const auto& [key, call] : calls_) tick_calls_.Add(call.group);
  tick_open_.Reset();
  for (const auto& [number, open] : open_deliveries_) tick_open_.Add(open.group);
  TickFlow();
  for (auto& [name, group] : groups_) {
    const bool app_pending = tick_calls_.Get(name) > 0;
    const uint64_t unread_bytes = tick_unread_.Get(name);
    const uint64_t open_deliveries = tick_open_.Get(name);
    // An idle event-driven group dozes (Group::Dozing): skipped, unless calls wait in it.
    if (group->Dozing(now_ms_) && !app_pending && unread_bytes == 0 && open_deliveries == 0) {
      continue;
    }
    consensus::Deliveries deliveries;
    group->Tick(now_ms_, app_pending, &deliveries);
    DeliverAll(group.get(), std::move(deliveries));
    group->ObserveServants(unread_bytes);
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
      ProposeViewChange(group.get(), {laggard}, {laggard},
                        {group->MemberIncarnation(laggard)});
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
    for (const auto& [restarted, incarnation] : group->TakeRestarts()) {
      // Re-admitted with the state of a member whose servant holds it.
      if (CanGiveState(group.get())) {
        ProposeViewChange(group.get(), {restarted}, {restarted}, {incarnation});
      }
    }
    SendRestartNotices(group.get());
    TickServantLost(group.get());
    // Before TickLeaving: once out of the group, this node's own requests still held as a
    // member go outside first (TickOutsideFifo), so that the calls held while it left, made
    // again from outside by TickLeaving, name them as their predecessors (cohort-sim --stack
    // --calls-per-step 4, seed 40219: a closed call held while its node left after losing its
    // servant named an older one, was ordered first, and the open call before it, which its
    // caller still awaited, was refused as out of order).
    TickOutsideFifo(group.get());
    TickLeaving(group.get());
    TickStandby(group.get());
    TickMembership(group.get());
    TickDurable(group.get());
    TickWatchdog(group.get(), open_deliveries);
  }
  WatchManagers();
  RetryManagedCalls();
  RetryOutsideRequests();
  ExpireIdleNsos();
  silent_managers_.clear();
  left_managers_.clear();
  ExpireCalls();
  for (auto& submit : causal_barrier_.Expire(now_ms_)) submit();
  if (!watches_.empty()) CheckWatches();
  event_log_.Flush();
}

}  // namespace cohort::nso
