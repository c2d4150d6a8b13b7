// A FIFO queue that keeps the objects it drops for the next ones pushed: a protocol log of
// messages, or a member's own messages awaiting delivery, takes each new entry into an emptied
// object of an earlier one (its strings keep their memory), so a steady stream of messages costs
// no allocation (issue 7: no per-message allocation, omniORB2, 001 sections 5-6). A std::deque
// allocates and frees each entry's strings, and its chunks, as entries come and go.
//
// Objects dropped keep at most kRingSpareBytes each (a large entry's memory goes), and the ring
// halves its slots when it holds less than a quarter of them, so a burst leaves little behind.
// A copy of the ring holds its entries only, none of the spare memory (as Spare, spare.h).
#ifndef COHORT_CONSENSUS_REUSE_RING_H_
#define COHORT_CONSENSUS_REUSE_RING_H_

#include <cstddef>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "proto/wire.pb.h"

namespace cohort::consensus {

// Memory one dropped entry keeps for the next (a 100-byte call's payload fits many times).
inline constexpr size_t kRingSpareBytes = 4096;

// Empties an entry for reuse, keeping its memory unless larger than `keep_bytes`.
inline void EmptyForReuse(std::string* text, size_t keep_bytes = kRingSpareBytes) {
  if (text->capacity() > keep_bytes) {
    std::string().swap(*text);
  } else {
    text->clear();
  }
}
inline void EmptyForReuse(wire::DataMessage* message, size_t keep_bytes = kRingSpareBytes) {
  if (message->payload().capacity() > keep_bytes) {
    *message = wire::DataMessage();
  } else {
    message->Clear();  // the payload string stays allocated, emptied (protobuf ClearToEmpty)
  }
}

template <typename T>
class ReuseRing {
 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator(const ReuseRing* ring, size_t index) : ring_(ring), index_(index) {}
    const T& operator*() const { return (*ring_)[index_]; }
    const T* operator->() const { return &(*ring_)[index_]; }
    const_iterator& operator++() {
      ++index_;
      return *this;
    }
    bool operator==(const const_iterator& other) const { return index_ == other.index_; }
    bool operator!=(const const_iterator& other) const { return index_ != other.index_; }

   private:
    const ReuseRing* ring_;
    size_t index_;
  };

  ReuseRing() = default;
  ReuseRing(const ReuseRing& other) { CopyEntries(other); }
  ReuseRing& operator=(const ReuseRing& other) {
    if (this != &other) {
      clear();
      CopyEntries(other);
    }
    return *this;
  }
  ReuseRing(ReuseRing&&) = default;
  ReuseRing& operator=(ReuseRing&&) = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t slots() const { return slots_.size(); }  // entries and spares
  T& operator[](size_t index) { return slots_[Slot(index)]; }
  const T& operator[](size_t index) const { return slots_[Slot(index)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  // An emptied entry at the back, to fill (an earlier entry's object when one was dropped).
  T& emplace_back() {
    if (size_ == slots_.size()) Resize(slots_.empty() ? kMinSlots : 2 * slots_.size());
    return slots_[Slot(size_++)];
  }
  void push_back(const T& value) { emplace_back() = value; }  // assigns: reuses its memory
  void push_back(T&& value) { emplace_back() = std::move(value); }

  void pop_front() {
    EmptyForReuse(&slots_[head_]);
    head_ = (head_ + 1) % slots_.size();
    --size_;
    MaybeShrink();
  }
  // Drops entry `index`, keeping the order of the others (at the front: pop_front; else the
  // entries after it move down one, a rare case).
  void erase(size_t index) {
    if (index == 0) return pop_front();
    using std::swap;
    for (size_t i = index; i + 1 < size_; ++i) swap((*this)[i], (*this)[i + 1]);
    truncate(size_ - 1);
  }
  // Keeps the first `count` entries (count <= size()).
  void truncate(size_t count) {
    while (size_ > count) EmptyForReuse(&slots_[Slot(--size_)]);
    MaybeShrink();
  }
  void clear() { truncate(0); }

 private:
  static constexpr size_t kMinSlots = 4;

  size_t Slot(size_t index) const { return (head_ + index) % slots_.size(); }
  void CopyEntries(const ReuseRing& other) {
    for (const T& entry : other) push_back(entry);
  }
  void Resize(size_t slots) {
    std::vector<T> resized(slots);
    for (size_t i = 0; i < size_; ++i) resized[i] = std::move((*this)[i]);
    // Spare objects go along (up to the new size): they are emptied already.
    for (size_t i = size_; i < slots_.size() && i < slots; ++i) {
      resized[i] = std::move(slots_[Slot(i)]);
    }
    slots_ = std::move(resized);
    head_ = 0;
  }
  void MaybeShrink() {
    if (slots_.size() > kMinSlots && size_ < slots_.size() / 4) Resize(slots_.size() / 2);
    if (size_ == 0) head_ = 0;
  }

  std::vector<T> slots_;  // [head_, head_ + size_) mod slots_.size() hold entries, the rest spares
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_REUSE_RING_H_
