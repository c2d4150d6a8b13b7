// One peer's outgoing queue and the stream it is written to, when there is one. A writer thread
// coalesces everything queued into one Frame per write (batching, 004 section 3.2).
#ifndef COHORT_NSO_PEER_LINK_H_
#define COHORT_NSO_PEER_LINK_H_

#include <cstdint>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

// The part of a gRPC stream a link writes to (client and server streams both provide it).
class PeerStream {
 public:
  virtual ~PeerStream() = default;
  virtual bool Write(const wire::PeerFrame& frame) = 0;
  virtual bool Read(wire::PeerFrame* frame) = 0;
};

template <typename Stream>
class PeerStreamAdapter final : public PeerStream {
 public:
  explicit PeerStreamAdapter(Stream* stream) : stream_(stream) {}
  bool Write(const wire::PeerFrame& frame) override { return stream_->Write(frame); }
  bool Read(wire::PeerFrame* frame) override { return stream_->Read(frame); }

 private:
  Stream* stream_;
};

class PeerLink {
 public:
  struct Stats {
    uint64_t frames = 0;
    uint64_t envelopes = 0;
    uint64_t bytes = 0;
    uint64_t dropped = 0;
  };

  PeerLink(uint32_t peer, size_t queue_max, size_t frame_max_envelopes);
  ~PeerLink();

  // Queues an envelope; beyond queue_max the oldest is dropped (protocols retransmit).
  void Enqueue(wire::Envelope envelope);

  // A new stream takes over the link; returns its generation. An older stream's writer stops.
  uint64_t Attach();
  // Writes queued envelopes to `stream` until the stream fails or its generation is detached.
  // Blocks; run it on a thread of its own.
  void ServeWrites(PeerStream* stream, uint64_t generation);
  void Detach(uint64_t generation);  // makes ServeWrites of that generation return
  void DetachAll();
  bool attached() const;
  Stats stats() const;

 private:
  const uint32_t peer_;
  const size_t queue_max_;
  const size_t frame_max_envelopes_;
  mutable absl::Mutex mu_;
  std::deque<wire::Envelope> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;   // of the stream allowed to write
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_PEER_LINK_H_
