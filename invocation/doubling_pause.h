// Pauses between attempts that double from a first length up to a longest one: a caller waiting
// for room (BacklogPause, backpressure.h), a servant registering again (Servant::Rejoin), a
// group watch starting again (remote_watch.cc).
#ifndef COHORT_INVOCATION_DOUBLING_PAUSE_H_
#define COHORT_INVOCATION_DOUBLING_PAUSE_H_

#include <algorithm>

#include "absl/time/time.h"

namespace cohort::invocation {

class DoublingPause {
 public:
  DoublingPause(absl::Duration first, absl::Duration longest) : pause_(first), longest_(longest) {}

  // The next pause: `first`, then twice the last one, at most `longest`.
  absl::Duration Next() {
    absl::Duration pause = pause_;
    pause_ = std::min(pause_ * 2, longest_);
    return pause;
  }

 private:
  absl::Duration pause_;
  const absl::Duration longest_;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_DOUBLING_PAUSE_H_
