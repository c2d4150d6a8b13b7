#include "nso/node.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"

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

}  // namespace

Node::Node(const Config& config, Transport* transport, uint64_t now_ms)
    : config_(config), transport_(transport), self_(config.node_id), now_ms_(now_ms) {
  for (const GroupConfig& group_config : config_.groups) {
    std::vector<NodeId> members;
    for (const std::string& member : group_config.members) {
      members.push_back(config_.FindPeer(member)->id);
    }
    groups_[group_config.name] =
        std::make_unique<Group>(group_config, config_, std::move(members), transport_, now_ms);
    Log("group")->info("group {}: view 1 with {} members ({} ordering, {}, {} style){}",
                       group_config.name, group_config.members.size(),
                       ToString(group_config.ordering), ToString(group_config.liveness),
                       ToString(group_config.style),
                       groups_[group_config.name]->is_member() ? "" : "; this node is not a member");
  }
}

Node::~Node() {
  for (auto& [id, call] : calls_) {
    call.done({absl::CancelledError("daemon shutting down"), call.collector.TakeReplies(), 0,
               call.collector.wanted()});
  }
}

std::string Node::NodeName(NodeId node) const {
  const PeerConfig* peer = config_.FindPeerById(node);
  return peer ? peer->name : absl::StrCat("node-", node);
}

std::vector<const Group*> Node::groups() const {
  std::vector<const Group*> out;
  for (const auto& [name, group] : groups_) out.push_back(group.get());
  return out;
}

// ---- NSOs -------------------------------------------------------------------------------------

absl::StatusOr<uint64_t> Node::Attach(const std::string& client_name) {
  if (static_cast<int64_t>(nsos_.size()) >= config_.limits.max_nsos) {
    return absl::ResourceExhaustedError(
        absl::StrCat("limits.max_nsos (", config_.limits.max_nsos, ") NSOs already attached"));
  }
  uint64_t nso = next_nso_++;
  nsos_[nso] = client_name;
  Log("api")->debug("NSO {} attached for client \"{}\"", nso, client_name);
  return nso;
}

absl::Status Node::Detach(uint64_t nso) {
  if (nsos_.erase(nso) == 0) return absl::NotFoundError(absl::StrCat("unknown NSO ", nso));
  std::vector<uint64_t> gone;
  for (const auto& [id, servant] : servants_) {
    if (servant.nso == nso) gone.push_back(id);
  }
  for (uint64_t id : gone) UnregisterServant(id);
  return absl::OkStatus();
}

absl::Status Node::CheckNso(uint64_t nso) const {
  if (nsos_.count(nso) == 0) {
    return absl::NotFoundError(absl::StrCat("unknown NSO ", nso, ": call Attach first"));
  }
  return absl::OkStatus();
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
  if (static_cast<int64_t>(payload.size()) > config_.limits.max_payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("payload of ", payload.size(),
                                                   " bytes exceeds limits.max_payload_bytes (",
                                                   config_.limits.max_payload_bytes, ")"));
  }
  wire::Request request;
  request.set_origin(self_);
  request.set_client_nso(nso);
  request.set_payload(std::move(payload));
  request.set_one_way(true);
  Submit(*group, request);
  return absl::OkStatus();
}

void Node::Invoke(uint64_t nso, InvokeOptions options, InvokeDone done) {
  auto fail = [&](absl::Status status) { done({std::move(status), {}, 0, 0}); };
  if (absl::Status status = CheckNso(nso); !status.ok()) return fail(status);
  absl::StatusOr<Group*> found = FindGroup(options.group);
  if (!found.ok()) return fail(found.status());
  Group* group = *found;
  if (options.method.empty()) return fail(absl::InvalidArgumentError("method name is empty"));
  if (static_cast<int64_t>(options.payload.size()) > config_.limits.max_payload_bytes) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("payload of ", options.payload.size(), " bytes exceeds limits.max_payload_bytes (",
                     config_.limits.max_payload_bytes, ")")));
  }
  invocation::Mode mode = options.mode_given ? options.mode : ToMode(group->config().default_mode);
  uint32_t view_size = group->members().size();
  uint32_t wanted = invocation::RepliesWanted(mode, view_size);
  // Fail fast rather than wait for the deadline when the mode cannot be met: ordering needs a
  // majority of the view (primary partition), and the mode needs `wanted` members.
  uint32_t reachable = group->trusted_count();
  uint32_t needed = std::max(wanted, view_size / 2 + 1);
  if (reachable < needed) {
    return fail(absl::UnavailableError(absl::StrCat(
        "group \"", options.group, "\": ", invocation::ModeName(mode), " needs ", needed, " of ",
        view_size, " members, ", reachable, " reachable")));
  }
  wire::Request request;
  request.set_origin(self_);
  request.set_client_nso(nso);
  request.set_method(std::move(options.method));
  request.set_payload(std::move(options.payload));
  if (mode == invocation::Mode::kOneWay) {
    request.set_one_way(true);
    Submit(group, request);
    return done({absl::OkStatus(), {}, group->view_id(), 0});
  }
  uint64_t call_id = next_call_id_++;
  request.set_call_id(call_id);
  uint64_t deadline_ms = options.deadline_ms ? options.deadline_ms : config_.limits.default_deadline_ms;
  calls_.emplace(call_id, Call{call_id, options.group, invocation::ReplyCollector(mode, view_size),
                               now_ms_ + deadline_ms, deadline_ms, std::move(done)});
  Submit(group, request);
}

void Node::Submit(Group* group, const wire::Request& request) {
  if (group->is_member()) {
    std::vector<consensus::Delivery> deliveries;
    group->Broadcast(request.SerializeAsString(), &deliveries);
    for (const auto& delivery : deliveries) OnDeliver(group, delivery);
    return;
  }
  // Not a member: hand the request to the group's request manager (003 section 4.1).
  wire::Envelope envelope;
  *envelope.mutable_forward() = request;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(group->name());
  envelope.set_sender_node(self_);
  envelope.set_view_id(group->view_id());
  transport_->Send(group->RequestManager(), std::move(envelope));
}

void Node::OnDeliver(Group* group, const consensus::Delivery& delivery) {
  wire::Request request;
  if (!request.ParseFromString(delivery.payload)) {
    Log("group")->error("group {}: undecodable request from node {} seq {} skipped", group->name(),
                        delivery.origin, delivery.seq);
    return;
  }
  std::vector<uint64_t> servants;
  for (const auto& [id, servant] : servants_) {
    if (servant.group == group->name()) servants.push_back(id);
  }
  if (request.method().empty()) {  // a multicast: every servant of the group receives it
    for (uint64_t id : servants) {
      servants_[id].sink({0, group->name(), "", request.payload(), true, group->view_id()});
    }
    return;
  }
  if (servants.empty()) {
    if (request.one_way()) return;
    wire::Reply reply;
    reply.set_call_id(request.call_id());
    reply.set_replier(self_);
    reply.set_status_code(static_cast<int>(absl::StatusCode::kUnavailable));
    reply.set_error(absl::StrCat("no servant attached for group \"", group->name(), "\" at ",
                                 config_.node));
    SendReply(request.origin(), group->name(), std::move(reply));
    return;
  }
  // The first servant registered for the group executes invocations at this replica.
  uint64_t servant = servants.front();
  uint64_t number = next_delivery_++;
  if (!request.one_way()) {
    open_deliveries_[number] = {request.call_id(), request.origin(), group->name(), servant};
  }
  servants_[servant].sink({number, group->name(), request.method(), request.payload(),
                           request.one_way(), group->view_id()});
}

void Node::Answer(uint64_t servant, uint64_t delivery, absl::Status status, std::string payload) {
  auto it = open_deliveries_.find(delivery);
  if (it == open_deliveries_.end() || it->second.servant != servant) {
    Log("api")->warn("servant {} answered unknown delivery {}: ignored", servant, delivery);
    return;
  }
  OpenDelivery open = it->second;
  open_deliveries_.erase(it);
  wire::Reply reply;
  reply.set_call_id(open.call_id);
  reply.set_replier(self_);
  reply.set_status_code(static_cast<int>(status.code()));
  reply.set_error(std::string(status.message()));
  reply.set_payload(std::move(payload));
  SendReply(open.origin, open.group, std::move(reply));
}

void Node::SendReply(NodeId origin, const std::string& group, wire::Reply reply) {
  if (origin == self_) return OnReply(reply);
  wire::Envelope envelope;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(group);
  envelope.set_sender_node(self_);
  *envelope.mutable_reply() = std::move(reply);
  transport_->Send(origin, std::move(envelope));
}

void Node::OnReply(const wire::Reply& reply) {
  auto it = calls_.find(reply.call_id());
  if (it == calls_.end()) return;  // late reply of a finished call
  invocation::MemberReply member_reply;
  member_reply.node = reply.replier();
  member_reply.member = NodeName(reply.replier());
  member_reply.status = absl::Status(static_cast<absl::StatusCode>(reply.status_code()), reply.error());
  member_reply.payload = reply.payload();
  if (it->second.collector.Add(std::move(member_reply))) FinishCall(reply.call_id(), absl::OkStatus());
}

void Node::FinishCall(uint64_t call_id, absl::Status status) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  calls_.erase(it);
  uint64_t view_id = groups_.count(call.group) ? groups_[call.group]->view_id() : 0;
  call.done({std::move(status), call.collector.TakeReplies(), view_id, call.collector.wanted()});
}

void Node::ExpireCalls() {
  std::vector<uint64_t> expired;
  for (const auto& [id, call] : calls_) {
    if (now_ms_ >= call.deadline_at_ms) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    const Call& call = calls_.at(id);
    FinishCall(id, absl::DeadlineExceededError(absl::StrCat(
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
  if (!(*group)->is_member()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", config_.node, " is not a member of group \"", group_name, "\": a servant for it ",
        "must attach to a member daemon"));
  }
  uint64_t id = next_servant_++;
  servants_[id] = {nso, group_name, std::move(sink)};
  Log("api")->info("group {}: servant {} (NSO {}) attached", group_name, id, nso);
  return id;
}

void Node::UnregisterServant(uint64_t servant) {
  auto it = servants_.find(servant);
  if (it == servants_.end()) return;
  Log("api")->info("group {}: servant {} detached", it->second.group, servant);
  servants_.erase(it);
  // Deliveries it never answered get an error reply, so their callers do not wait in vain.
  std::vector<uint64_t> orphaned;
  for (const auto& [number, open] : open_deliveries_) {
    if (open.servant == servant) orphaned.push_back(number);
  }
  for (uint64_t number : orphaned) {
    Answer(servant, number, absl::UnavailableError("servant detached before answering"), "");
  }
}

// ---- transport and time -----------------------------------------------------------------------

void Node::Receive(NodeId from, const wire::Envelope& envelope) {
  auto it = groups_.find(envelope.group());
  if (envelope.has_reply()) return OnReply(envelope.reply());
  if (it == groups_.end()) {
    Log("peer")->warn("envelope from node {} for unknown group \"{}\" dropped", from, envelope.group());
    return;
  }
  Group* group = it->second.get();
  if (envelope.has_forward()) {
    if (!group->is_member()) {
      Log("peer")->warn("group {}: forwarded request from node {} but not a member: dropped",
                        group->name(), from);
      return;
    }
    return Submit(group, envelope.forward());
  }
  std::vector<consensus::Delivery> deliveries;
  group->Receive(from, envelope, &deliveries);
  for (const auto& delivery : deliveries) OnDeliver(group, delivery);
}

void Node::Tick(uint64_t now_ms) {
  now_ms_ = std::max(now_ms_, now_ms);
  for (auto& [name, group] : groups_) {
    bool app_pending = std::any_of(calls_.begin(), calls_.end(),
                                   [&](const auto& entry) { return entry.second.group == name; });
    std::vector<consensus::Delivery> deliveries;
    group->Tick(now_ms_, app_pending, &deliveries);
    for (const auto& delivery : deliveries) OnDeliver(group.get(), delivery);
    for (NodeId gone : group->TakeExclusions()) {
      std::vector<uint64_t> complete;
      for (auto& [id, call] : calls_) {
        if (call.group != name) continue;
        call.collector.MemberGone(gone);
        if (call.collector.complete()) complete.push_back(id);
      }
      for (uint64_t id : complete) FinishCall(id, absl::OkStatus());
    }
  }
  ExpireCalls();
}

}  // namespace cohort::nso
