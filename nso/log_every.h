// A condition logged when it first happens and then at most once a period, with how often it
// happened since: a queue to a dead peer drops hundreds of thousands of envelopes a second (one
// line per 10,000th drop was 20 lines a second).
#ifndef COHORT_NSO_LOG_EVERY_H_
#define COHORT_NSO_LOG_EVERY_H_

#include <cstdint>

namespace cohort::nso {

class LogEvery {
 public:
  explicit LogEvery(uint64_t period_ms = 10000) : period_ms_(period_ms) {}

  // Counts one occurrence at `now_ms` (a monotonic clock); when a line is due, returns the
  // occurrences it reports (this one included), else 0.
  uint64_t Count(uint64_t now_ms) {
    ++unreported_;
    if (reported_ && now_ms < reported_ms_ + period_ms_) return 0;
    reported_ = true;
    reported_ms_ = now_ms;
    const uint64_t count = unreported_;
    unreported_ = 0;
    return count;
  }

 private:
  const uint64_t period_ms_;
  bool reported_ = false;
  uint64_t reported_ms_ = 0;
  uint64_t unreported_ = 0;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_LOG_EVERY_H_
