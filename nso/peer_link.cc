#include "nso/peer_link.h"

#include "nso/event_loop.h"
#include "nso/logging.h"

namespace cohort::nso {

PeerLink::PeerLink(NodeId peer, size_t queue_max, size_t frame_max_envelopes,
                   size_t frame_max_bytes, TransportCounters* counters)
    : peer_(peer),
      queue_max_(queue_max),
      frame_max_envelopes_(frame_max_envelopes),
      frame_max_bytes_(frame_max_bytes),
      counters_(counters) {}

PeerLink::~PeerLink() { DetachAll(); }

void PeerLink::Enqueue(wire::Envelope envelope) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= queue_max_) {
    queue_.pop_front();
    if (const uint64_t dropped = dropped_.Count(MonotonicNowMs()); dropped > 0) {
      Log("peer")->warn("queue to node {} full ({} envelopes): dropping oldest ({} dropped since "
                        "the last such line, at most one in 10 s)", peer_, queue_max_, dropped);
    }
  }
  queue_.push_back(std::move(envelope));
}

void PeerLink::Kick() {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    if (writer_ == nullptr || queue_.empty()) return;
    action = NextWrite(writer_);
  }
  Act(action);
}

bool PeerLink::Attach(PeerWriter* writer) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    PeerWriter* old = writer_;
    writer_ = writer;
    // The old stream's write in progress, if any, ends in WriteDone, which releases it.
    if (old != nullptr && !old->writing_) action.release = old;
    Action write = NextWrite(writer);
    action.write = write.write;
  }
  Act(action);
  return true;
}

void PeerLink::WriteDone(PeerWriter* writer, bool ok) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    writer->writing_ = false;
    if (!ok && writer_ == writer) writer_ = nullptr;  // lost: the protocols above retransmit
    if (writer_ != writer) {
      action.release = writer;
    } else {
      action = NextWrite(writer);
    }
  }
  Act(action);
}

void PeerLink::Detach(PeerWriter* writer) {
  Action action;
  {
    absl::MutexLock lock(&mu_);
    if (writer_ != writer) return;  // released already, or when its write ends
    writer_ = nullptr;
    if (!writer->writing_) action.release = writer;
  }
  Act(action);
}

void PeerLink::DetachAll() {
  PeerWriter* writer = nullptr;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    if (writer_ != nullptr && !writer_->writing_) writer = writer_;
    writer_ = nullptr;
  }
  Act({nullptr, writer});
}

bool PeerLink::attached() const {
  absl::MutexLock lock(&mu_);
  return writer_ != nullptr;
}

PeerLink::Action PeerLink::NextWrite(PeerWriter* writer) {
  Action action;
  if (writer != writer_ || writer->writing_ || queue_.empty()) return action;
  writer->frame_.Clear();
  wire::Frame* batch = writer->frame_.mutable_frame();
  size_t bytes = 0;
  while (!queue_.empty() && static_cast<size_t>(batch->envelopes_size()) < frame_max_envelopes_) {
    const size_t size = queue_.front().ByteSizeLong();
    if (batch->envelopes_size() > 0 && bytes + size > frame_max_bytes_) break;
    bytes += size;
    *batch->add_envelopes() = std::move(queue_.front());
    queue_.pop_front();
  }
  writer->writing_ = true;
  action.write = writer;
  return action;
}

void PeerLink::Act(const Action& action) const {
  if (action.release != nullptr) action.release->Released();
  if (action.write == nullptr) return;
  // Without mu_: until WriteDone only this thread touches the frame of the write in progress.
  const wire::PeerFrame& frame = action.write->frame_;
  counters_->frames_sent++;
  counters_->envelopes_sent += frame.frame().envelopes_size();
  counters_->bytes_sent += frame.ByteSizeLong();
  action.write->StartFrameWrite(&frame);
}

}  // namespace cohort::nso
