// The client's end of a daemon's local fast path (nso/local_api.h, proto/api.proto LocalFrame):
// one Unix socket connection with length-prefixed LocalFrames. Open() says hello with the key of
// the AttachReply and the bearer token and waits for the daemon's hello, so a refusal (another
// daemon at that address, a bad token) is an error at once and the caller can fall back to gRPC.
//
// Write is thread-safe (callers write their own frames: no writer thread, no hand-off); Read is for
// one reader thread. Shutdown (any thread) makes a blocked Read return false.
//
// Batching (004 section 3.2, 001 section 5: many messages per write, not one system call each):
// - Write combines: a caller that finds another caller in send() leaves its frame for that caller,
//   which sends every frame waiting when its own send returns (flat combining). Callers that come
//   one at a time each send at once, as before; concurrent callers share send() calls.
// - WriteSoon (reader thread only, for answers to frames it has read) holds a frame while the
//   reader still has whole frames buffered, so the answers to frames that arrived together leave
//   together; they are sent before the reader waits for more, and at the latest kHoldUs after the
//   first one held (checked at the next WriteSoon), like the daemon's flush after a batch of work.
//   It holds only while the handlers have been fast: each of the last kFastRunsToHold answers
//   came within kHoldUs of its frame. A held answer waits for the next handler, so a servant
//   whose handlers may be slow gets its answers sent at once; a slow handler after a fast run
//   delays the answers held before it once, and holding stops for the next kFastRunsToHold.
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
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "invocation/steady_time.h"
#include "proto/api.pb.h"

namespace cohort::internal {

// Where the local fast path is and how to get in (from an AttachReply).
struct LocalEndpoint {
  std::string address;  // "unix:@name" or "unix:/path"
  uint64_t key = 0;
  std::string token;    // bearer token ("" = none)
  std::string identity;  // AttachReply.local_identity ("" = none): the name its certificate proved
};

class LocalLink {
 public:
  // Connects, says hello and waits at most `timeout` for the daemon's hello.
  static absl::StatusOr<std::unique_ptr<LocalLink>> Open(const LocalEndpoint& endpoint,
                                                         absl::Duration timeout);
  // Open in two steps, so that another thread can Shutdown a link still waiting for its hello
  // (invocation/local_calls.h gives up a reopen when its Client closes): connects only...
  static absl::StatusOr<std::unique_ptr<LocalLink>> Connect(const LocalEndpoint& endpoint);
  // ...then says hello and waits at most `timeout` for the daemon's (any error: do not use it).
  absl::Status Hello(const LocalEndpoint& endpoint, absl::Duration timeout);
  ~LocalLink();
  LocalLink(const LocalLink&) = delete;
  LocalLink& operator=(const LocalLink&) = delete;

  // Sends one frame whole (blocking; a daemon that does not take it for 10 s breaks the link),
  // or leaves it to the caller already sending (see above). An error: the link is broken (a frame
  // left to another caller whose send then fails is lost with the link: the reader sees the end).
  absl::Status Write(const api::LocalFrame& frame);
  // Reader thread only: like Write, but held while Read has whole frames left (see above).
  absl::Status WriteSoon(const api::LocalFrame& frame);
  // The next frame; false once the link ended (closed, broken, shut down, undecodable frame).
  // An `error` frame from the daemon is returned like any other.
  bool Read(api::LocalFrame* frame);
  // Like Read, but gives up after `timeout` (then the link is shut down).
  bool ReadWithin(api::LocalFrame* frame, absl::Duration timeout);
  // Like Read, but a timeout leaves the link as it was (a partial frame stays buffered), so that
  // a caller reading for others (invocation/local_calls.h) can stop at its own deadline.
  enum class Outcome { kFrame, kTimeout, kEnded };
  Outcome ReadUntil(api::LocalFrame* frame, SteadyTime deadline);
  // The reader's buffer holds a whole frame: the next Read returns without a system call.
  bool FrameBuffered() const;
  // Reader only, without waiting: the daemon has closed the link (nothing left to read but its
  // end) or it is broken. Unread bytes or frames count as open.
  bool PeerClosed();
  void Shutdown();
  // Tests: the clock WriteSoon's rules read (default absl::GetCurrentTimeNanos); reader thread.
  void SetClockForTest(int64_t (*now_ns)()) { now_ns_ = now_ns; }

  // Frames waiting for the caller in send() beyond this make the next writer wait for it.
  static constexpr size_t kPendingBytesMax = 4 << 20;
  static constexpr size_t kHoldBytesMax = 64 << 10;  // WriteSoon holds at most this much
  static constexpr int64_t kHoldUs = 200;
  static constexpr uint32_t kFastRunsToHold = 64;

 private:
  explicit LocalLink(int fd) : fd_(fd) {}
  // Reads until `in_` holds a whole frame, until `deadline` at most. Sends held frames before it
  // waits.
  Outcome Fill(SteadyTime deadline);
  Outcome Take(Outcome filled, api::LocalFrame* frame);  // parses the frame Fill buffered
  // Appends `frame` (if any) and sends what waits, unless another caller is sending (it sends it).
  absl::Status Send(const api::LocalFrame* frame);
  absl::Status SendAll(const std::string& bytes);  // blocking; the flusher only

  const int fd_;
  std::atomic<bool> shut_{false};
  absl::Mutex write_mu_;
  std::string out_ ABSL_GUARDED_BY(write_mu_);  // frames not sent yet
  bool sending_now_ ABSL_GUARDED_BY(write_mu_) = false;  // a caller is in SendAll
  absl::Status write_error_ ABSL_GUARDED_BY(write_mu_);  // set once: the link is broken
  std::string sending_;  // the bytes in SendAll; only the caller that set sending_now_
  std::atomic<bool> held_{false};  // WriteSoon left frames in out_
  int64_t held_since_ns_ = 0;      // reader thread: when the first of them was held
  int64_t (*now_ns_)() = &absl::GetCurrentTimeNanos;
  int64_t handed_out_ns_ = 0;      // reader thread: when Read last returned a frame
  uint32_t fast_runs_ = 0;         // reader thread: answers in a row within kHoldUs of it
  // The reader's: one thread at a time reads (the reader thread, or the caller that LocalCalls
  // lets read; it hands over under its own mutex).
  std::string in_;
  std::unique_ptr<char[]> chunk_;
  size_t in_offset_ = 0;
};

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_LOCAL_LINK_H_
