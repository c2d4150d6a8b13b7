#include "invocation/client.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "invocation/async_results.h"
#include "invocation/backpressure.h"
#include "invocation/call_stream.h"
#include "invocation/local_calls.h"
#include "invocation/remote_watch.h"
#include "nso/keepalive.h"
#include "nso/status.h"

namespace cohort {
namespace {


void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

absl::StatusOr<std::string> ReadPemFile(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void AddCallCredentials(grpc::ClientContext* context, const ConnectOptions& options) {
  if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
}

namespace {

// Results of any size (a reply from each member), and keepalive (nso/keepalive.h).
grpc::ChannelArguments DaemonChannelArguments() {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  nso::AddKeepalive(&arguments);
  return arguments;
}

}  // namespace

std::shared_ptr<grpc::Channel> DaemonChannel(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   DaemonChannelArguments());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> DaemonChannel(const std::string& address,
                                                             const ConnectOptions& options) {
  bool tls = options.tls || !options.ca_file.empty() || !options.ca_pem.empty();
  if (!tls) return DaemonChannel(address);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.ca_pem;
  if (!options.ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPemFile("CA file", options.ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
  }
  if (!options.cert_file.empty() || !options.key_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile("certificate file", options.cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile("key file", options.key_file);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
  }
  grpc::ChannelArguments arguments = DaemonChannelArguments();
  if (!options.server_name.empty()) arguments.SetSslTargetNameOverride(options.server_name);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), arguments);
}

namespace {

constexpr size_t kStreamedCallBytesMax = 1 << 20;
// A thread's reused InvokeRequest keeps at most this much payload memory between calls.
constexpr size_t kKeptRequestBytes = 64 * 1024;
// How long ~Client waits for its daemon to take the NSO back (a frozen daemon costs this).
constexpr absl::Duration kDetachWait = absl::Milliseconds(500);

// The client's NSO in a cohortd daemon, over gRPC: invocations pipelined on one stream, the rest
// unary calls.
class RemoteClient final : public internal::ClientBackend {
 public:
  // `local`: the daemon's local fast path for invocations (null: gRPC only).
  RemoteClient(std::shared_ptr<grpc::Channel> channel, std::string token,
               std::unique_ptr<internal::LocalCalls> local)
      : channel_(std::move(channel)),
        stub_(api::Cohort::NewStub(channel_)),
        token_(std::move(token)),
        calls_(stub_.get(), token_),
        local_(std::move(local)) {}
  const char* via() const override { return local_ ? "local" : "grpc"; }

  absl::StatusOr<Attached> Attach(const std::string& client_name,
                                  absl::Duration timeout) override {
    grpc::ClientContext context;
    SetDeadline(&context, timeout);
    if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
    api::AttachRequest request;
    request.set_client_name(client_name);
    api::AttachReply reply;
    grpc::Status status = stub_->Attach(&context, request, &reply);
    if (!status.ok()) return nso::FromGrpcStatus(status);
    // The restarted (or other) daemon's fast path (a new socket and key): the next link opens
    // there.
    Attached attached{reply.nso(), reply.node_name()};
    if (local_ && !reply.local_api().empty()) {
      local_->SetEndpoint(internal::LocalEndpoint{reply.local_api(), reply.local_key(), token_,
                                                  reply.local_identity()});
      attached.local_api = reply.local_api();
      attached.local_key = reply.local_key();
      attached.local_identity = reply.local_identity();
    }
    return attached;
  }

  absl::Status Detach(uint64_t nso, absl::Duration timeout) override {
    grpc::ClientContext context;
    SetDeadline(&context, timeout);  // not wait_for_ready: a daemon that is gone fails at once
    if (!token_.empty()) context.AddMetadata("authorization", "Bearer " + token_);
    api::DetachRequest request;
    request.set_nso(nso);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->Detach(&context, request, &reply));
  }

  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                      absl::Duration wait) override {
    // A large call goes as a unary RPC of its own: pipelining gains nothing there, and a message
    // over the daemon's size limit then fails alone (RESOURCE_EXHAUSTED) instead of breaking the
    // stream that the other calls share.
    if (request.ByteSizeLong() > kStreamedCallBytesMax) {
      return internal::InvokeRpc(stub_.get(), request, wait - absl::Seconds(2), token_);
    }
    if (local_) {
      std::optional<absl::StatusOr<GroupReplies>> result = local_->Invoke(request, wait);
      if (result.has_value()) return *std::move(result);
    }
    return calls_.Invoke(request, wait);
  }
  absl::Status InvokeInto(const api::InvokeRequest& request, absl::Duration wait,
                          GroupReplies* into) override {
    if (local_ && request.ByteSizeLong() <= kStreamedCallBytesMax) {
      std::optional<absl::Status> done = local_->InvokeInto(request, wait, into);
      if (done.has_value()) return *done;
    }
    return ClientBackend::InvokeInto(request, wait, into);  // moved in, as Invoke's
  }
  void InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done) override {
    if (request.ByteSizeLong() > kStreamedCallBytesMax) return InvokeRpcAsync(request, wait, done);
    if (local_ && local_->InvokeAsync(request, wait, &done)) return;
    calls_.InvokeAsync(request, wait, std::move(done));
  }
  void InvokeAsyncInto(const api::InvokeRequest& request, absl::Duration wait,
                       internal::AsyncInto* call) override {
    if (local_ && request.ByteSizeLong() <= kStreamedCallBytesMax &&
        local_->InvokeAsyncInto(request, wait, call)) {
      return;
    }
    ClientBackend::InvokeAsyncInto(request, wait, call);  // moved in, as InvokeAsync's
  }
  absl::Status Multicast(const api::MulticastRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->Multicast(&context, request, &reply));
  }
  absl::StatusOr<api::GroupDetailsReply> GroupDetails(const api::GroupRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::GroupDetailsReply reply;
    grpc::Status status = stub_->GroupDetails(&context, request, &reply);
    if (!status.ok()) return nso::FromGrpcStatus(status);
    return reply;
  }
  absl::Status JoinGroup(const api::GroupRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->JoinGroup(&context, request, &reply));
  }
  absl::Status CreateGroup(const api::CreateGroupRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->CreateGroup(&context, request, &reply));
  }
  absl::Status DeleteGroup(const api::GroupRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->DeleteGroup(&context, request, &reply));
  }
  absl::Status LeaveGroup(const api::GroupRequest& request) override {
    grpc::ClientContext context;
    Prepare(&context);
    api::Empty reply;
    return nso::FromGrpcStatus(stub_->LeaveGroup(&context, request, &reply));
  }
  absl::StatusOr<std::unique_ptr<GroupWatch>> WatchGroup(const api::GroupRequest& request,
                                                         WatchHandlers handlers) override;

 private:
  // The token's metadata and a 5 s deadline.
  void Prepare(grpc::ClientContext* context) const {
    if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
    SetDeadline(context, absl::Seconds(5));
  }

  // A large call, as Invoke's: a unary RPC of its own, with gRPC's callback API.
  void InvokeRpcAsync(const api::InvokeRequest& request, absl::Duration wait, Done done) {
    struct Unary {
      grpc::ClientContext context;
      api::InvokeRequest request;
      api::InvokeReply reply;
    };
    auto unary = std::make_shared<Unary>();  // until the callback
    unary->request = request;
    Prepare(&unary->context);
    SetDeadline(&unary->context, wait);
    stub_->async()->Invoke(&unary->context, &unary->request, &unary->reply,
                           [unary, done = std::move(done)](grpc::Status status) {
                             if (!status.ok()) return done(nso::FromGrpcStatus(status));
                             done(internal::ToGroupReplies(&unary->reply));
                           });
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<api::Cohort::Stub> stub_;
  std::string token_;
  internal::CallStream calls_;  // the pipelined invocations (gRPC)
  std::unique_ptr<internal::LocalCalls> local_;  // or on the local fast path
};

absl::StatusOr<std::unique_ptr<GroupWatch>> RemoteClient::WatchGroup(
    const api::GroupRequest& request, WatchHandlers handlers) {
  return internal::StartRemoteWatch(channel_, token_, request, std::move(handlers));
}

}  // namespace

Client::Client(std::unique_ptr<internal::ClientBackend> backend, uint64_t nso,
               std::string node_name)
    : backend_(std::move(backend)), nso_(nso), node_name_(std::move(node_name)) {}

Client::~Client() {
  {
    absl::MutexLock lock(&reattach_mu_);  // no callback attaches again or resends from now on
    closing_ = true;
  }
  // The daemon forgets this client now rather than after limits.nso_idle_ms; calls it accepted
  // are still ordered. Best effort: a daemon that is gone has forgotten it already.
  if (owns_nso_.load()) backend_->Detach(nso_.load(), kDetachWait).IgnoreError();
  // The connections first: they fail the asynchronous calls still pending on them, whose
  // callbacks then run before the callbacks' thread goes.
  backend_.reset();
  absl::MutexLock lock(&async_mu_);
  async_.reset();
}

std::unique_ptr<Client> Client::WithBackend(std::unique_ptr<internal::ClientBackend> backend,
                                            uint64_t nso, std::string node_name, bool owns_nso) {
  std::unique_ptr<Client> client(new Client(std::move(backend), nso, std::move(node_name)));
  client->owns_nso_ = owns_nso;
  return client;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const std::string& client_name,
                                                        absl::Duration timeout) {
  ConnectOptions options;
  options.client_name = client_name;
  options.timeout = timeout;
  return Connect(address, options);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ConnectOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> opened = DaemonChannel(address, options);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<grpc::Channel> channel = *std::move(opened);
  auto stub = api::Cohort::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(&context, options.timeout);
  AddCallCredentials(&context, options);
  context.set_wait_for_ready(true);
  api::AttachRequest request;
  request.set_client_name(options.client_name);
  api::AttachReply reply;
  grpc::Status status = stub->Attach(&context, request, &reply);
  if (!status.ok()) {
    return absl::Status(nso::FromGrpcStatus(status).code(),
                        absl::StrCat("attach to daemon at ", address, ": ", status.error_message()));
  }
  // The local fast path when the daemon offers it and it answers from here (same host); a
  // refusal or an unreachable socket is not an error: the calls go over gRPC.
  internal::LocalEndpoint endpoint{reply.local_api(), reply.local_key(), options.token,
                                   reply.local_identity()};
  std::unique_ptr<internal::LocalCalls> local;
  if (options.local && !endpoint.address.empty()) {
    absl::StatusOr<std::unique_ptr<internal::LocalLink>> link =
        internal::LocalLink::Open(endpoint, absl::Seconds(2));
    if (link.ok()) local = std::make_unique<internal::LocalCalls>(endpoint, *std::move(link));
  }
  const bool local_used = local != nullptr;
  std::unique_ptr<Client> client = WithBackend(
      std::make_unique<RemoteClient>(std::move(channel), options.token, std::move(local)),
      reply.nso(), reply.node_name(), /*owns_nso=*/true);
  if (!options.client_name.empty()) client->client_name_ = options.client_name;
  client->attach_timeout_ = options.timeout;
  client->SetBackpressureWait(options.backpressure_wait);
  if (local_used) {
    absl::MutexLock lock(&client->daemon_mu_);
    client->local_endpoint_ = std::move(endpoint);
  }
  return client;
}

const char* Client::via() const { return backend_->via(); }

std::string Client::node_name() const {
  absl::MutexLock lock(&daemon_mu_);
  return node_name_;
}

internal::LocalEndpoint Client::local_endpoint() const {
  absl::MutexLock lock(&daemon_mu_);
  return local_endpoint_;
}

api::InvokeRequest Client::InvokeRequestFor(const std::string& group, const std::string& method,
                                            const std::string& payload, api::Mode mode,
                                            absl::Duration deadline, Style style) const {
  api::InvokeRequest request;
  FillInvokeRequest(&request, group, method, payload, mode, deadline, style);
  return request;
}

void Client::FillInvokeRequest(api::InvokeRequest* request, absl::string_view group,
                               absl::string_view method, absl::string_view payload,
                               api::Mode mode, absl::Duration deadline, Style style) const {
  request->Clear();  // its strings stay allocated, emptied (and assign keeps their memory)
  request->set_nso(nso_.load());
  request->mutable_group()->assign(group.data(), group.size());
  request->mutable_method()->assign(method.data(), method.size());
  request->mutable_payload()->assign(payload.data(), payload.size());
  request->set_mode(mode);
  if (style == Style::kOpen) request->set_style(api::OPEN);
  if (style == Style::kClosed) request->set_style(api::CLOSED);
  request->set_deadline_ms(internal::DeadlineMs(deadline));
}

namespace {

// The daemon does not know the NSO (it restarted since the Attach): nothing was accepted.
bool UnknownNso(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound &&
         absl::StrContains(status.message(), "unknown NSO");
}
}  // namespace

bool Client::ReattachAndRetry(uint64_t stale, const std::function<void()>& retry) {
  absl::MutexLock lock(&reattach_mu_);
  if (closing_) return false;
  if (nso_.load() == stale) {  // else another caller attached again already
    absl::StatusOr<internal::ClientBackend::Attached> fresh =
        backend_->Attach(client_name_, attach_timeout_);
    if (!fresh.ok()) return false;
    nso_.store(fresh->nso);
    absl::MutexLock names(&daemon_mu_);
    node_name_ = fresh->node_name;
    if (!local_endpoint_.address.empty()) {  // this client uses the fast path
      local_endpoint_.address = fresh->local_api;
      local_endpoint_.key = fresh->local_key;
      local_endpoint_.identity = fresh->local_identity;
    }
  }
  retry();
  return true;
}

template <typename RequestT, typename SendFn>
auto Client::WithNso(RequestT&& request, SendFn send) -> decltype(send(request)) {
  request.set_nso(nso_.load());
  auto result = send(request);
  if (invocation::StatusOf(result).ok() || !UnknownNso(invocation::StatusOf(result))) {
    return result;
  }
  const uint64_t stale = request.nso();
  ReattachAndRetry(stale, [&] {
    request.set_nso(nso_.load());
    result = send(request);
  });
  return result;
}

absl::StatusOr<GroupReplies> Client::Call(const std::string& group, const std::string& method,
                                          const std::string& payload, api::Mode mode,
                                          absl::Duration deadline, Style style) {
  return CallWith(group, method, payload, mode, deadline, style,
                  [&](const api::InvokeRequest& sent, absl::Duration wait) {
                    return backend_->Invoke(sent, wait);
                  });
}

template <typename SendFn>
auto Client::CallWith(absl::string_view group, absl::string_view method, absl::string_view payload,
                      api::Mode mode, absl::Duration deadline, Style style, SendFn send)
    -> decltype(send(std::declval<const api::InvokeRequest&>(), absl::Duration())) {
  const internal::SteadyTime start = internal::SteadyNow();
  const bool one_way = mode == api::ONE_WAY;
  const absl::Duration wait = invocation::RoomWait(backpressure_wait(), one_way, deadline);
  bool first_attempt = true;
  return invocation::WhileBacklogged(start, wait, [&]() {
    const absl::Duration left =
        first_attempt ? deadline : invocation::DeadlineLeft(deadline, one_way, start);
    first_attempt = false;
    // This thread's request, made again in the same memory for each of its calls (the backend
    // has sent it, or failed, once Invoke returns); a large payload's memory is not kept. A call
    // made while this one runs on the same thread (a servant dispatched inline here, calling on)
    // makes its own.
    thread_local api::InvokeRequest reused;
    thread_local bool reused_busy = false;
    api::InvokeRequest own;
    const bool use_reused = !reused_busy;
    api::InvokeRequest& request = use_reused ? reused : own;
    reused_busy = true;
    FillInvokeRequest(&request, group, method, payload, mode, left, style);
    // The NSO enforces `left`; 2 s of slack here.
    auto result = WithNso(request, [&](const api::InvokeRequest& sent) {
      return send(sent, left + absl::Seconds(2));
    });
    if (use_reused) {
      reused_busy = false;
      if (reused.payload().capacity() > kKeptRequestBytes) {
        std::string().swap(*reused.mutable_payload());
      }
    }
    return result;
  });
}

absl::Status Client::InvokeInto(absl::string_view group, absl::string_view method,
                                absl::string_view payload, Mode mode, GroupReplies* replies,
                                absl::Duration deadline, Style style) {
  return CallWith(group, method, payload, internal::ToApiMode(mode), deadline, style,
                  [&](const api::InvokeRequest& sent, absl::Duration wait) {
                    return backend_->InvokeInto(sent, wait, replies);
                  });
}

std::shared_ptr<internal::AsyncResults> Client::Callbacks() {
  absl::MutexLock lock(&async_mu_);
  if (async_ == nullptr) async_ = std::make_shared<internal::AsyncResults>();
  return async_;
}

void Client::InvokeAsync(const std::string& group, const std::string& method,
                         const std::string& payload, Mode mode, InvokeCallback done,
                         absl::Duration deadline, Style style) {
  std::shared_ptr<internal::AsyncResults> results = Callbacks();
  results->Expect();
  IssueAsync(InvokeRequestFor(group, method, payload, internal::ToApiMode(mode), deadline, style),
             deadline, std::move(done), std::move(results), /*may_retry=*/true, internal::SteadyNow(),
             std::make_shared<invocation::BacklogPause>());
}

void Client::InvokeAsyncInto(absl::string_view group, absl::string_view method,
                             absl::string_view payload, Mode mode, AsyncCall* call,
                             absl::Duration deadline, Style style) {
  std::shared_ptr<internal::AsyncResults> results = Callbacks();
  results->Expect();
  FillInvokeRequest(&call->request_, group, method, payload, internal::ToApiMode(mode), deadline,
                    style);
  call->client_ = this;
  call->results_ = results.get();  // the Client's, which outlives its calls (~Client)
  call->deadline_ = deadline;
  call->start_ = internal::SteadyNow();
  backend_->InvokeAsyncInto(call->request_, deadline + absl::Seconds(2), call);
}

void Client::CompleteAsyncInto(AsyncCall* call) {
  const absl::Status& status = call->status_;
  if (!status.ok() && (UnknownNso(status) || invocation::IsBacklog(status))) {
    // Rare: nothing was accepted. InvokeAsync's way from here (attach again, or wait for room
    // and send again), its result moved into the call.
    InvokeCallback done = [call](absl::StatusOr<GroupReplies> result) {
      if (result.ok()) call->replies_ = *std::move(result);
      call->KeepOutcome(result.status());
      call->on_done_(*call);
    };
    AsyncOutcome(call->request_, call->deadline_, std::move(done), /*may_retry=*/true,
                 call->start_, std::make_shared<invocation::BacklogPause>())(status);
    return;
  }
  call->on_done_(*call);
}

void AsyncCall::KeepOutcome(absl::Status status) {
  status_ = std::move(status);
  if (!status_.ok()) replies_.replies.clear();
}

void AsyncCall::Finish(absl::Status status) {
  KeepOutcome(std::move(status));
  results_->PostCall(this);
}

void AsyncCall::Complete() { client_->CompleteAsyncInto(this); }

bool Client::RetryUnlessClosing(const std::function<void()>& retry) {
  absl::MutexLock lock(&reattach_mu_);
  if (closing_) return false;
  retry();
  return true;
}

void Client::IssueAsync(api::InvokeRequest request, absl::Duration deadline, InvokeCallback done,
                        std::shared_ptr<internal::AsyncResults> results, bool may_retry,
                        internal::SteadyTime start,
                        std::shared_ptr<invocation::BacklogPause> pause) {
  // (No reference to the callbacks' AsyncResults is kept in `on_result`: it runs and is
  // destroyed on their thread, which must not be the one to destroy them.)
  InvokeCallback on_result =
      AsyncOutcome(request, deadline, std::move(done), may_retry, start, std::move(pause));
  backend_->InvokeAsync(
      request, deadline + absl::Seconds(2),
      [results, on_result = std::move(on_result)](absl::StatusOr<GroupReplies> result) mutable {
        results->Post(std::move(on_result), std::move(result));  // only queued: async_results.h
      });
}

Client::InvokeCallback Client::AsyncOutcome(api::InvokeRequest request, absl::Duration deadline,
                                            InvokeCallback done, bool may_retry,
                                            internal::SteadyTime start,
                                            std::shared_ptr<invocation::BacklogPause> pause) {
  // On the callbacks thread (no lock of the backend held).
  return [this, request = std::move(request), deadline, may_retry, start, pause,
          done = std::move(done)](absl::StatusOr<GroupReplies> result) mutable {
    auto callbacks = [this] {
      absl::MutexLock lock(&async_mu_);  // set: this call was made through it
      return async_;
    };
    if (!result.ok() && may_retry && UnknownNso(result.status())) {
      // The daemon restarted: attach again and send the call once more; its result comes to
      // `done` then.
      const uint64_t stale = request.nso();
      bool resent = ReattachAndRetry(stale, [&] {
        std::shared_ptr<internal::AsyncResults> again = callbacks();
        request.set_nso(nso_.load());
        again->Expect();
        IssueAsync(std::move(request), deadline, std::move(done), std::move(again), false, start,
                   pause);
      });
      if (resent) return;
    }
    if (!result.ok() && invocation::IsBacklog(result.status())) {
      // Refused for backpressure: nothing was accepted. Sent again after a pause, as Call does,
      // without blocking this thread (the pause is a delayed item of the callbacks' queue).
      const bool one_way = request.mode() == api::ONE_WAY;
      const absl::Duration wait = invocation::RoomWait(backpressure_wait(), one_way, deadline);
      const absl::Duration next = pause->Next();
      const absl::Duration waited = internal::SteadySince(start);
      if (waited + next <= wait) {
        std::shared_ptr<internal::AsyncResults> again = callbacks();
        again->Expect();
        again->PostAt(
            internal::SteadyAfter(next),
            [this, request, deadline, may_retry, start, pause, one_way, again,
             done = std::move(done)](absl::StatusOr<GroupReplies> refused) mutable {
              const bool sent = RetryUnlessClosing([&] {
                // (`deadline` stays the call's own: the wait is measured from `start` against
                // it.)
                request.set_deadline_ms(
                    internal::DeadlineMs(invocation::DeadlineLeft(deadline, one_way, start)));
                again->Expect();
                IssueAsync(std::move(request), deadline, std::move(done), again, may_retry,
                           start, pause);
              });
              if (!sent) done(std::move(refused));
            },
            std::move(result));
        return;
      }
      result = invocation::WaitedOut(result.status(), waited, wait);
    }
    done(std::move(result));
  };
}

std::future<absl::StatusOr<GroupReplies>> Client::InvokeFuture(
    const std::string& group, const std::string& method, const std::string& payload, Mode mode,
    absl::Duration deadline, Style style) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<GroupReplies>>>();
  std::future<absl::StatusOr<GroupReplies>> future = promise->get_future();
  InvokeAsync(
      group, method, payload, mode,
      [promise](absl::StatusOr<GroupReplies> result) { promise->set_value(std::move(result)); },
      deadline, style);
  return future;
}

namespace internal {

void ClientBackend::InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done) {
  done(Invoke(request, wait));
}

void ClientBackend::InvokeAsyncInto(const api::InvokeRequest& request, absl::Duration wait,
                                    AsyncInto* call) {
  InvokeAsync(request, wait, [call](absl::StatusOr<GroupReplies> result) {
    if (result.ok()) *call->into() = *std::move(result);
    call->Finish(result.status());
  });
}

absl::Status ClientBackend::InvokeInto(const api::InvokeRequest& request, absl::Duration wait,
                                       GroupReplies* into) {
  absl::StatusOr<GroupReplies> result = Invoke(request, wait);
  if (!result.ok()) {
    into->replies.clear();
    return result.status();
  }
  *into = *std::move(result);
  return absl::OkStatus();
}

uint32_t DeadlineMs(absl::Duration deadline) {
  int64_t deadline_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline));
  return static_cast<uint32_t>(std::min<int64_t>(deadline_ms, UINT32_MAX));
}

GroupReplies ToGroupReplies(api::InvokeReply* reply) {
  GroupReplies result;
  SwapIntoGroupReplies(reply, &result);  // swapped with new empty strings: moved out
  return result;
}

void SwapIntoGroupReplies(api::InvokeReply* reply, GroupReplies* into) {
  into->view_id = reply->view_id();
  into->wanted = reply->wanted();
  into->replies.resize(reply->replies_size());
  for (int i = 0; i < reply->replies_size(); ++i) {
    api::ReplyFrom& from = *reply->mutable_replies(i);
    Reply& to = into->replies[i];
    to.member.swap(*from.mutable_member());
    to.node = from.node();
    to.status = from.status_code() == 0
                    ? absl::OkStatus()
                    : absl::Status(static_cast<absl::StatusCode>(from.status_code()), from.error());
    to.payload.swap(*from.mutable_payload());
  }
}

std::vector<ViewMember> ToViewMembers(
    const google::protobuf::RepeatedPtrField<api::Member>& members) {
  std::vector<ViewMember> out;
  out.reserve(members.size());
  for (const api::Member& member : members) {
    out.push_back({member.name(), member.node(), member.suspected()});
  }
  return out;
}

api::Mode ToApiMode(Mode mode) {
  switch (mode) {
    case Mode::kOneWay: return api::ONE_WAY;
    case Mode::kFirst: return api::WAIT_FIRST;
    case Mode::kMajority: return api::WAIT_MAJORITY;
    case Mode::kAll: return api::WAIT_ALL;
  }
  return api::MODE_UNSPECIFIED;
}

absl::StatusOr<GroupReplies> InvokeRpc(api::Cohort::Stub* stub, const api::InvokeRequest& request,
                                       absl::Duration deadline, const std::string& token) {
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoMilliseconds(deadline + absl::Seconds(2)));
  api::InvokeReply reply;
  grpc::Status status = stub->Invoke(&context, request, &reply);
  if (!status.ok()) return nso::FromGrpcStatus(status);
  return ToGroupReplies(&reply);
}

}  // namespace internal

absl::StatusOr<GroupReplies> Client::Invoke(const std::string& group, const std::string& method,
                                            const std::string& payload, Mode mode,
                                            absl::Duration deadline, Style style) {
  return Call(group, method, payload, internal::ToApiMode(mode), deadline, style);
}

absl::StatusOr<GroupReplies> Client::InvokeDefault(const std::string& group,
                                                   const std::string& method,
                                                   const std::string& payload,
                                                   absl::Duration deadline) {
  return Call(group, method, payload, api::MODE_UNSPECIFIED, deadline);
}

absl::Status Client::Send(const std::string& group, const std::string& method,
                          const std::string& payload) {
  return Call(group, method, payload, api::ONE_WAY, absl::Seconds(5)).status();
}

absl::Status Client::Multicast(const std::string& group, const std::string& payload) {
  api::MulticastRequest request;
  request.set_group(group);
  request.set_payload(payload);
  return invocation::WhileBacklogged(internal::SteadyNow(), backpressure_wait(), [&]() {
    return WithNso(request, [&](const api::MulticastRequest& r) { return backend_->Multicast(r); });
  });
}

api::GroupRequest Client::GroupRequestFor(const std::string& group) const {
  api::GroupRequest request;  // its NSO: set by WithNso, which sends it
  request.set_group(group);
  return request;
}

namespace {

View ToView(const api::GroupDetailsReply& reply) {
  View view;
  view.group = reply.group();
  view.view_id = reply.view_id();
  view.ordering = reply.ordering();
  view.liveness = reply.liveness();
  view.members = internal::ToViewMembers(reply.members());
  return view;
}

}  // namespace

absl::StatusOr<View> Client::GroupDetails(const std::string& group) {
  absl::StatusOr<api::GroupDetailsReply> reply = WithNso(
      GroupRequestFor(group), [&](const api::GroupRequest& r) { return backend_->GroupDetails(r); });
  if (!reply.ok()) return reply.status();
  return ToView(*reply);
}

absl::StatusOr<std::unique_ptr<GroupWatch>> Client::WatchGroup(
    const std::string& group, std::function<void(const View&)> on_change,
    std::function<void(absl::Status)> on_end, std::function<void(absl::Status)> on_lost) {
  internal::ClientBackend::WatchHandlers handlers;
  handlers.on_change = [on_change = std::move(on_change)](const api::GroupDetailsReply& reply) {
    on_change(ToView(reply));
  };
  handlers.on_end = std::move(on_end);
  handlers.on_lost = std::move(on_lost);
  return backend_->WatchGroup(GroupRequestFor(group), std::move(handlers));
}

absl::Status Client::CreateGroup(const GroupSpec& spec) {
  api::CreateGroupRequest request;
  request.set_group(spec.name);
  for (const std::string& member : spec.members) request.add_members(member);
  request.set_ordering(spec.ordering);
  request.set_liveness(spec.liveness);
  request.set_style(spec.style);
  request.set_default_mode(spec.default_mode);
  request.set_durable(spec.durable);
  if (spec.acl) {
    api::GroupAcl* acl = request.mutable_acl();
    for (const std::string& name : spec.acl->join) acl->add_join(name);
    for (const std::string& name : spec.acl->invoke) acl->add_invoke(name);
    for (const std::string& name : spec.acl->admin) acl->add_admin(name);
  }
  return WithNso(request,
                 [&](const api::CreateGroupRequest& r) { return backend_->CreateGroup(r); });
}

absl::Status Client::DeleteGroup(const std::string& group) {
  return WithNso(GroupRequestFor(group),
                 [&](const api::GroupRequest& r) { return backend_->DeleteGroup(r); });
}

absl::Status Client::JoinGroup(const std::string& group) {
  return WithNso(GroupRequestFor(group),
                 [&](const api::GroupRequest& r) { return backend_->JoinGroup(r); });
}

absl::Status Client::LeaveGroup(const std::string& group) {
  return WithNso(GroupRequestFor(group),
                 [&](const api::GroupRequest& r) { return backend_->LeaveGroup(r); });
}

}  // namespace cohort
