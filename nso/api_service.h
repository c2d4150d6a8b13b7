// The daemon's gRPC API for applications (proto/api.proto): thin handlers that hand work to the
// protocol thread and wait for its answer (STYLE.md, example 8).
#ifndef COHORT_NSO_API_SERVICE_H_
#define COHORT_NSO_API_SERVICE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/config.h"

#include "nso/event_loop.h"
#include "nso/identity_seal.h"
#include "nso/metrics.h"
#include "nso/node.h"
#include "proto/api.grpc.pb.h"

namespace cohort::nso {

// The mean size of the results of one client's calls so far (PauseReadingCalls).
struct ResultSizes {
  uint64_t results = 0;
  uint64_t bytes = 0;
  uint64_t largest = 0;  // the largest result so far (ResultsCutoff)
  void Add(uint64_t result_bytes) {
    ++results;
    bytes += result_bytes;
    largest = std::max(largest, result_bytes);
  }
  uint64_t Mean() const { return results == 0 ? 0 : bytes / results; }
};

// A client that does not read its results is not read either (a gRPC InvokeStream,
// api_pipeline.cc, and the local fast path, local_api.cc): with kCallsOutstandingMax of its calls
// read whose results are not yet written, or kResultsWaitingMax bytes of results waiting, or as
// many calls outstanding as would make kResultsWaitingMax at the mean size of its results so far
// (`results`), or, before its first result, kCallsBeforeFirstResult calls outstanding (their
// size unknown: a slow start, as TCP's), no more of its calls are read until all are down to
// half. `paused`: reading is paused now.
inline constexpr uint64_t kCallsOutstandingMax = 1024;
inline constexpr uint64_t kResultsWaitingMax = 16 << 20;
inline constexpr uint64_t kCallsBeforeFirstResult = 16;
inline bool PauseReadingCalls(bool paused, uint64_t outstanding, uint64_t waiting_bytes,
                              const ResultSizes& results) {
  const uint64_t divisor = paused ? 2 : 1;
  return outstanding >= kCallsOutstandingMax / divisor ||
         waiting_bytes >= kResultsWaitingMax / divisor ||
         outstanding * results.Mean() >= kResultsWaitingMax / divisor ||
         (results.results == 0 && outstanding >= kCallsBeforeFirstResult / divisor);
}
// The last resort, when the calls read before a pause make more than that (up to
// kCallsOutstandingMax calls, each with up to limits.max_payload_bytes per reply): a client with
// more bytes of results not taken than ResultsCutoff is cut off (gRPC: its stream ends
// RESOURCE_EXHAUSTED; the local fast path: its link is closed): kResultsWaitingCutoff, or, if
// more, kCutoffPerLargestResult times its largest result so far. The second is room for twice
// the slow start's calls at that size: a client that reads is not cut off for the burst of
// results the rules above let it have (16 wait-for-all calls with 4 MiB replies from 3 members
// are 192 MiB of results, which used to cut it off at 64 MiB however fast it read), while what
// one that does not read makes its daemon keep stays bounded by the size of its own results.
inline constexpr uint64_t kResultsWaitingCutoff = 64 << 20;
inline constexpr uint64_t kCutoffPerLargestResult = 2 * kCallsBeforeFirstResult;
inline uint64_t ResultsCutoff(uint64_t largest_result) {
  return std::max(kResultsWaitingCutoff, kCutoffPerLargestResult * largest_result);
}

// The payload bytes of a call's result (its replies), as the limits above count them.
inline uint64_t ResultBytes(const InvokeResult& result) {
  uint64_t bytes = 0;
  for (const invocation::MemberReply& reply : result.replies) bytes += reply.payload.size();
  return bytes;
}

// Groups made and deleted at run time (dynamic_groups; nso/group_directory.h). Any thread.
class GroupCatalog {
 public:
  virtual ~GroupCatalog() = default;
  virtual absl::Status Create(const api::CreateGroupRequest& request) = 0;
  virtual absl::Status Delete(const std::string& group) = 0;
};

// What a caller may do with a group (groups[].acl in the YAML).
enum class Right { kJoin, kInvoke, kAdmin };
const char* RightName(Right right);

// How applications prove who they are (bearer tokens, auth.tokens; TLS client certificates,
// auth.client_certificates) and group ACLs (groups[].acl), checked per call; replaced as a whole
// by Update (SIGHUP) while calls run, except client_certificates, which the client port's TLS
// settings fix at start. With neither tokens nor certificates every caller is anonymous and only
// "*" entries of an acl match.
class AccessPolicy {
 public:
  void Update(const Config& config);
  // OK and the caller's name in *caller ("" when authentication is off), else UNAUTHENTICATED:
  // the name of its client certificate (auth.certificate_name: its common name, or its first DNS
  // or URI subject alternative name), or its token's name; both given, they must agree.
  grpc::Status Authenticate(const grpc::ServerContextBase& context, std::string* caller) const;
  // Authenticate, then PERMISSION_DENIED unless the group's acl grants `right` to the caller.
  // A group without an acl (or unknown to the config) allows every right.
  grpc::Status Check(const grpc::ServerContextBase& context, const std::string& group,
                     Right right) const;
  bool auth_enabled() const;
  // The same for the local fast path (nso/local_api.h), which has no TLS: `certified` is the name
  // its hello's sealed identity carried (OpenIdentity; "" = none), `token` the bare token ("" =
  // none given); the caller's name comes back in *caller.
  grpc::Status AuthenticateLocal(const std::string& certified, const std::string& token,
                                 std::string* caller) const;
  // Whether the caller named `caller` ("" = anonymous) has `right` on `group` (never join or
  // invoke on the daemons' own groups, "cohort.*").
  grpc::Status CheckCaller(const std::string& caller, const std::string& group, Right right) const;
  // Whether the caller may create groups (dynamic_groups.create).
  grpc::Status CheckCreator(const std::string& caller) const;
  // The acl of a group made by CreateGroup (kept across Update; a YAML group's acl comes first);
  // null: none (the group was deleted).
  void SetCreatedGroupAcl(const std::string& group, std::shared_ptr<const AclConfig> acl);
  // With client certificates: `caller` (from Authenticate) sealed for the local fast path
  // (AttachReply.local_identity), else "".
  std::string SealIdentity(const std::string& caller) const;
  absl::StatusOr<std::string> OpenIdentity(const std::string& sealed) const {
    return seal_.Open(sealed);
  }

 private:
  // A token's name (tokens configured), or anonymous when there are none.
  grpc::Status AuthenticateToken(const std::string& token, std::string* caller) const;
  // `certified` (a certificate's name, "" = none) and `token` together; `certificates`: the
  // policy's client_certificates, read once by the caller.
  grpc::Status Combine(bool certificates, const std::string& certified, const std::string& token,
                       std::string* caller) const;

  const IdentitySeal seal_;
  mutable absl::Mutex mu_;
  std::vector<TokenConfig> tokens_ ABSL_GUARDED_BY(mu_);
  bool client_certificates_ ABSL_GUARDED_BY(mu_) = false;
  CertificateNameField certificate_name_ ABSL_GUARDED_BY(mu_) = CertificateNameField::kCommonName;
  bool client_certificates_fixed_ ABSL_GUARDED_BY(mu_) = false;  // by the first Update
  std::map<std::string, AclConfig, std::less<>> acls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> creators_ ABSL_GUARDED_BY(mu_);  // dynamic_groups.create
  std::map<std::string, std::shared_ptr<const AclConfig>, std::less<>> created_acls_
      ABSL_GUARDED_BY(mu_);
};

// Shared by the unary Invoke and the pipelined InvokeStream (api_pipeline.cc).
absl::StatusOr<InvokeOptions> ToInvokeOptions(const api::InvokeRequest& request);
// The same, the payload moved out of `request` rather than copied (issue 7: no copy per call).
absl::StatusOr<InvokeOptions> TakeInvokeOptions(api::InvokeRequest* request);
// Moves `result`'s replies into `reply` (the vector stays with `result`, emptied of its
// contents, for Node::RecycleReplies).
void ToInvokeReply(InvokeResult* result, api::InvokeReply* reply);
// On the protocol thread (GroupInfo points into the node's config).
void ToGroupDetailsReply(const GroupInfo& info, api::GroupDetailsReply* reply);
// A delivery to a servant as the API's event (the gRPC stream, the local fast path, in-process).
void ToServantEvent(ServantDelivery delivery, api::ServantEvent* event);
// Metric labels: the mode's name, the status code's name.
const char* ModeLabel(api::Mode mode);
std::string CodeLabel(grpc::StatusCode code);

// Invoke, InvokeStream, Serve and WatchGroup are served with gRPC's callback API (reactors: no
// thread of ours waits per call or stream, and what the protocol thread produces is written by
// it, nso/reactor_outbox.h); the other methods are synchronous.
class ApiService final
    : public api::Cohort::WithCallbackMethod_Invoke<api::Cohort::WithCallbackMethod_InvokeStream<
          api::Cohort::WithCallbackMethod_Serve<
              api::Cohort::WithCallbackMethod_WatchGroup<api::Cohort::Service>>>> {
 public:
  ApiService(Node* node, EventLoop* loop, const AccessPolicy* policy = nullptr)
      : node_(node), loop_(loop), policy_(policy) {}
  // Optional: count invocations and multicasts, with latency (set before serving).
  void set_metrics(InvocationMetrics* metrics) { metrics_ = metrics; }
  // Optional: the local fast path Attach offers (nso/local_api.h; set before serving).
  // CreateGroup / DeleteGroup from an in-process client (no gRPC context, no policy check).
  absl::Status CreateGroupInProcess(const api::CreateGroupRequest& request);
  absl::Status DeleteGroupInProcess(const std::string& group);
  // dynamic_groups: where CreateGroup and DeleteGroup go (nso/group_directory.h); null: refused.
  // Waits for the calls running (they hold the catalog's reader lock), so the old catalog may be
  // destroyed once this returns.
  void set_group_catalog(GroupCatalog* catalog) {
    absl::WriterMutexLock lock(&catalog_mu_);
    catalog_ = catalog;
  }
  void set_local_api(std::string address, uint64_t key) {
    local_api_ = std::move(address);
    local_key_ = key;
  }

  grpc::Status Attach(grpc::ServerContext*, const api::AttachRequest*, api::AttachReply*) override;
  grpc::Status Detach(grpc::ServerContext*, const api::DetachRequest*, api::Empty*) override;
  grpc::Status CreateGroup(grpc::ServerContext*, const api::CreateGroupRequest*,
                           api::Empty*) override;
  grpc::Status DeleteGroup(grpc::ServerContext*, const api::GroupRequest*, api::Empty*) override;
  grpc::Status JoinGroup(grpc::ServerContext*, const api::GroupRequest*, api::Empty*) override;
  grpc::Status LeaveGroup(grpc::ServerContext*, const api::GroupRequest*, api::Empty*) override;
  grpc::Status GroupDetails(grpc::ServerContext*, const api::GroupRequest*,
                            api::GroupDetailsReply*) override;
  grpc::Status Multicast(grpc::ServerContext*, const api::MulticastRequest*, api::Empty*) override;
  grpc::ServerUnaryReactor* Invoke(grpc::CallbackServerContext* context,
                                   const api::InvokeRequest* request,
                                   api::InvokeReply* reply) override;
  // Pipelining: calls read from the stream are handed to the protocol thread without waiting;
  // each result is written as it completes (api_pipeline.cc).
  grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult>* InvokeStream(
      grpc::CallbackServerContext* context) override;
  // A servant's stream: its registration, then deliveries out and answers in (api_serve.cc).
  grpc::ServerBidiReactor<api::ServantMessage, api::ServantEvent>* Serve(
      grpc::CallbackServerContext* context) override;
  // A group's view and suspicions as they change (api_watch.cc).
  grpc::ServerWriteReactor<api::GroupDetailsReply>* WatchGroup(
      grpc::CallbackServerContext* context, const api::GroupRequest* request) override;

 private:
  friend class InvokeStreamReactor;  // api_pipeline.cc
  friend class ServeReactor;         // api_serve.cc
  friend class WatchReactor;         // api_watch.cc

  // Runs `fn` on the protocol thread and waits for it; UNAVAILABLE if the daemon is overloaded.
  absl::Status RunOnLoop(std::function<absl::Status()> fn);

  // OK when there is no policy, else policy_->Check.
  grpc::Status Allowed(grpc::ServerContextBase* context, const std::string& group, Right right) const;
  // OK when there is no policy or the caller proved who it is (its name in `caller`, if given;
  // empty without a policy).
  grpc::Status Authenticated(grpc::ServerContextBase* context,
                             std::string* caller = nullptr) const;
  // CreateGroup / DeleteGroup (`needs_admin`): the caller may, and the daemon has a catalog.
  grpc::Status CatalogAllowed(grpc::ServerContextBase* context, const char* rpc,
                              const std::string& group, bool needs_admin) const
      ABSL_SHARED_LOCKS_REQUIRED(catalog_mu_);

  Node* node_;
  EventLoop* loop_;
  const AccessPolicy* policy_;
  InvocationMetrics* metrics_ = nullptr;
  std::string local_api_;
  uint64_t local_key_ = 0;
  absl::Mutex catalog_mu_;
  GroupCatalog* catalog_ ABSL_GUARDED_BY(catalog_mu_) = nullptr;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_API_SERVICE_H_
