// One peer's outgoing queue and the gRPC stream it is written to, when there is one.
//
// The stream's reactor (nso/peer_reactors.h) is the link's PeerWriter. Writes start on the thread
// that finds the stream idle: the protocol thread at the end of a batch of work (Kick, from the
// event loop's flush: no hand-off to a writer thread, 001 section 3), or the gRPC thread that
// reports the previous write done. Each write carries everything queued as one Frame (batching,
// 004 section 3.2). One write at a time per stream: gRPC's rule for a reactor.
//
// Every decision is taken under the link's mutex; the writer is called without it (a reaction
// may run inline in the thread that starts an operation, and come back to the link).
#ifndef COHORT_NSO_PEER_LINK_H_
#define COHORT_NSO_PEER_LINK_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/log_every.h"
#include "nso/transport.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

// A stream's write side as a link drives it.
class PeerWriter {
 public:
  virtual ~PeerWriter() = default;

 protected:
  // Starts writing `frame` (the writer's own buffer, filled by the link); the writer reports the
  // end to PeerLink::WriteDone. Never called again before that.
  virtual void StartFrameWrite(const wire::PeerFrame* frame) = 0;
  // The link lets go of the writer, once: no write is in progress, and none will start.
  virtual void Released() = 0;

 private:
  friend class PeerLink;
  // Guarded by the mutex of the link the writer is attached to (set once, by Attach).
  wire::PeerFrame frame_;  // the write in progress
  bool writing_ = false;
};

class PeerLink {
 public:
  // A frame written holds at most frame_max_envelopes envelopes and frame_max_bytes bytes of
  // them (one larger envelope goes alone): below the peer server's message size limit.
  PeerLink(NodeId peer, size_t queue_max, size_t frame_max_envelopes, size_t frame_max_bytes,
           TransportCounters* counters);
  ~PeerLink();

  // Queues an envelope; beyond queue_max the oldest is dropped (protocols retransmit). Kick
  // writes it.
  void Enqueue(wire::Envelope envelope);
  // Starts a write of what is queued, unless one is in progress or no stream is attached.
  void Kick();

  // A new stream takes over the link: it writes what is queued. An older stream's writer is
  // released once its write in progress ends. False after DetachAll: the caller releases
  // nothing and the writer is not used.
  bool Attach(PeerWriter* writer);
  // From the writer's OnWriteDone. After a failed write the writer is released.
  void WriteDone(PeerWriter* writer, bool ok);
  // The stream ended: the writer is released (now, or when its write in progress ends).
  void Detach(PeerWriter* writer);
  // Shutdown: releases the writer; nothing attaches any more.
  void DetachAll();
  bool attached() const;

 private:
  struct Action {
    PeerWriter* write = nullptr;
    PeerWriter* release = nullptr;
  };
  // What `writer` does next, if it is the attached one and idle: write what is queued.
  Action NextWrite(PeerWriter* writer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Act(const Action& action) const;  // without mu_

  const NodeId peer_;
  const size_t queue_max_;
  const size_t frame_max_envelopes_;
  const size_t frame_max_bytes_;
  TransportCounters* const counters_;
  mutable absl::Mutex mu_;
  std::deque<wire::Envelope> queue_ ABSL_GUARDED_BY(mu_);
  PeerWriter* writer_ ABSL_GUARDED_BY(mu_) = nullptr;  // the attached stream's
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  LogEvery dropped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_PEER_LINK_H_
