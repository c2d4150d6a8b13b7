// A FIFO queue whose items are reused: pushing and popping allocate nothing once the queue has
// held its usual number of items. A std::deque allocates a block every few large items
// (libstdc++'s blocks hold 512 bytes), so a queue of envelopes drained on every flush allocated
// about once per send (issue 7: no per-message allocation, omniORB2, 001 sections 5-6).
//
// An item never moves while queued: a protobuf message that moves loses the sizes its
// serialisation uses (the raw TCP transport sizes each envelope once, when it is queued).
// Single-threaded, like its user (the raw TCP transport's links).
#ifndef COHORT_NSO_SLOT_QUEUE_H_
#define COHORT_NSO_SLOT_QUEUE_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace cohort::nso {

template <typename T>
class SlotQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }

  T& front() { return *items_[head_]; }
  const T& operator[](size_t i) const { return *items_[head_ + i]; }

  // A new item at the back, value-initialised (a popped one reused, when there is one).
  T& emplace_back() {
    // Positions before head_ were popped: the live ones move down once they are the minority
    // (their pointers, not the items), so a queue that never drains (a peer down, dropping its
    // oldest) does not grow without bound.
    if (head_ > 0 && head_ >= items_.size() / 2) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    if (free_.empty()) {
      items_.push_back(std::make_unique<T>());
    } else {
      items_.push_back(std::move(free_.back()));
      free_.pop_back();
    }
    return *items_.back();
  }

  // Drops the front item: its resources go now (a shared batch is released), the item is kept
  // for a later emplace_back.
  void pop_front() {
    *items_[head_] = T();
    free_.push_back(std::move(items_[head_]));
    if (++head_ == items_.size()) {
      items_.clear();  // keeps the capacity
      head_ = 0;
    }
  }

  // Positions held, popped ones included, and items made (queued and kept for reuse): both stay
  // bounded while the queue never drains (tests).
  size_t positions() const { return items_.size(); }
  size_t items_made() const { return size() + free_.size(); }

 private:
  std::vector<std::unique_ptr<T>> items_;  // [0, head_) popped (null)
  size_t head_ = 0;
  std::vector<std::unique_ptr<T>> free_;  // popped items, reset, for reuse
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_SLOT_QUEUE_H_
