#include "test/wall_clock_shim.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace {
std::atomic<int64_t> g_wall_step_ns{0};
}  // namespace

namespace cohort::test {
void SetWallClockStep(int64_t ns) { g_wall_step_ns.store(ns); }
}  // namespace cohort::test

extern "C" int clock_gettime(clockid_t clock, struct timespec* ts) {
  const long result = syscall(SYS_clock_gettime, clock, ts);
  const int64_t step = g_wall_step_ns.load(std::memory_order_relaxed);
  if (result == 0 && step != 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
    const int64_t ns = static_cast<int64_t>(ts->tv_sec) * 1000000000 + ts->tv_nsec + step;
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
  }
  return static_cast<int>(result);
}
