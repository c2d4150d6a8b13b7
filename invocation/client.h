// The Cohort client stub library: connect to a daemon (which gives this client its own NewTop
// service object, 003 section 3), then invoke groups in any mode, send one-way, or multicast.
//
//   auto client = cohort::Client::Connect("127.0.0.1:7201", "my-app");
//   auto result = (*client)->Invoke("counter", "add", "5", cohort::Mode::kMajority,
//                                   absl::Milliseconds(500));
//   for (const cohort::Reply& reply : result->replies) ...  // reply.member, reply.payload
//
// Thread-safe: many threads may call one Client at once.
#ifndef COHORT_INVOCATION_CLIENT_H_
#define COHORT_INVOCATION_CLIENT_H_

#include <cstdint>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/backend.h"
#include "invocation/local_link.h"
#include "invocation/reply_collector.h"
#include "invocation/steady_time.h"
#include "proto/api.grpc.pb.h"

namespace cohort {
namespace invocation {
class BacklogPause;  // backpressure.h
}  // namespace invocation
namespace internal {
class AsyncResults;  // async_results.h
}  // namespace internal

using Mode = invocation::Mode;

// How a call reaches the servers (003 section 4.1): through a closed group (the client's NSO
// multicasts to every server) or an open group (one server, the request manager, re-issues it).
enum class Style { kGroupDefault, kOpen, kClosed };

// One replica's answer.
struct Reply {
  std::string member;     // the replica's node name
  uint32_t node = 0;
  absl::Status status;    // what its servant answered (OK, or the servant's error)
  std::string payload;
};

struct GroupReplies {
  std::vector<Reply> replies;  // in arrival order
  uint64_t view_id = 0;        // the view the call was counted against
  uint32_t wanted = 0;         // how many replies the mode asked for
};

class Client;

// An asynchronous call the application keeps and starts again and again (Client::
// InvokeAsyncInto): its request, its replies and its completion live in it, so a caller with
// many calls in flight (pipelining, MinORB, 000) allocates nothing per call on the daemon's local
// fast path once their memory has grown (issue 7; omniORB2, 001 sections 5-6). One call at a
// time: start it again only once `on_done` has run (`on_done` may start it again itself), and
// keep it until then.
class AsyncCall : private internal::AsyncInto {
 public:
  using OnDone = std::function<void(AsyncCall&)>;
  // `on_done` runs on the Client's callbacks thread as each call ends, as InvokeAsync's
  // callbacks do (one at a time, in the order results come).
  explicit AsyncCall(OnDone on_done) : on_done_(std::move(on_done)) {}
  AsyncCall(const AsyncCall&) = delete;
  AsyncCall& operator=(const AsyncCall&) = delete;

  // The last call's outcome (InvokeAsync's errors) and, when OK, its replies (on an error, none).
  // The application may take or change them in `on_done`: their memory holds the next call's.
  const absl::Status& status() const { return status_; }
  GroupReplies& replies() { return replies_; }
  const GroupReplies& replies() const { return replies_; }

 private:
  friend class Client;
  friend class internal::AsyncResults;

  GroupReplies* into() override { return &replies_; }
  // The call's outcome kept: an error leaves no replies.
  void KeepOutcome(absl::Status status);
  // Any thread (the reader's): the outcome kept and handed to the callbacks thread.
  void Finish(absl::Status status) override;
  // On the callbacks thread: on_done_, or first InvokeAsync's retries for a restarted daemon or
  // a refusal for backpressure (Client::CompleteAsyncInto).
  void Complete();

  OnDone on_done_;
  GroupReplies replies_;
  absl::Status status_;
  api::InvokeRequest request_;  // the call's, made again in the same memory
  Client* client_ = nullptr;
  internal::AsyncResults* results_ = nullptr;  // the Client's callbacks
  absl::Duration deadline_;
  internal::SteadyTime start_;
};

struct ViewMember {
  std::string name;
  uint32_t node = 0;
  bool suspected = false;
};

struct View {
  std::string group;
  uint64_t view_id = 0;
  std::vector<ViewMember> members;
  std::string ordering;
  std::string liveness;
};

// How to reach a daemon: TLS (when the daemon's YAML has a tls section) and the bearer token
// (when it has auth.tokens). The default is plaintext without a token.
struct ConnectOptions {
  std::string client_name;                    // for the daemon's logs
  absl::Duration timeout = absl::Seconds(5);  // Connect: attach within this long
  bool tls = false;          // TLS; implied by a CA
  std::string ca_file;       // PEM CA that signed the daemon's certificate (tls.ca_file)
  std::string ca_pem;        // or the PEM text itself
  std::string cert_file;     // optional client certificate and key (PEM)
  std::string key_file;
  std::string server_name;   // check the daemon's certificate for this name, not the address host
  std::string token;         // sent as metadata "authorization: Bearer <token>" on every call
  // Invocations and servant traffic over the daemon's local fast path (a Unix socket, served on
  // its protocol thread; nso/local_api.h) when the daemon offers one and it can be reached from
  // here (same host); else, or with false, everything goes over gRPC.
  bool local = true;
  // Send, Multicast and Invoke refused for backpressure (this client already has
  // limits.max_unordered_requests requests not yet ordered, or max_unordered_bytes; see
  // invocation/backpressure.h) wait for room and send again, for at most this long (Invoke: at
  // most its deadline, which the wait counts against), then fail RESOURCE_EXHAUSTED; zero: fail
  // at once. InvokeAsync waits the same way without blocking its caller: the refused call is
  // sent again from the callbacks thread after each pause, and its callback gets the outcome.
  absl::Duration backpressure_wait = absl::Seconds(5);
};

// Adds the options' bearer token (if any) to a call's metadata.
void AddCallCredentials(grpc::ClientContext* context, const ConnectOptions& options);

// A group for Client::CreateGroup: empty optional fields take the YAML defaults.
struct GroupSpec {
  std::string name;
  std::vector<std::string> members;  // daemon (node) names
  std::string ordering;              // consensus | sequencer
  std::string liveness;              // lively | event
  std::string style;                 // closed | open
  std::string default_mode;          // one_way | first | majority | all
  // Application names (or "*") per right, as groups[].acl; absent: every right to every caller.
  struct Acl {
    std::vector<std::string> join, invoke, admin;
  };
  std::optional<Acl> acl;
  // groups[].durable (README "Durable groups"): its servants keep their state on disk
  // (Servant::KeepStateIn), and a restart of every member resumes from it.
  bool durable = false;
};

class Client {
 public:
  // `address` is a gRPC target: "host:port", or several daemons, "ipv4:10.0.0.1:7201,10.0.0.2:7201"
  // (or a DNS name with several records, "dns:///cohort.example:7201"). With several, the client
  // attaches to the first that answers and fails over to the next when it dies: the next daemon
  // answers "unknown NSO" and the client attaches there and sends the refused call once more, as
  // after a restart of its daemon (calls in flight at the failure may fail UNAVAILABLE: whether
  // they were ordered is unknown). node_name() then names the new daemon. With TLS, set
  // options.server_name to a name every daemon's certificate carries (such a target names no
  // one host to check).
  // Connects with TLS and/or a token (options.client_name and options.timeout as below).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                                         const ConnectOptions& options);
  // Connects and attaches (gets an NSO). Fails if the daemon does not answer within `timeout`.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& address, const std::string& client_name = "",
      absl::Duration timeout = absl::Seconds(5));
  ~Client();

  // A group invocation (Invoke, InvokeDefault, Send): every call of this Client travels on ONE
  // stream to the daemon, many in flight at once (pipelining); concurrent callers do not wait for
  // each other. Errors: NOT_FOUND (unknown group), UNAVAILABLE (not enough members for
  // the mode), DEADLINE_EXCEEDED (the mode was not met in time; the message says how many replies
  // came), INVALID_ARGUMENT (payload over the daemon's limit, empty method).
  absl::StatusOr<GroupReplies> Invoke(const std::string& group, const std::string& method,
                                      const std::string& payload, Mode mode,
                                      absl::Duration deadline = absl::Seconds(5),
                                      Style style = Style::kGroupDefault);
  // Invoke without waiting (CORBA's asynchronous method invocation; MinORB, 000: many calls
  // outstanding per connection): the call leaves on the same stream and `done` gets its result
  // exactly once, with the same errors as Invoke. Callbacks run on one thread of this Client, one
  // at a time, in the order results come (async_results.h): a callback may invoke again, but one
  // that blocks holds up the others. Destroying the Client fails calls still pending on its
  // connections (CANCELLED) and returns once every callback has run; it must not be destroyed
  // from one of its callbacks.
  using InvokeCallback = std::function<void(absl::StatusOr<GroupReplies>)>;
  void InvokeAsync(const std::string& group, const std::string& method,
                   const std::string& payload, Mode mode, InvokeCallback done,
                   absl::Duration deadline = absl::Seconds(5), Style style = Style::kGroupDefault);
  // The same, with a future.
  std::future<absl::StatusOr<GroupReplies>> InvokeFuture(
      const std::string& group, const std::string& method, const std::string& payload, Mode mode,
      absl::Duration deadline = absl::Seconds(5), Style style = Style::kGroupDefault);
  // Invoke into memory the caller keeps: `*replies` is overwritten (on an error it is left with
  // no replies). Its vector and strings are reused, so a caller that invokes again with the same
  // GroupReplies allocates nothing per call once they have grown (issue 7; omniORB2, 001
  // sections 5-6); on the daemon's local fast path the replies are swapped out of the link's
  // read buffer, not copied, and the buffer keeps the strings they replace for its next read.
  // Over gRPC or in-process the result is moved in (as Invoke's). Same errors as Invoke.
  absl::Status InvokeInto(absl::string_view group, absl::string_view method,
                          absl::string_view payload, Mode mode, GroupReplies* replies,
                          absl::Duration deadline = absl::Seconds(5),
                          Style style = Style::kGroupDefault);
  // InvokeAsync into a call the caller keeps (AsyncCall, above): `call->on_done` runs once the
  // call ends, with its status() and replies() filled. On the daemon's local fast path the
  // replies are swapped out of the link's read buffer (as InvokeInto's) and the call's request
  // and bookkeeping are reused: no allocation per call once grown. Over gRPC or in-process, and
  // for a call refused because the daemon restarted or for backpressure (sent again as
  // InvokeAsync's), the result is moved in. Same errors as Invoke.
  void InvokeAsyncInto(absl::string_view group, absl::string_view method,
                       absl::string_view payload, Mode mode, AsyncCall* call,
                       absl::Duration deadline = absl::Seconds(5),
                       Style style = Style::kGroupDefault);
  // Like Invoke with the group's default mode (groups[].default_mode in the YAML).
  absl::StatusOr<GroupReplies> InvokeDefault(const std::string& group, const std::string& method,
                                             const std::string& payload,
                                             absl::Duration deadline = absl::Seconds(5));
  // One-way: returns once the daemon has accepted the call for ordering.
  absl::Status Send(const std::string& group, const std::string& method,
                    const std::string& payload);
  // Totally ordered multicast to every servant of the group (no replies).
  absl::Status Multicast(const std::string& group, const std::string& payload);
  absl::StatusOr<View> GroupDetails(const std::string& group);
  // Watches `group` from this client's daemon: `on_change` gets the view (with suspicions) now,
  // before this returns, then after each change of the view or of the members suspected there,
  // on a thread of the watch, one at a time; a callback slower than the changes gets the latest
  // view, not each one in between. Errors as GroupDetails.
  // The watch follows its daemon: when the daemon goes (UNAVAILABLE), `on_lost` (optional) is
  // told, and the watch starts again every 50 ms to 1 s until the daemon is back (or, with
  // several daemons, the next one answers); `on_change` then gets the view there if it is not
  // the last one given. `on_end` (optional) is called once if the watch ends by itself: the
  // group was deleted (NOT_FOUND), or the daemon refuses the watch after a restart.
  // Destroying the watch ends it and returns once no callback runs; it may be destroyed from
  // one of its callbacks.
  absl::StatusOr<std::unique_ptr<GroupWatch>> WatchGroup(
      const std::string& group, std::function<void(const View&)> on_change,
      std::function<void(absl::Status)> on_end = nullptr,
      std::function<void(absl::Status)> on_lost = nullptr);
  // This client's daemon joins / leaves the group's view (a view change agreed by the members;
  // a joining daemon receives the group's state before its first delivery).
  absl::Status JoinGroup(const std::string& group);
  absl::Status LeaveGroup(const std::string& group);
  // Creates a group at run time on every daemon, as if it were in groups[] of their YAML (daemons
  // with a dynamic_groups section; nso/group_directory.h). Returns once this client's daemon runs
  // it; its servants then Start as for any group. ALREADY_EXISTS for a name in use,
  // INVALID_ARGUMENT naming a bad field, UNAVAILABLE without a majority of the daemons,
  // FAILED_PRECONDITION when the daemons have no dynamic_groups.
  absl::Status CreateGroup(const GroupSpec& spec);
  // Deletes a group made by CreateGroup on every daemon: its pending calls end with NOT_FOUND and
  // its servants' Wait returns NOT_FOUND. Returns once this client's daemon has stopped it. The
  // name may be created again (a new group, with a fresh state). NOT_FOUND when no such group
  // was made, FAILED_PRECONDITION for a group of the YAML, UNAVAILABLE without a majority of the
  // daemons.
  absl::Status DeleteGroup(const std::string& group);

  // ConnectOptions::backpressure_wait, for a Client made otherwise (an embedded node's).
  void SetBackpressureWait(absl::Duration wait) {
    backpressure_wait_us_.store(absl::ToInt64Microseconds(wait));
  }

  uint64_t nso() const { return nso_.load(); }
  // The daemon that holds the NSO (another after a failover to the next of several daemons).
  std::string node_name() const ABSL_LOCKS_EXCLUDED(daemon_mu_);
  // How invocations reach the NSO: "local" (the daemon's Unix socket), "grpc" or "in-process".
  const char* via() const;
  // The daemon's local fast path this client uses (address empty when none).
  internal::LocalEndpoint local_endpoint() const ABSL_LOCKS_EXCLUDED(daemon_mu_);

  // For the runtime (an embedded node, nso/embedded.h): a Client over another way to its NSO.
  // `owns_nso`: ~Client detaches the NSO (it was attached for this Client alone).
  static std::unique_ptr<Client> WithBackend(std::unique_ptr<internal::ClientBackend> backend,
                                             uint64_t nso, std::string node_name,
                                             bool owns_nso = false);
  // For the runtime (a Servant that takes the NSO over): destroying this Client leaves its NSO
  // attached (a Client made by Connect detaches it).
  void KeepNsoAtDaemon() { owns_nso_ = false; }

 private:
  friend class AsyncCall;  // CompleteAsyncInto
  Client(std::unique_ptr<internal::ClientBackend> backend, uint64_t nso, std::string node_name);
  api::GroupRequest GroupRequestFor(const std::string& group) const;
  api::InvokeRequest InvokeRequestFor(const std::string& group, const std::string& method,
                                      const std::string& payload, api::Mode mode,
                                      absl::Duration deadline, Style style) const;
  // The same, made in `request` (emptied first): its strings keep their memory from one call to
  // the next (issue 7: no allocation per call).
  void FillInvokeRequest(api::InvokeRequest* request, absl::string_view group,
                         absl::string_view method, absl::string_view payload, api::Mode mode,
                         absl::Duration deadline, Style style) const;
  absl::StatusOr<GroupReplies> Call(const std::string& group, const std::string& method,
                                    const std::string& payload, api::Mode mode,
                                    absl::Duration deadline, Style style = Style::kGroupDefault);
  // Call's body: the request made in this thread's reused one, sent by `send(request, wait)`
  // (a backend's Invoke or InvokeInto), again after attaching again and while the daemon
  // refuses it for backpressure.
  template <typename SendFn>
  auto CallWith(absl::string_view group, absl::string_view method, absl::string_view payload,
                api::Mode mode, absl::Duration deadline, Style style, SendFn send)
      -> decltype(send(std::declval<const api::InvokeRequest&>(), absl::Duration()));
  // The daemon answered "unknown NSO" for `stale` (it restarted, forgetting its NSOs): attaches
  // again (once for all callers that saw `stale`) and, under the same lock, runs `retry` with the
  // new NSO in nso(). False (retry not run) when that fails or the Client is closing. A call
  // refused so was never accepted: sending it again is safe.
  bool ReattachAndRetry(uint64_t stale, const std::function<void()>& retry)
      ABSL_LOCKS_EXCLUDED(reattach_mu_);
  // Sends `request` and runs `done` with its result on the callbacks thread; once (`may_retry`)
  // after attaching again if the daemon restarted; and, refused for backpressure, again after a
  // pause (on the callbacks thread, AsyncResults::PostAt) for at most the wait Call allows
  // (backpressure_wait; a call: also its deadline) from `start`.
  void IssueAsync(api::InvokeRequest request, absl::Duration deadline, InvokeCallback done,
                  std::shared_ptr<internal::AsyncResults> results, bool may_retry,
                  internal::SteadyTime start, std::shared_ptr<invocation::BacklogPause> pause);
  // What IssueAsync's call does with its result on the callbacks thread: `done` gets it, unless
  // the daemon restarted (attach again and send once more, `may_retry`) or refused it for
  // backpressure (sent again after a pause).
  InvokeCallback AsyncOutcome(api::InvokeRequest request, absl::Duration deadline,
                              InvokeCallback done, bool may_retry, internal::SteadyTime start,
                              std::shared_ptr<invocation::BacklogPause> pause);
  // The callbacks, made by the first asynchronous call.
  std::shared_ptr<internal::AsyncResults> Callbacks() ABSL_LOCKS_EXCLUDED(async_mu_);
  // AsyncCall::Complete's: on the callbacks thread.
  void CompleteAsyncInto(AsyncCall* call);
  // Runs `retry` under reattach_mu_ unless the Client is closing (its backend may be gone).
  bool RetryUnlessClosing(const std::function<void()>& retry) ABSL_LOCKS_EXCLUDED(reattach_mu_);
  // Runs `send(request)`; again with a new NSO if the daemon answered "unknown NSO". Sets the
  // NSO in `request` (a temporary, or the caller's own).
  template <typename RequestT, typename SendFn>
  auto WithNso(RequestT&& request, SendFn send) -> decltype(send(request));

  std::unique_ptr<internal::ClientBackend> backend_;  // gRPC to a daemon, or in-process
  // InvokeAsync's callbacks (made by the first; destroyed after backend_, see ~Client).
  absl::Mutex async_mu_;
  std::shared_ptr<internal::AsyncResults> async_ ABSL_GUARDED_BY(async_mu_);
  std::atomic<uint64_t> nso_;
  // ReattachAndRetry's: held while attaching again and resending; ~Client sets closing_ under it
  // before the backend goes.
  absl::Mutex reattach_mu_;
  bool closing_ ABSL_GUARDED_BY(reattach_mu_) = false;
  absl::Duration backpressure_wait() const {
    return absl::Microseconds(backpressure_wait_us_.load());
  }

  std::atomic<int64_t> backpressure_wait_us_{5000000};  // ConnectOptions::backpressure_wait
  std::atomic<bool> owns_nso_{false};  // ~Client detaches the NSO (WithBackend, KeepNsoAtDaemon)
  std::string client_name_ = "cohort-client";  // ConnectOptions::client_name, to attach again
  absl::Duration attach_timeout_ = absl::Seconds(5);
  // The daemon the NSO is at: replaced when the Client attaches again.
  mutable absl::Mutex daemon_mu_;
  std::string node_name_ ABSL_GUARDED_BY(daemon_mu_);
  internal::LocalEndpoint local_endpoint_ ABSL_GUARDED_BY(daemon_mu_);
};

// Opens a channel to a daemon's client address with Cohort's message size limits (plaintext).
std::shared_ptr<grpc::Channel> DaemonChannel(const std::string& address);
// The same with the options' TLS settings; an error when a PEM file cannot be read. The token is
// not part of the channel: add it per call (AddCallCredentials) or use Client.
absl::StatusOr<std::shared_ptr<grpc::Channel>> DaemonChannel(const std::string& address,
                                                             const ConnectOptions& options);

namespace internal {

api::Mode ToApiMode(Mode mode);
// One Invoke RPC: the daemon enforces `deadline`, the RPC gets 2 s of slack; the reply converted.
// Shared by Client and Servant (group-to-group calls).
absl::StatusOr<GroupReplies> InvokeRpc(api::Cohort::Stub* stub, const api::InvokeRequest& request,
                                       absl::Duration deadline, const std::string& token);
// The reply of an Invoke (unary or pipelined) as the stub library returns it; the member names
// and payloads are moved out of `reply`.
GroupReplies ToGroupReplies(api::InvokeReply* reply);
// The same into `*into` (Client::InvokeInto): the member names and payloads are swapped with
// `into`'s, so `reply` (a reused read buffer) keeps their memory for its next parse.
void SwapIntoGroupReplies(api::InvokeReply* reply, GroupReplies* into);
// A view's members as the API carries them (GroupDetailsReply, ServantEvent.view).
std::vector<ViewMember> ToViewMembers(
    const google::protobuf::RepeatedPtrField<api::Member>& members);
// The deadline a request carries (milliseconds, at least 1).
uint32_t DeadlineMs(absl::Duration deadline);

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_CLIENT_H_
