// Two-timeout failure detection (004 section 5) and time-silence monitoring (003 section 3).
#include <catch2/catch.hpp>

#include "membership/failure_detector.h"

namespace cohort::membership {
namespace {
using Kind = SuspicionEvent::Kind;
}

TEST_CASE("004 s5: the suspicion timeout fires first, the exclusion timeout later", "[fd]") {
  FailureDetector detector({50, 1000}, {2, 3}, 0);
  std::vector<SuspicionEvent> events;
  detector.Heard(3, 40, &events);
  detector.Tick(49, &events);
  CHECK(events.empty());
  detector.Tick(50, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].node == 2);
  CHECK(events[0].kind == Kind::kSuspect);
  CHECK(detector.suspected(2));
  CHECK_FALSE(detector.suspected(3));
  CHECK(detector.trusted_count() == 1);
  events.clear();
  detector.Heard(3, 990, &events);
  detector.Tick(1000, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].node == 2);
  CHECK(events[0].kind == Kind::kExclude);
  CHECK(detector.excluded(2));
}

TEST_CASE("004 s5: a suspected member that answers again is trusted and not excluded", "[fd]") {
  FailureDetector detector({50, 1000}, {2}, 0);
  std::vector<SuspicionEvent> events;
  detector.Tick(60, &events);
  REQUIRE(events.size() == 1);
  events.clear();
  detector.Heard(2, 500, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kTrust);
  events.clear();
  detector.Tick(1200, &events);  // 700 ms after it was last heard: suspected again, not excluded
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kSuspect);
  CHECK_FALSE(detector.excluded(2));
}

TEST_CASE("003 s3: with monitoring off (idle event-driven group) nobody is suspected", "[fd]") {
  FailureDetector detector({50, 1000}, {2}, 0);
  detector.SetMonitoring(false, 0);
  std::vector<SuspicionEvent> events;
  detector.Tick(5000, &events);
  CHECK(events.empty());
  detector.SetMonitoring(true, 5000);  // silence counts restart when monitoring resumes
  detector.Tick(5040, &events);
  CHECK(events.empty());
  detector.Tick(5050, &events);
  CHECK(events.size() == 1);
}

TEST_CASE("003 s3: a suspected member's silence counts only while the group watches", "[fd]") {
  FailureDetector detector({50, 1000}, {2}, 0);
  std::vector<SuspicionEvent> events;
  detector.Tick(600, &events);  // watched in silence for 600 ms: suspected
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kSuspect);
  events.clear();
  detector.SetMonitoring(false, 600);  // idle for 10 s: not counted
  detector.SetMonitoring(true, 10600);
  CHECK(detector.suspected(2));  // still suspected when the group wakes up
  detector.Tick(10999, &events);
  CHECK(events.empty());  // 999 ms watched in all
  detector.Tick(11000, &events);  // 1000 ms watched: excluded
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kExclude);
}


TEST_CASE("a member heard after its exclusion fired is trusted again, and can be excluded again",
          "[fd]") {
  // The proposed view change may still remove it; until then a healed partition must not leave
  // both sides suspecting each other for good.
  FailureDetector detector({50, 1000}, {2}, 0);
  std::vector<SuspicionEvent> events;
  detector.Tick(1000, &events);
  REQUIRE(events.size() == 2);  // suspected, then excluded
  CHECK(detector.excluded(2));
  events.clear();
  detector.Heard(2, 1500, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kTrust);
  CHECK_FALSE(detector.suspected(2));
  CHECK_FALSE(detector.excluded(2));
  CHECK(detector.trusted_count() == 1);
  events.clear();
  detector.Tick(2500, &events);
  REQUIRE(events.size() == 2);
  CHECK(events[1].kind == Kind::kExclude);
}
TEST_CASE("admission grace: a suspected member counts for new calls until silent for the window",
          "[fd]") {
  // Suspicion (50 ms) moves consensus on; a call is refused only on members silent for the
  // longer fail-fast window (failure_detector.fail_fast_after_ms).
  FailureDetector detector({50, 10000}, {2, 3}, 0);
  std::vector<SuspicionEvent> events;
  detector.Heard(2, 100, &events);
  detector.Heard(3, 100, &events);
  detector.Tick(200, &events);  // both silent 100 ms: suspected
  CHECK(detector.suspected(2));
  CHECK(detector.suspected(3));
  CHECK(detector.trusted_count() == 0);
  CHECK(detector.heard_within_count(200, 1000) == 2);
  CHECK(detector.heard_within_count(1099, 1000) == 2);
  detector.Heard(3, 1050, &events);  // 3 answers again: trusted, counts at any window
  CHECK(detector.heard_within_count(1100, 1000) == 1);  // 2 silent for 1000 ms: gone
  CHECK(detector.heard_within_count(5000, 1000) == 1);
  CHECK(detector.heard_within_count(1100, 50) == 1);
  CHECK(detector.heard_within_count(1100, 0) == 1);  // window 0: the suspicion alone decides
}

TEST_CASE("a member whose connection closed is suspected at the next tick, not after the timeout; "
          "exclusion still waits for the silence", "[fd]") {
  FailureDetector detector({50, 1000}, {2, 3}, 0);
  std::vector<SuspicionEvent> events;
  detector.Heard(2, 10, &events);
  detector.LinkDown(2);
  detector.Tick(12, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].node == 2);
  CHECK(events[0].kind == Kind::kSuspect);
  CHECK(events[0].link_down);
  CHECK(events[0].silent_ms == 2);
  CHECK(detector.suspected(2));
  CHECK_FALSE(detector.suspected(3));
  events.clear();
  detector.Heard(3, 990, &events);
  detector.Tick(1000, &events);  // 3 was heard; 2 only 990 ms silent: not yet excluded
  CHECK(events.empty());
  detector.Tick(1010, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kExclude);
  CHECK(events[0].node == 2);
}

TEST_CASE("a closed connection that comes back, or a member heard again, is trusted as before; "
          "with monitoring off the closed connection counts once monitoring resumes", "[fd]") {
  FailureDetector detector({50, 1000}, {2}, 0);
  std::vector<SuspicionEvent> events;
  detector.LinkDown(2);
  detector.LinkUp(2);  // back before any tick: the timeout applies again
  detector.Tick(20, &events);
  CHECK(events.empty());
  detector.LinkDown(2);
  detector.Heard(2, 30, &events);  // it spoke: a connection is up
  detector.Tick(40, &events);
  CHECK(events.empty());

  detector.SetMonitoring(false, 40);
  detector.LinkDown(2);
  detector.Tick(500, &events);
  CHECK(events.empty());
  detector.SetMonitoring(true, 500);
  detector.Tick(501, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kSuspect);
  CHECK(events[0].link_down);
  events.clear();
  detector.Heard(2, 520, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kTrust);
  events.clear();
  detector.Tick(560, &events);  // heard 40 ms ago, connection up: trusted
  CHECK(events.empty());
  detector.Tick(570, &events);  // silent 50 ms: the timeout still works
  REQUIRE(events.size() == 1);
  CHECK_FALSE(events[0].link_down);
}

}  // namespace cohort::membership
