// The ids of a client's calls whose results it has not had yet (nso/node.h NsoEntry), and the
// lowest of them: a request names it so that the members may drop the replies kept for the
// client's earlier calls (wire.proto, Request.replies_taken_below).
//
// Call ids are made in increasing order, and results mostly come in the order the calls were
// made: the ids are a sorted array, a finished call is marked in place, and the finished ones at
// the front are skipped. The array keeps its memory once grown (a std::set made and freed a node
// per call, issue 7), and fits one call in flight inline (100,000 idle clients, issue 7's
// memory target).
#ifndef COHORT_INVOCATION_AWAITED_CALLS_H_
#define COHORT_INVOCATION_AWAITED_CALLS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/container/inlined_vector.h"

namespace cohort::invocation {

class AwaitedCalls {
 public:
  // A call made now: its id is above every id added before (else it is put in its place).
  void Add(uint64_t call_id);
  // Its result came (or it ended); an id not awaited is ignored.
  void Remove(uint64_t call_id);
  bool empty() const { return live_ == 0; }
  size_t size() const { return live_; }
  // The lowest id awaited; only when !empty().
  uint64_t lowest() const { return ids_[head_]; }
  bool contains(uint64_t call_id) const;

 private:
  static constexpr uint64_t kDone = uint64_t{1} << 63;  // marks a finished call's slot
  // The first slot at or after head_ whose id (finished or not) is not below `call_id`.
  size_t LowerBound(uint64_t call_id) const;

  absl::InlinedVector<uint64_t, 1> ids_;  // ascending by id (the kDone bit aside)
  uint32_t head_ = 0;                     // slots before it are finished
  uint32_t live_ = 0;                     // slots not finished
};

inline size_t AwaitedCalls::LowerBound(uint64_t call_id) const {
  return std::partition_point(ids_.begin() + head_, ids_.end(),
                              [call_id](uint64_t id) { return (id & ~kDone) < call_id; }) -
         ids_.begin();
}

inline bool AwaitedCalls::contains(uint64_t call_id) const {
  const size_t at = LowerBound(call_id);
  return at < ids_.size() && ids_[at] == call_id;
}

inline void AwaitedCalls::Add(uint64_t call_id) {
  if (head_ == ids_.size()) {  // nothing awaited: start over (the memory kept)
    ids_.erase(ids_.begin(), ids_.end());
    head_ = 0;
  } else if (head_ > 0 && head_ * 2 >= ids_.size()) {  // half finished at the front: compact
    ids_.erase(ids_.begin(), ids_.begin() + head_);
    head_ = 0;
  }
  if (ids_.empty() || (ids_.back() & ~kDone) < call_id) {
    ids_.push_back(call_id);
  } else {
    const size_t at = LowerBound(call_id);
    if (at < ids_.size() && ids_[at] == call_id) return;  // already awaited
    if (at < ids_.size() && ids_[at] == (call_id | kDone)) {
      ids_[at] = call_id;
    } else {
      ids_.insert(ids_.begin() + at, call_id);
    }
  }
  live_++;
}

inline void AwaitedCalls::Remove(uint64_t call_id) {
  const size_t at = LowerBound(call_id);
  if (at == ids_.size() || ids_[at] != call_id) return;
  ids_[at] |= kDone;
  live_--;
  while (head_ < ids_.size() && (ids_[head_] & kDone) != 0) head_++;
}

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_AWAITED_CALLS_H_
