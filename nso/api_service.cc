#include "nso/api_service.h"

#include <chrono>
#include <deque>
#include <future>
#include <memory>

#include <grpc/grpc_security_constants.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nso/logging.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

absl::StatusOr<invocation::Mode> FromApiMode(api::Mode mode) {
  switch (mode) {
    case api::ONE_WAY: return invocation::Mode::kOneWay;
    case api::WAIT_FIRST: return invocation::Mode::kFirst;
    case api::WAIT_MAJORITY: return invocation::Mode::kMajority;
    case api::WAIT_ALL: return invocation::Mode::kAll;
    default: return absl::InvalidArgumentError(absl::StrCat("unknown invocation mode ", mode));
  }
}

}  // namespace

const char* ModeLabel(api::Mode mode) {
  switch (mode) {
    case api::ONE_WAY: return "one_way";
    case api::WAIT_FIRST: return "first";
    case api::WAIT_MAJORITY: return "majority";
    case api::WAIT_ALL: return "all";
    case api::MODE_UNSPECIFIED: return "default";
    default: return "invalid";
  }
}

std::string CodeLabel(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

namespace {

// Equal in time independent of where the first difference is.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

const char* RightName(Right right) {
  switch (right) {
    case Right::kJoin: return "join";
    case Right::kInvoke: return "invoke";
    case Right::kAdmin: return "admin";
  }
  return "?";
}

void AccessPolicy::Update(const Config& config) {
  std::map<std::string, AclConfig, std::less<>> acls;
  std::vector<std::string> creators = config.dynamic_group_creators;
  for (const GroupConfig& group : config.groups) {
    if (group.acl) acls[group.name] = *group.acl;
  }
  absl::MutexLock lock(&mu_);
  tokens_ = config.tokens;
  acls_ = std::move(acls);
  creators_ = std::move(creators);
  if (!client_certificates_fixed_) {
    client_certificates_ = config.client_certificates;
    certificate_name_ = config.certificate_name;
    client_certificates_fixed_ = true;
  }
}

bool AccessPolicy::auth_enabled() const {
  absl::MutexLock lock(&mu_);
  return !tokens_.empty() || client_certificates_;
}

namespace {

// The auth context's property holding the names of the kind auth.certificate_name chose.
const char* CertificateNameProperty(CertificateNameField field) {
  switch (field) {
    case CertificateNameField::kCommonName: return GRPC_X509_CN_PROPERTY_NAME;
    case CertificateNameField::kDns: return GRPC_PEER_DNS_PROPERTY_NAME;
    case CertificateNameField::kUri: return GRPC_PEER_URI_PROPERTY_NAME;
  }
  return GRPC_X509_CN_PROPERTY_NAME;
}

// The name (of the kind `field`; the first one, for subject alternative names) of the verified
// client certificate of the call's TLS connection, or "".
std::string CertificateName(const grpc::ServerContextBase& context, CertificateNameField field) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return "";
  std::vector<grpc::string_ref> names = auth->FindPropertyValues(CertificateNameProperty(field));
  return names.empty() ? "" : std::string(names.front().data(), names.front().size());
}

}  // namespace

grpc::Status AccessPolicy::Authenticate(const grpc::ServerContextBase& context,
                                        std::string* caller) const {
  caller->clear();
  bool certificates;
  CertificateNameField field;
  {
    absl::MutexLock lock(&mu_);
    if (tokens_.empty() && !client_certificates_) return grpc::Status::OK;  // no authentication
    certificates = client_certificates_;
    field = certificate_name_;
  }
  std::string token;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    std::string value(it->second.data(), it->second.size());
    constexpr absl::string_view kBearer = "Bearer ";
    if (value.size() <= kBearer.size() || !absl::StartsWith(value, kBearer)) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "authorization metadata must be \"Bearer <token>\"");
    }
    token = value.substr(kBearer.size());
  }
  if (!certificates && token.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "this daemon requires metadata \"authorization: Bearer <token>\"");
  }
  std::string certified = certificates ? CertificateName(context, field) : "";
  return Combine(certificates, certified, token, caller);
}

grpc::Status AccessPolicy::AuthenticateLocal(const std::string& certified,
                                             const std::string& token, std::string* caller) const {
  caller->clear();
  bool certificates;
  {
    absl::MutexLock lock(&mu_);
    if (tokens_.empty() && !client_certificates_) return grpc::Status::OK;  // no authentication
    certificates = client_certificates_;
  }
  return Combine(certificates, certified, token, caller);
}

grpc::Status AccessPolicy::Combine(bool certificates, const std::string& certified,
                                   const std::string& token, std::string* caller) const {
  if (certificates && certified.empty()) {
    CertificateNameField field;
    {
      absl::MutexLock lock(&mu_);
      field = certificate_name_;
    }
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        absl::StrCat("this daemon requires a TLS client certificate from its CA, with ",
                     field == CertificateNameField::kDns   ? "a DNS subject alternative name"
                     : field == CertificateNameField::kUri ? "a URI subject alternative name"
                                                           : "a common name",
                     " (auth.client_certificates, auth.certificate_name): none was presented"));
  }
  if (certified.empty()) return AuthenticateToken(token, caller);
  if (!token.empty()) {
    // Both: one caller cannot be two applications.
    std::string named;
    grpc::Status known = AuthenticateToken(token, &named);
    if (!known.ok()) return known;
    if (named != certified) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          absl::StrCat("the bearer token names \"", named,
                                       "\" but the client certificate \"", certified, "\""));
    }
  }
  *caller = certified;
  return grpc::Status::OK;
}

std::string AccessPolicy::SealIdentity(const std::string& caller) const {
  {
    absl::MutexLock lock(&mu_);
    if (!client_certificates_) return "";
  }
  return seal_.Seal(caller);
}

grpc::Status AccessPolicy::AuthenticateToken(const std::string& token, std::string* caller) const {
  caller->clear();
  absl::MutexLock lock(&mu_);
  if (tokens_.empty()) {
    if (token.empty()) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "a bearer token was sent but this daemon has no auth.tokens");
  }
  if (token.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "this daemon requires a bearer token");
  }
  const TokenConfig* found = nullptr;
  for (const TokenConfig& t : tokens_) {
    if (SameSecret(t.token, token) && found == nullptr) found = &t;
  }
  if (found == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown bearer token");
  }
  *caller = found->name;
  return grpc::Status::OK;
}

grpc::Status AccessPolicy::Check(const grpc::ServerContextBase& context, const std::string& group,
                                 Right right) const {
  std::string caller;
  grpc::Status authenticated = Authenticate(context, &caller);
  if (!authenticated.ok()) return authenticated;
  return CheckCaller(caller, group, right);
}

grpc::Status AccessPolicy::CheckCaller(const std::string& caller, const std::string& group,
                                       Right right) const {
  if (right != Right::kAdmin && IsDaemonsOwnGroup(group)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("group \"", group, "\" is the daemons' own"));
  }
  absl::MutexLock lock(&mu_);
  const AclConfig* found = nullptr;
  if (auto it = acls_.find(group); it != acls_.end()) {
    found = &it->second;
  } else if (auto made = created_acls_.find(group); made != created_acls_.end()) {
    found = made->second.get();
  }
  if (found == nullptr) return grpc::Status::OK;
  const AclConfig& acl = *found;
  const std::vector<std::string>& allowed =
      right == Right::kJoin ? acl.join : right == Right::kInvoke ? acl.invoke : acl.admin;
  for (const std::string& name : allowed) {
    if (name == "*" || (!caller.empty() && name == caller)) return grpc::Status::OK;
  }
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(caller.empty() ? std::string("an anonymous caller")
                                  : absl::StrCat("\"", caller, "\""),
                   " may not ", RightName(right), " group \"", group, "\" (groups[].acl.",
                   RightName(right), ")"));
}

grpc::Status ApiService::Allowed(grpc::ServerContextBase* context, const std::string& group,
                                 Right right) const {
  if (policy_ == nullptr || context == nullptr) return grpc::Status::OK;
  return policy_->Check(*context, group, right);
}

grpc::Status ApiService::Authenticated(grpc::ServerContextBase* context,
                                       std::string* caller) const {
  std::string ignored;
  if (caller == nullptr) caller = &ignored;
  caller->clear();
  if (policy_ == nullptr || context == nullptr) return grpc::Status::OK;
  return policy_->Authenticate(*context, caller);
}

absl::Status ApiService::RunOnLoop(std::function<absl::Status()> fn) {
  return nso::RunOnLoop(loop_, std::move(fn));
}

grpc::Status ApiService::Attach(grpc::ServerContext* context, const api::AttachRequest* request,
                                api::AttachReply* reply) {
  std::string caller;
  if (grpc::Status allowed = Authenticated(context, &caller); !allowed.ok()) return allowed;
  std::string identity = policy_ != nullptr ? policy_->SealIdentity(caller) : "";
  const uint64_t owner = nso::Node::OwnerFingerprint(caller);
  return ToGrpcStatus(RunOnLoop([&]() -> absl::Status {
    absl::StatusOr<uint64_t> nso =
        node_->Attach(request->client_name(), /*expires_when_idle=*/true, owner);
    if (!nso.ok()) return nso.status();
    reply->set_nso(*nso);
    reply->set_node(node_->self());
    reply->set_node_name(node_->name());
    if (!local_api_.empty()) {
      reply->set_local_api(local_api_);
      reply->set_local_key(local_key_);
      if (!identity.empty()) reply->set_local_identity(identity);
    }
    return absl::OkStatus();
  }));
}

grpc::Status ApiService::Detach(grpc::ServerContext* context, const api::DetachRequest* request,
                                api::Empty*) {
  std::string caller;
  if (grpc::Status allowed = Authenticated(context, &caller); !allowed.ok()) return allowed;
  const uint64_t requester = nso::Node::OwnerFingerprint(caller);
  return ToGrpcStatus(
      RunOnLoop([&]() -> absl::Status { return node_->Detach(request->nso(), requester); }));
}

void AccessPolicy::SetCreatedGroupAcl(const std::string& group,
                                      std::shared_ptr<const AclConfig> acl) {
  absl::MutexLock lock(&mu_);
  if (acl == nullptr) {
    created_acls_.erase(group);
  } else {
    created_acls_[group] = std::move(acl);
  }
}

grpc::Status AccessPolicy::CheckCreator(const std::string& caller) const {
  absl::MutexLock lock(&mu_);
  for (const std::string& name : creators_) {
    if (name == "*" || (!caller.empty() && name == caller)) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(caller.empty() ? std::string("an anonymous caller")
                                                  : absl::StrCat("\"", caller, "\""),
                                   " may not create groups (dynamic_groups.create)"));
}

absl::Status ApiService::CreateGroupInProcess(const api::CreateGroupRequest& request) {
  absl::ReaderMutexLock lock(&catalog_mu_);
  if (catalog_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CreateGroup(\"", request.group(), "\"): this node has no dynamic_groups section"));
  }
  return catalog_->Create(request);
}

absl::Status ApiService::DeleteGroupInProcess(const std::string& group) {
  absl::ReaderMutexLock lock(&catalog_mu_);
  if (catalog_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DeleteGroup(\"", group, "\"): this node has no dynamic_groups section"));
  }
  return catalog_->Delete(group);
}

grpc::Status ApiService::CatalogAllowed(grpc::ServerContextBase* context, const char* rpc,
                                        const std::string& group, bool needs_admin) const {
  if (policy_ != nullptr && context != nullptr) {
    // Who may create groups (and delete them: then also the group's acl.admin, if it has one).
    std::string caller;
    if (grpc::Status known = policy_->Authenticate(*context, &caller); !known.ok()) return known;
    if (catalog_ != nullptr) {
      if (grpc::Status allowed = policy_->CheckCreator(caller); !allowed.ok()) return allowed;
      if (needs_admin) {
        grpc::Status admin = policy_->CheckCaller(caller, group, Right::kAdmin);
        if (!admin.ok()) return admin;
      }
    }
  }
  if (catalog_ == nullptr) {
    return ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
        rpc, "(\"", group, "\"): this daemon has no dynamic_groups section: groups come from "
        "the daemons' YAML (groups:)")));
  }
  return grpc::Status::OK;
}

grpc::Status ApiService::CreateGroup(grpc::ServerContext* context,
                                     const api::CreateGroupRequest* request, api::Empty*) {
  // Held through the call: the catalog (nso/group_directory.h) is not destroyed under it.
  absl::ReaderMutexLock lock(&catalog_mu_);
  grpc::Status allowed = CatalogAllowed(context, "CreateGroup", request->group(), false);
  if (!allowed.ok()) return allowed;
  return ToGrpcStatus(catalog_->Create(*request));
}

grpc::Status ApiService::DeleteGroup(grpc::ServerContext* context,
                                     const api::GroupRequest* request, api::Empty*) {
  absl::ReaderMutexLock lock(&catalog_mu_);
  grpc::Status allowed = CatalogAllowed(context, "DeleteGroup", request->group(), true);
  if (!allowed.ok()) return allowed;
  return ToGrpcStatus(catalog_->Delete(request->group()));
}

grpc::Status ApiService::JoinGroup(grpc::ServerContext* context, const api::GroupRequest* request,
                                   api::Empty*) {
  if (grpc::Status allowed = Allowed(context, request->group(), Right::kJoin); !allowed.ok()) {
    return allowed;
  }
  return ToGrpcStatus(RunOnLoop([&]() -> absl::Status { return node_->JoinGroup(request->group()); }));
}

grpc::Status ApiService::LeaveGroup(grpc::ServerContext* context, const api::GroupRequest* request,
                                    api::Empty*) {
  if (grpc::Status allowed = Allowed(context, request->group(), Right::kJoin); !allowed.ok()) {
    return allowed;
  }
  return ToGrpcStatus(RunOnLoop([&]() -> absl::Status { return node_->LeaveGroup(request->group()); }));
}

grpc::Status ApiService::GroupDetails(grpc::ServerContext* context,
                                      const api::GroupRequest* request,
                                      api::GroupDetailsReply* reply) {
  if (grpc::Status allowed = Allowed(context, request->group(), Right::kInvoke); !allowed.ok()) {
    return allowed;
  }
  return ToGrpcStatus(RunOnLoop([&]() -> absl::Status {
    absl::StatusOr<GroupInfo> info = node_->GroupDetails(request->group());
    if (!info.ok()) return info.status();
    ToGroupDetailsReply(*info, reply);
    return absl::OkStatus();
  }));
}

grpc::Status ApiService::Multicast(grpc::ServerContext* context,
                                   const api::MulticastRequest* request, api::Empty*) {
  if (grpc::Status allowed = Allowed(context, request->group(), Right::kInvoke); !allowed.ok()) {
    return allowed;
  }
  grpc::Status status = ToGrpcStatus(RunOnLoop([&]() -> absl::Status {
    return node_->Multicast(request->nso(), request->group(), request->payload());
  }));
  if (metrics_ != nullptr) metrics_->RecordMulticast(CodeLabel(status.error_code()));
  return status;
}

// A unary call on gRPC's callback API: no gRPC thread waits for the group call; the protocol
// thread that completes it writes the reply (Finish), as the streams' reactors do.
grpc::ServerUnaryReactor* ApiService::Invoke(grpc::CallbackServerContext* context,
                                             const api::InvokeRequest* request,
                                             api::InvokeReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status allowed = Allowed(context, request->group(), Right::kInvoke); !allowed.ok()) {
    reactor->Finish(allowed);
    return reactor;
  }
  absl::StatusOr<InvokeOptions> options = ToInvokeOptions(*request);
  if (!options.ok()) {
    reactor->Finish(ToGrpcStatus(options.status()));
    return reactor;
  }
  const auto start = std::chrono::steady_clock::now();
  const api::Mode mode = request->mode();
  // `reply` lives until Finish; the node answers every invocation once (by its deadline at the
  // latest, with CANCELLED when it is destroyed).
  auto done = [this, reactor, reply, mode, start](InvokeResult result) {
    grpc::Status status = ToGrpcStatus(result.status);
    ToInvokeReply(&result, reply);
    if (metrics_ != nullptr) {
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      metrics_->RecordInvocation(ModeLabel(mode), CodeLabel(status.error_code()), took.count());
    }
    reactor->Finish(status);
  };
  const uint64_t nso = request->nso();
  bool posted = loop_->Post([this, nso, options = *std::move(options), done]() mutable {
    node_->Invoke(nso, std::move(options), std::move(done));
  });
  if (!posted) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "daemon overloaded or shutting down"));
  }
  return reactor;
}

namespace {
// Everything but the payload.
absl::StatusOr<InvokeOptions> InvokeOptionsOf(const api::InvokeRequest& request) {
  InvokeOptions options;
  options.group = request.group();
  options.method = request.method();
  options.deadline_ms = request.deadline_ms();
  options.caller_group = request.caller_group();
  options.group_call_id = request.caller_seq() * 1024 + request.caller_index();
  if (request.style() == api::OPEN) options.style = GroupConfig::Style::kOpen;
  if (request.style() == api::CLOSED) options.style = GroupConfig::Style::kClosed;
  if (request.mode() != api::MODE_UNSPECIFIED) {
    absl::StatusOr<invocation::Mode> mode = FromApiMode(request.mode());
    if (!mode.ok()) return mode.status();
    options.mode = *mode;
    options.mode_given = true;
  }
  return options;
}
}  // namespace

absl::StatusOr<InvokeOptions> ToInvokeOptions(const api::InvokeRequest& request) {
  absl::StatusOr<InvokeOptions> options = InvokeOptionsOf(request);
  if (options.ok()) options->payload = request.payload();
  return options;
}

absl::StatusOr<InvokeOptions> TakeInvokeOptions(api::InvokeRequest* request) {
  absl::StatusOr<InvokeOptions> options = InvokeOptionsOf(*request);
  if (options.ok()) options->payload = std::move(*request->mutable_payload());
  return options;
}

void ToServantEvent(ServantDelivery delivery, api::ServantEvent* event) {
  event->set_delivery(delivery.delivery);
  event->set_group(std::move(delivery.group));
  event->set_method(std::move(delivery.method));
  event->set_payload(std::move(delivery.payload));
  event->set_one_way(delivery.one_way);
  event->set_view_id(delivery.view_id);
  event->set_group_seq(delivery.group_seq);
  event->set_state_offset(delivery.state_offset);
  event->set_state_last(delivery.state_last);
  if (!delivery.ended.empty()) event->set_ended(std::move(delivery.ended));
  if (!delivery.call.empty()) event->set_call(std::move(delivery.call));
  if (delivery.kept_calls) *event->mutable_kept_calls() = *delivery.kept_calls;
  if (delivery.view) *event->mutable_view() = *delivery.view;
}

void ToGroupDetailsReply(const GroupInfo& info, api::GroupDetailsReply* reply) {
  reply->set_group(info.name);
  reply->set_view_id(info.view_id);
  for (const auto& member : info.members) {
    api::Member* out = reply->add_members();
    out->set_name(member.name);
    out->set_node(member.node);
    out->set_suspected(member.suspected);
  }
  reply->set_ordering(std::string(ToString(info.config->ordering)));
  reply->set_liveness(std::string(ToString(info.config->liveness)));
  reply->set_style(info.config->style == GroupConfig::Style::kOpen ? api::OPEN : api::CLOSED);
}

void ToInvokeReply(InvokeResult* result, api::InvokeReply* reply) {
  reply->set_view_id(result->view_id);
  reply->set_wanted(result->wanted);
  for (auto& member_reply : result->replies) {
    api::ReplyFrom* out = reply->add_replies();
    out->set_member(std::move(member_reply.member));
    out->set_node(member_reply.node);
    out->set_status_code(static_cast<int>(member_reply.status.code()));
    if (!member_reply.status.ok()) out->set_error(std::string(member_reply.status.message()));
    out->set_payload(std::move(member_reply.payload));
  }
}

}  // namespace cohort::nso
