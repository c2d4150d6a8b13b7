// invocation/steady_time.h: deadlines and timed waits on the monotonic clock, across steps of
// this process's wall clock (wall_clock_shim.h).
#include "invocation/steady_time.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "test/wall_clock_shim.h"

namespace cohort::internal {
namespace {

using test::WallStep;

TEST_CASE("SteadyAfter and SteadyLeft: spans, infinite and past", "[clock]") {
  CHECK(SteadyAfter(absl::InfiniteDuration()) == SteadyTime::max());
  CHECK(SteadyLeft(SteadyTime::max()) == absl::InfiniteDuration());
  CHECK(SteadyLeft(SteadyAfter(-absl::Seconds(5))) == absl::ZeroDuration());
  const absl::Duration left = SteadyLeft(SteadyAfter(absl::Seconds(10)));
  CHECK(left > absl::Seconds(9));
  CHECK(left <= absl::Seconds(10));
  test::SetWallClockStep(test::kHourNs);  // the wall clock plays no part
  const absl::Duration stepped = SteadyLeft(SteadyAfter(absl::Seconds(10)));
  test::SetWallClockStep(0);
  CHECK(stepped > absl::Seconds(9));
  CHECK(stepped <= absl::Seconds(10));
}

TEST_CASE("SteadyNotification: a timed wait lasts its span across steps of the wall clock",
          "[clock]") {
  const int64_t step = GENERATE(test::kHourNs, -test::kHourNs);
  INFO("step " << step / 1000000000 << " s");
  SteadyNotification notification;
  const SteadyTime start = SteadyNow();
  bool notified = true;
  {
    WallStep stepped(std::chrono::milliseconds(50), step);
    notified = notification.WaitForNotificationWithTimeout(absl::Milliseconds(300));
  }
  const absl::Duration took = SteadySince(start);
  CHECK_FALSE(notified);
  CHECK(took >= absl::Milliseconds(300));
  CHECK(took < absl::Seconds(3));

  std::thread notifier([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    notification.Notify();
  });
  CHECK(notification.WaitForNotificationWithTimeout(absl::Seconds(30)));
  notifier.join();
  CHECK(notification.HasBeenNotified());
  CHECK(notification.WaitForNotificationUntil(SteadyNow()));  // notified: true at once
}

TEST_CASE("SteadyWake: a signal before the wait is not lost; a wait ends at its deadline",
          "[clock]") {
  SteadyWake wake;
  wake.Signal();
  const SteadyTime start = SteadyNow();
  CHECK(wake.WaitUntil(SteadyTime::max()));  // taken at once
  CHECK(SteadySince(start) < absl::Seconds(1));
  {
    WallStep stepped(std::chrono::milliseconds(50), -test::kHourNs);
    CHECK_FALSE(wake.WaitUntil(SteadyAfter(absl::Milliseconds(200))));  // the signal was taken
  }
  const absl::Duration took = SteadySince(start);
  CHECK(took >= absl::Milliseconds(200));
  CHECK(took < absl::Seconds(3));
  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    wake.Signal();
  });
  CHECK(wake.WaitUntil(SteadyAfter(absl::Seconds(30))));
  signaller.join();
}

}  // namespace
}  // namespace cohort::internal
