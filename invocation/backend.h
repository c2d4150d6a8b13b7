// What the stub library's Client and Servant need from "their NSO" (003 section 3), behind one
// interface with two implementations: over gRPC to a cohortd daemon (client.cc, servant.cc), or
// in the same address space as an embedded node (nso/embedded.h), the fastest configuration of
// 003 section 3. The messages are those of proto/api.proto either way, so both paths share the
// conversions and behave alike.
#ifndef COHORT_INVOCATION_BACKEND_H_
#define COHORT_INVOCATION_BACKEND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/api.pb.h"

namespace cohort {

struct GroupReplies;

// A watch of a group (Client::WatchGroup): destroying it ends it, and returns once none of its
// callbacks runs (destroyed from one of its own callbacks, or on an embedded node's protocol
// thread: at once, and the callback running finishes after it).
class GroupWatch {
 public:
  virtual ~GroupWatch() = default;
};

namespace internal {

// Where an asynchronous call into the caller's memory ends (Client::InvokeAsyncInto): its
// reader fills `*into()` and then calls Finish exactly once, in any thread, under the reader's
// locks or not (it only hands the outcome over; on an error the replies are left to it).
class AsyncInto {
 public:
  virtual GroupReplies* into() = 0;
  virtual void Finish(absl::Status status) = 0;

 protected:
  ~AsyncInto() = default;
};

// A client's NSO. Thread-safe: many threads call one Client at once.
class ClientBackend {
 public:
  virtual ~ClientBackend() = default;
  // Waits at most `wait` for the result (the NSO enforces the call's own deadline).
  virtual absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                              absl::Duration wait) = 0;
  // The same without waiting: `done` gets the result exactly once, after `wait` at the latest.
  // It may run in any thread of the backend, under its locks, or before this returns: it only
  // hands the result over (Client::InvokeAsync queues it, async_results.h). This default waits.
  using Done = std::function<void(absl::StatusOr<GroupReplies>)>;
  virtual void InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done);
  // The same as Invoke, into the caller's memory (Client::InvokeInto): `*into` is overwritten,
  // its vector and strings reused. This default moves Invoke's result in (nothing reused); the
  // local fast path swaps the replies out of its read buffer (invocation/local_calls.h).
  virtual absl::Status InvokeInto(const api::InvokeRequest& request, absl::Duration wait,
                                  GroupReplies* into);
  // InvokeAsync into the caller's memory (Client::InvokeAsyncInto): `*call->into()` filled,
  // then call->Finish once, as `done` above. This default goes through InvokeAsync (the result
  // moved in); the local fast path swaps the replies out of its read buffer and keeps the call's
  // bookkeeping for the next (no allocation per call).
  virtual void InvokeAsyncInto(const api::InvokeRequest& request, absl::Duration wait,
                               AsyncInto* call);
  virtual absl::Status Multicast(const api::MulticastRequest& request) = 0;
  virtual absl::StatusOr<api::GroupDetailsReply> GroupDetails(const api::GroupRequest& request) = 0;
  virtual absl::Status JoinGroup(const api::GroupRequest& request) = 0;
  virtual absl::Status LeaveGroup(const api::GroupRequest& request) = 0;
  // The group's details now (`on_change` before this returns), then at each change, on a thread
  // of the watch; `on_end` once if the watch ends by itself; `on_lost` each time the daemon is
  // lost and the watch tries again (Client::WatchGroup). on_end and on_lost may be empty.
  using OnGroupChange = std::function<void(const api::GroupDetailsReply&)>;
  using OnWatchEnd = std::function<void(absl::Status)>;
  struct WatchHandlers {
    OnGroupChange on_change;
    OnWatchEnd on_end;
    OnWatchEnd on_lost;
  };
  virtual absl::StatusOr<std::unique_ptr<GroupWatch>> WatchGroup(const api::GroupRequest& request,
                                                                 WatchHandlers handlers) = 0;
  // A group made at run time (daemons with dynamic_groups).
  virtual absl::Status CreateGroup(const api::CreateGroupRequest& request) {
    (void)request;
    return absl::UnimplementedError("CreateGroup goes through a daemon's gRPC API");
  }
  virtual absl::Status DeleteGroup(const api::GroupRequest& request) {
    (void)request;
    return absl::UnimplementedError("DeleteGroup goes through a daemon's gRPC API");
  }
  // Gives the NSO back (~Client): best effort, waiting at most `timeout`.
  virtual absl::Status Detach(uint64_t nso, absl::Duration timeout) {
    (void)nso;
    (void)timeout;
    return absl::UnimplementedError("this client cannot detach its NSO");
  }
  // "local", "grpc" or "in-process" (Client::via).
  virtual const char* via() const = 0;
  // A new NSO at the daemon (its earlier one is unknown there: the daemon restarted, or the
  // channel moved to another of the daemons it was given).
  struct Attached {
    uint64_t nso = 0;
    std::string node_name;  // the daemon that holds it
    // Its local fast path, when this client uses one ("" = none): address, key and identity.
    std::string local_api;
    uint64_t local_key = 0;
    std::string local_identity;
  };
  virtual absl::StatusOr<Attached> Attach(const std::string& client_name,
                                          absl::Duration timeout) {
    (void)client_name;
    (void)timeout;
    return absl::UnimplementedError("this client cannot attach again");
  }
};

// A servant's registration and its delivery stream.
class ServantBackend {
 public:
  virtual ~ServantBackend() = default;
  // Registers for the group; OK once deliveries will follow.
  virtual absl::Status Register(const api::ServantMessage::Register& request) = 0;
  // Registers with inline dispatch: `deliver` runs on the node's protocol thread as each delivery
  // is made, instead of deliveries being queued for Next(). `ended` runs there too, once, if the
  // node ends the registration by itself (a newer servant of the group replaced it), with why.
  // Only an NSO in the same address space can do it (nso/local_backend.cc); the others answer
  // UNIMPLEMENTED.
  virtual absl::Status RegisterInline(const api::ServantMessage::Register& request,
                                      std::function<void(const api::ServantEvent&)> deliver,
                                      std::function<void(const absl::Status&)> ended) {
    (void)request;
    (void)deliver;
    (void)ended;
    return absl::UnimplementedError(
        "inline dispatch needs the servant's NSO in its address space (an embedded node)");
  }
  // Blocks for the next delivery, in the group's total order; false once the stream ended.
  virtual bool Next(api::ServantEvent* event) = 0;
  // The next delivery is already here: Next would not block (a servant keeping its state on disk
  // writes it once for the deliveries read together: Servant::KeepStateIn). False if unknown.
  virtual bool EventBuffered() const { return false; }
  // `answer` is the backend's to take from until it returns (its payload is moved on); it may
  // be on an arena (Servant::Answer builds it on the stack: no allocation per answer, issue 7).
  virtual void Answer(api::ServantMessage::Answer& answer) = 0;
  // A group-to-group call from inside a handler (003 section 4.3).
  virtual absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                              absl::Duration wait) = 0;
  // Ends the stream: Next returns false soon after. Safe from any thread, more than once.
  virtual void Cancel() = 0;
  // Why the stream ended (after Next returned false).
  virtual absl::Status Finish() = 0;
  // "local", "grpc" or "in-process" (Servant::via).
  virtual const char* via() const = 0;
  // The largest answer payload the daemon takes, as its acknowledgement of the registration said
  // (ServantEvent.max_reply_bytes); 0: not said (the daemon checks by itself).
  uint64_t max_reply_bytes() const { return max_reply_bytes_; }

 protected:
  uint64_t max_reply_bytes_ = 0;  // set by Register
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_BACKEND_H_
