// The client's end of a daemon's local fast path (nso/local_api.h, proto/api.proto LocalFrame):
// one Unix socket connection with length-prefixed LocalFrames. Open() says hello with the key of
// the AttachReply and the bearer token and waits for the daemon's hello, so a refusal (another
// daemon at that address, a bad token) is an error at once and the caller can fall back to gRPC.
//
// Write is thread-safe (callers write their own frames: no writer thread, no hand-off); Read is for
// one reader thread. Shutdown (any thread) makes a blocked Read return false.
#ifndef COHORT_INVOCATION_LOCAL_LINK_H_
#define COHORT_INVOCATION_LOCAL_LINK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/api.pb.h"

namespace cohort::internal {

// Where the local fast path is and how to get in (from an AttachReply).
struct LocalEndpoint {
  std::string address;  // "unix:@name" or "unix:/path"
  uint64_t key = 0;
  std::string token;    // bearer token ("" = none)
};

class LocalLink {
 public:
  // Connects, says hello and waits at most `timeout` for the daemon's hello.
  static absl::StatusOr<std::unique_ptr<LocalLink>> Open(const LocalEndpoint& endpoint,
                                                         absl::Duration timeout);
  ~LocalLink();
  LocalLink(const LocalLink&) = delete;
  LocalLink& operator=(const LocalLink&) = delete;

  // Sends one frame whole (blocking; a daemon that does not take it for 10 s breaks the link).
  absl::Status Write(const api::LocalFrame& frame);
  // The next frame; false once the link ended (closed, broken, shut down, undecodable frame).
  // An `error` frame from the daemon is returned like any other.
  bool Read(api::LocalFrame* frame);
  // Like Read, but gives up after `timeout` (then the link is shut down).
  bool ReadWithin(api::LocalFrame* frame, absl::Duration timeout);
  void Shutdown();

 private:
  explicit LocalLink(int fd) : fd_(fd) {}
  // Reads until `in_` holds a whole frame; false at the end of the stream.
  bool Fill(int timeout_ms);

  const int fd_;
  std::atomic<bool> shut_{false};
  absl::Mutex write_mu_;
  std::string out_ ABSL_GUARDED_BY(write_mu_);
  std::string in_;  // reader thread only
  std::unique_ptr<char[]> chunk_;  // reader thread only
  size_t in_offset_ = 0;
};

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_LOCAL_LINK_H_
