// Pipelining for the client stub library over gRPC (issue 7; 000 MinORB: many outstanding calls
// per connection): ONE InvokeStream to the daemon carries every invocation of a Client, results
// matched to callers by call number. It is the path of a client on another host (and the same
// protocol a client in another language speaks); on the daemon's host the stub uses the local
// fast path (local_calls.h), which works the same way on a Unix socket.
//
// The stream uses gRPC's asynchronous API, on a completion queue of its own, so that the calling
// threads drive it themselves (omniORB2, 001 section 3: "no thread switching along the call
// chain"):
// - a caller starts the write of its own call when no write is in progress (a started write does
//   not block); calls that come while one is in progress are queued, and the thread that sees a
//   write complete starts the next, the queued burst as one batch;
// - a caller whose call is the only one pending drives the queue itself and takes its own result
//   (one wake-up per call, not two: no reader thread between the stream and the caller);
// - with several calls pending a helper thread drives it and hands each result to its caller.
//   The rules of the turn, shared with local_calls.h, are in reader_turn.h.
// Asynchronous calls (InvokeAsync) go on the same stream; nobody waits for them, so the helper
// drives while they are pending and fails them when their wait passes without a result (the
// stream is then reset, as for a caller that waited in vain).
// Waiting callers sleep on their own Notification and are woken without mu_ held (as in
// local_calls.h). A caller never waits on the stream beyond its wait: if no result came in time,
// the call fails DEADLINE_EXCEEDED and the stream is cancelled (the daemon enforces every call's
// deadline itself, so silence past the slack means the daemon or the stream is stuck). A broken
// stream fails the calls on it with UNAVAILABLE and the next call opens a new one.
#ifndef COHORT_INVOCATION_CALL_STREAM_H_
#define COHORT_INVOCATION_CALL_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/pending_calls.h"
#include "invocation/reader_turn.h"
#include "proto/api.grpc.pb.h"

namespace cohort {

struct GroupReplies;

namespace internal {

class CallStream {
 public:
  // `stub` outlives this object; `token` is sent as a bearer token when non-empty.
  CallStream(api::Cohort::Stub* stub, std::string token);
  ~CallStream();  // cancels the stream and joins its helper; no call may be in progress
  CallStream(const CallStream&) = delete;
  CallStream& operator=(const CallStream&) = delete;

  // Sends the invocation and waits for its result, at most `wait` (the daemon enforces the
  // call's own deadline; `wait` includes slack beyond it). Thread-safe.
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request, absl::Duration wait);
  // Sends the invocation and returns; `done` gets the result exactly once, within `wait` (under
  // mu_ or not, in any thread: it only hands the result over). Thread-safe.
  using Done = std::function<void(absl::StatusOr<GroupReplies>)>;  // PendingCalls' Done
  void InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done);

  // Results taken by the callers themselves and by the helper thread (for tests).
  ReadCounts results() const;

 private:
  struct Stream;  // one InvokeStream, its completion queue and its helper
  using Calls = PendingCalls<Stream>;
  using Pending = Calls::Pending;

  // The stream to send on, opened if there is none or the last one broke.
  std::shared_ptr<Stream> Current();
  // Under mu_: if the stream can take a write now, claims it (`writing`) for the first queued
  // call and returns true; the caller then calls IssueWrite, without mu_.
  bool ClaimWrite(Stream* stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void IssueWrite(Stream* stream);
  // Waits for one event of the stream's queue (without mu_), handles it, hands a result to its
  // caller (after mu_) and says whether this driver drives on: a caller (`self`) until its own
  // result has come (or its deadline passes: it fails and the stream is reset), the helper
  // (`self` null) while any call is pending. A driver that stops has given up the turn (`turn.reading`); a
  // caller leaves calls still pending to the helper. False also when the stream broke.
  bool DriveOne(Stream* stream, Pending* self, SteadyTime deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void HelperLoop(Stream* stream);
  // Fails every call on `stream` with `status` and cancels it; the next call opens a new one.
  void Broken(Stream* stream, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  api::Cohort::Stub* const stub_;
  const std::string token_;
  absl::Mutex open_mu_;  // one caller at a time replaces a broken stream (held without mu_)
  mutable absl::Mutex mu_;
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  Calls pending_ ABSL_GUARDED_BY(mu_);
  ReadCounts results_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_CALL_STREAM_H_
