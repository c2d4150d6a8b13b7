// How much one message of an order carries: at most `messages_max` messages and `bytes_max`
// payload bytes, and always at least one message (a larger one goes alone). Both orders batch
// many requests per message (004 section 3.2); the byte bound keeps a backlog of large requests
// from making messages of many MiB, whose copies and retransmissions kept the protocol threads
// busy past the suspicion timeout (cohort-bench --payload 16384: one-way floods fell to a few
// hundred calls/s, then UNAVAILABLE).
#ifndef COHORT_CONSENSUS_BATCH_BOUND_H_
#define COHORT_CONSENSUS_BATCH_BOUND_H_

#include <cstddef>

namespace cohort::consensus {

class BatchBound {
 public:
  BatchBound(size_t messages_max, size_t bytes_max)
      : messages_max_(messages_max), bytes_max_(bytes_max) {}

  // Room for one more message of `payload_bytes`.
  bool Fits(size_t payload_bytes) const {
    return messages_ == 0 ||
           (messages_ < messages_max_ && bytes_ + payload_bytes <= bytes_max_);
  }
  // Room for any more message at all.
  bool Open() const { return messages_ == 0 || (messages_ < messages_max_ && bytes_ < bytes_max_); }
  void Add(size_t payload_bytes) {
    ++messages_;
    bytes_ += payload_bytes;
  }

 private:
  const size_t messages_max_;
  const size_t bytes_max_;
  size_t messages_ = 0;
  size_t bytes_ = 0;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_BATCH_BOUND_H_
