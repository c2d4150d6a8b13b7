// A queue that hands items from the protocol thread to one consumer thread (an embedded node's
// servant delivery thread, nso/local_backend.cc). Push never blocks on the consumer, so the protocol thread
// is never held up by a slow stream; the consumer takes everything queued at once, so a burst of
// results goes out in one batch of writes (004 section 3.2: batching).
#ifndef COHORT_NSO_HANDOFF_QUEUE_H_
#define COHORT_NSO_HANDOFF_QUEUE_H_

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::nso {

template <typename T>
class HandoffQueue {
 public:
  // Returns false (and drops the item) once the queue is closed.
  bool Push(T item) {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    items_.push_back(std::move(item));
    return true;
  }
  // Replaces what is queued and not yet taken with `item` (a snapshot superseding the earlier
  // ones: a group watch's details), so a consumer that does not keep up finds one item. Returns
  // false (and drops the item) once the queue is closed.
  bool PushLatest(T item) {
    std::vector<T> superseded;
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    superseded.swap(items_);
    items_.push_back(std::move(item));
    return true;
  }
  // No more items: the consumer returns once it has taken what is queued.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  // Closed, and what is queued is dropped (a consumer that stopped taking: the queue's bound).
  void CloseAndDrop() {
    std::vector<T> dropped;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      dropped.swap(items_);
    }
  }
  // Blocks until an item is queued or the queue is closed; moves every queued item to `*out`
  // (cleared first). False when the queue is closed and empty.
  bool TakeAll(std::vector<T>* out) {
    out->clear();
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !items_.empty() || closed_; };
    mu_.Await(absl::Condition(&ready));
    if (items_.empty()) return false;
    out->swap(items_);
    return true;
  }

 private:
  absl::Mutex mu_;
  std::vector<T> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_HANDOFF_QUEUE_H_
