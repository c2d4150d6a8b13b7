// How long a group's work has waited without a delivery, for the stall warning (node_watchdog.cc):
// counted from the later of the last delivery and the moment work began to wait, so a group idle
// for a long time is not reported stalled the moment work arrives (session 27: a view change
// after 40 s of idleness was logged as "no delivery for 40049 ms while work waits").
#ifndef COHORT_NSO_STALL_CLOCK_H_
#define COHORT_NSO_STALL_CLOCK_H_

#include <algorithm>
#include <cstdint>

namespace cohort::nso {

class StallClock {
 public:
  // Called at each tick: whether work waits now, and when the group last delivered. Returns how
  // long the work has waited without a delivery (0 when nothing waits).
  uint64_t Observe(bool work_waits, uint64_t last_progress_ms, uint64_t now_ms) {
    if (!work_waits) {
      work_since_ms_ = 0;
      return 0;
    }
    if (work_since_ms_ == 0) work_since_ms_ = now_ms;
    const uint64_t since = std::max(work_since_ms_, last_progress_ms);
    return now_ms > since ? now_ms - since : 0;
  }

 private:
  uint64_t work_since_ms_ = 0;  // 0: nothing waits
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_STALL_CLOCK_H_
