// Pipelining for the client stub library (issue 7; 000 MinORB: many outstanding calls per
// connection): ONE InvokeStream to the daemon carries every invocation of a Client. Callers write
// their call and wait; a reader thread matches each result to its caller by call number. A broken
// stream fails the calls on it with UNAVAILABLE and the next call opens a new one.
#ifndef COHORT_INVOCATION_CALL_STREAM_H_
#define COHORT_INVOCATION_CALL_STREAM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/api.grpc.pb.h"

namespace cohort {

struct GroupReplies;

namespace internal {

class CallStream {
 public:
  // `stub` outlives this object; `token` is sent as a bearer token when non-empty.
  CallStream(api::Cohort::Stub* stub, std::string token);
  ~CallStream();  // cancels the stream and joins its reader; no call may be in progress
  CallStream(const CallStream&) = delete;
  CallStream& operator=(const CallStream&) = delete;

  // Sends the invocation and waits for its result, at most `wait` (the daemon enforces the
  // call's own deadline; `wait` is the slack beyond it). Thread-safe.
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request, absl::Duration wait);

 private:
  struct Pending;
  // One opened stream; replaced when it breaks.
  struct Stream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<api::PipelinedCall, api::PipelinedResult>> rw;
    std::thread reader;
    bool broken = false;    // guarded by CallStream::mu_: no call may be registered on it
    bool finished = false;  // guarded by CallStream::write_mu_: Finish called, no more writes
  };

  // The stream to write to, opened if there is none or the last one broke.
  std::shared_ptr<Stream> Current();
  // The reader thread of `stream`: completes calls as their results arrive, then, once the stream
  // ends, fails the calls still waiting on it.
  void ReadResults(Stream* stream);
  // Removes the call from the pending map and completes it with `result`; false if someone else
  // already did (the reader, a broken stream, a timeout).
  bool Complete(uint64_t call, absl::StatusOr<GroupReplies> result);

  api::Cohort::Stub* const stub_;
  const std::string token_;
  absl::Mutex mu_;
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Stream>> retired_ ABSL_GUARDED_BY(mu_);  // joined at destruction
  std::map<uint64_t, Pending*> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Mutex write_mu_;  // one writer at a time on the stream
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_CALL_STREAM_H_
