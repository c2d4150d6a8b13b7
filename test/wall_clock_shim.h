// A wall clock a test can step. Linked into a test binary, wall_clock_shim.cc defines
// clock_gettime(), which the binary's shared libraries bind to (Abseil's absl::Now(), libstdc++'s
// system_clock, gRPC's gpr_now): CLOCK_REALTIME reads the real clock plus the step set here, every
// other clock (CLOCK_MONOTONIC) the real one. The kernel's own timers (a futex wait until a
// CLOCK_REALTIME instant) are not stepped. Other processes (the daemons) read the real clock.
#ifndef COHORT_TEST_WALL_CLOCK_SHIM_H_
#define COHORT_TEST_WALL_CLOCK_SHIM_H_

#include <chrono>
#include <cstdint>
#include <thread>

namespace cohort::test {

inline constexpr int64_t kHourNs = int64_t{3600} * 1000000000;

// This process's wall clock reads the real one plus `ns` from now on (0: the real clock).
void SetWallClockStep(int64_t ns);

// Steps the wall clock by `ns` after `after` while it lives; the real clock again once destroyed.
class WallStep {
 public:
  WallStep(std::chrono::milliseconds after, int64_t ns)
      : thread_([after, ns] {
          std::this_thread::sleep_for(after);
          SetWallClockStep(ns);
        }) {}
  ~WallStep() {
    thread_.join();
    SetWallClockStep(0);
  }

 private:
  std::thread thread_;
};

}  // namespace cohort::test

#endif  // COHORT_TEST_WALL_CLOCK_SHIM_H_
