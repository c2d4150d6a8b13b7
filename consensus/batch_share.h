// The batch that several sends hold (SharedBatch, total_order.h) made in the memory of the last
// one once no send holds that any more: a proposal, an ORDERED round or a FORWARD then costs no
// allocation for its messages or their strings (issue 7: no per-message allocation, omniORB2,
// 001 sections 5-6). A copy of the holder starts without it (Spare).
#ifndef COHORT_CONSENSUS_BATCH_SHARE_H_
#define COHORT_CONSENSUS_BATCH_SHARE_H_

#include <atomic>
#include <memory>

#include "consensus/reuse_ring.h"
#include "consensus/spare.h"
#include "proto/wire.pb.h"

namespace cohort::consensus {

// Whether a batch's strings hold more than kSpareBytesMax: such memory goes with the batch.
inline bool LargeBatch(const wire::MessageBatch& batch) {
  size_t bytes = 0;
  for (const wire::DataMessage& message : batch.messages()) bytes += message.payload().capacity();
  return bytes > kSpareBytesMax;
}

// Empties `batch`, keeping its messages and strings for the next copy into it unless large
// (a repeated field reuses its cleared elements): EmptyForReuse (reuse_ring.h) for a batch.
inline void EmptyForReuse(wire::MessageBatch* batch) {
  if (LargeBatch(*batch)) {
    *batch = wire::MessageBatch();
  } else {
    batch->Clear();
  }
}

class BatchShare {
 public:
  // An empty batch to fill, then hand to sends (shared()): the last one's, emptied, when no send
  // holds it any more (the transports dropped theirs), else a new one.
  wire::MessageBatch* Refill() {
    std::shared_ptr<wire::MessageBatch>& batch = batch_.value;
    if (batch != nullptr && batch.use_count() == 1 && !LargeBatch(*batch)) {
      // The fence orders this after every read of it by the holders whose release made the
      // count 1 (a transport's thread may have held it).
      std::atomic_thread_fence(std::memory_order_acquire);
      batch->Clear();
    } else {
      batch = std::make_shared<wire::MessageBatch>();
    }
    return batch.get();
  }
  // A copy of `value` made in the memory of the last one, shared.
  std::shared_ptr<const wire::MessageBatch> Share(const wire::MessageBatch& value) {
    *Refill() = value;
    return batch_.value;
  }
  // The batch Refill returned, for sends to hold.
  std::shared_ptr<const wire::MessageBatch> shared() const { return batch_.value; }

 private:
  Spare<std::shared_ptr<wire::MessageBatch>> batch_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_BATCH_SHARE_H_
