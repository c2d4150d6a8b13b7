// Pipelining for the client stub library (issue 7; 000 MinORB: many outstanding calls per
// connection): ONE InvokeStream to the daemon carries every invocation of a Client. Callers queue
// their call and wait; a writer thread sends what is queued (a burst as one batch of writes), a
// reader thread matches each result to its caller by call number. A caller never blocks on the
// stream beyond its wait: if no result came in time, the call fails DEADLINE_EXCEEDED and the
// stream is cancelled (the daemon enforces every call's deadline itself, so silence past the slack
// means the daemon or the stream is stuck). A broken stream fails the calls on it with UNAVAILABLE
// and the next call opens a new one.
#ifndef COHORT_INVOCATION_CALL_STREAM_H_
#define COHORT_INVOCATION_CALL_STREAM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nso/handoff_queue.h"
#include "proto/api.grpc.pb.h"

namespace cohort {

struct GroupReplies;

namespace internal {

class CallStream {
 public:
  // `stub` outlives this object; `token` is sent as a bearer token when non-empty.
  CallStream(api::Cohort::Stub* stub, std::string token);
  ~CallStream();  // cancels the stream and joins its threads; no call may be in progress
  CallStream(const CallStream&) = delete;
  CallStream& operator=(const CallStream&) = delete;

  // Sends the invocation and waits for its result, at most `wait` (the daemon enforces the
  // call's own deadline; `wait` includes slack beyond it). Thread-safe.
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request, absl::Duration wait);

 private:
  struct Pending;
  // One opened stream; replaced when it breaks.
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<api::PipelinedCall, api::PipelinedResult>> rw;
    nso::HandoffQueue<api::PipelinedCall> outgoing;  // to the writer thread
    std::thread reader;  // joins the writer when the stream ends
    std::thread writer;
    bool broken = false;  // guarded by CallStream::mu_: no call may be registered on it
  };

  // The stream to send on, opened if there is none or the last one broke.
  std::shared_ptr<Stream> Current();
  // Writer thread: sends queued calls until the queue closes (a failed write drains the rest).
  static void WriteCalls(Stream* stream);
  // Reader thread: completes calls as their results arrive; once the stream ends, fails the calls
  // still waiting on it, stops the writer and finishes the stream.
  void ReadResults(Stream* stream);
  // Removes the call from the pending map and completes it with `result`; false if someone else
  // already did (the reader, a broken stream, a timeout).
  bool Complete(uint64_t call, absl::StatusOr<GroupReplies> result);

  api::Cohort::Stub* const stub_;
  const std::string token_;
  absl::Mutex mu_;
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Pending*> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_CALL_STREAM_H_
