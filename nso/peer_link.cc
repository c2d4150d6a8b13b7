#include "nso/peer_link.h"

#include "nso/logging.h"

namespace cohort::nso {

PeerLink::PeerLink(uint32_t peer, size_t queue_max, size_t frame_max_envelopes)
    : peer_(peer), queue_max_(queue_max), frame_max_envelopes_(frame_max_envelopes) {}

PeerLink::~PeerLink() { DetachAll(); }

void PeerLink::Enqueue(wire::Envelope envelope) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= queue_max_) {
    queue_.pop_front();
    if (stats_.dropped++ % 10000 == 0) {
      Log("peer")->warn("queue to node {} full ({} envelopes): dropping oldest", peer_, queue_max_);
    }
  }
  queue_.push_back(std::move(envelope));
}

uint64_t PeerLink::Attach() {
  absl::MutexLock lock(&mu_);
  closed_ = false;
  attached_ = true;
  return ++generation_;
}

void PeerLink::ServeWrites(PeerStream* stream, uint64_t generation) {
  wire::PeerFrame frame;
  while (true) {
    frame.Clear();
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || generation_ != generation || closed_;
      };
      mu_.Await(absl::Condition(&ready));
      if (generation_ != generation || closed_) break;
      wire::Frame* batch = frame.mutable_frame();
      while (!queue_.empty() && static_cast<size_t>(batch->envelopes_size()) < frame_max_envelopes_) {
        *batch->add_envelopes() = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    size_t bytes = frame.ByteSizeLong();
    if (!stream->Write(frame)) break;  // lost: the protocols above retransmit what matters
    absl::MutexLock lock(&mu_);
    stats_.frames++;
    stats_.envelopes += frame.frame().envelopes_size();
    stats_.bytes += bytes;
  }
  absl::MutexLock lock(&mu_);
  if (generation_ == generation) attached_ = false;
}

void PeerLink::Detach(uint64_t generation) {
  absl::MutexLock lock(&mu_);
  if (generation_ == generation) {
    ++generation_;
    attached_ = false;
  }
}

void PeerLink::DetachAll() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  attached_ = false;
}

bool PeerLink::attached() const {
  absl::MutexLock lock(&mu_);
  return attached_;
}

PeerLink::Stats PeerLink::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace cohort::nso
