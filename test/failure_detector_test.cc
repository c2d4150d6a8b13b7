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

TEST_CASE("a wrong suspicion doubles the member's suspicion timeout, up to 16 x the configured "
          "one, and an exclusion timeout without one halves it again",
          "[fd]") {
  FailureDetector detector({50, 10000}, {2, 3}, 0);
  std::vector<SuspicionEvent> events;
  uint64_t now = 0;
  // Node 2 is heard again after each suspicion; node 3 every 10 ms, never suspected.
  const std::vector<uint64_t> expected = {100, 200, 400, 800, 800};
  for (uint64_t raised : expected) {
    const uint64_t timeout = detector.suspect_timeout_ms(2);
    for (uint64_t t = 0; t < timeout; t += 10) {
      detector.Heard(3, now + t, &events);
      detector.Tick(now + t, &events);
    }
    CHECK_FALSE(detector.suspected(2));  // silent for just under its timeout
    now += timeout;
    detector.Heard(3, now, &events);
    detector.Tick(now, &events);
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == Kind::kSuspect);
    CHECK(events[0].silent_ms == timeout);
    events.clear();
    now += 5;
    detector.Heard(2, now, &events);  // it was alive after all
    REQUIRE(events.size() == 1);
    CHECK(events[0].kind == Kind::kTrust);
    CHECK(events[0].raised_to_ms == (raised == 800 && timeout == 800 ? 0 : raised));
    CHECK(detector.suspect_timeout_ms(2) == raised);
    events.clear();
  }
  CHECK(detector.suspect_timeout_ms(3) == 50);
  // Heard every 100 ms with no mistake: 800 -> 400 after 10 s, -> 200 after 20 s, and so on.
  const uint64_t last_mistake = now;
  for (uint64_t t = now; t <= last_mistake + 40000; t += 100) {
    detector.Heard(2, t, &events);
    detector.Heard(3, t, &events);
    detector.Tick(t, &events);
    if (t == last_mistake + 9900) CHECK(detector.suspect_timeout_ms(2) == 800);
    if (t == last_mistake + 10000) CHECK(detector.suspect_timeout_ms(2) == 400);
    if (t == last_mistake + 20000) CHECK(detector.suspect_timeout_ms(2) == 200);
  }
  CHECK(events.empty());
  CHECK(detector.suspect_timeout_ms(2) == 50);
}

TEST_CASE("a suspicion on a closed connection that is heard again raises no timeout; the raised "
          "timeout stays within a quarter of the exclusion timeout",
          "[fd]") {
  FailureDetector detector({50, 1000}, {2}, 0);
  std::vector<SuspicionEvent> events;
  detector.Heard(2, 10, &events);
  detector.LinkDown(2);
  detector.Tick(11, &events);
  REQUIRE(events.size() == 1);
  CHECK(events[0].link_down);
  events.clear();
  detector.Heard(2, 300, &events);  // reconnected: not a wrong suspicion of its silence
  REQUIRE(events.size() == 1);
  CHECK(events[0].raised_to_ms == 0);
  CHECK(detector.suspect_timeout_ms(2) == 50);
  events.clear();
  uint64_t now = 300;
  for (int mistake = 0; mistake < 6; ++mistake) {
    now += detector.suspect_timeout_ms(2);
    detector.Tick(now, &events);
    REQUIRE(detector.suspected(2));
    detector.Heard(2, ++now, &events);
  }
  CHECK(detector.suspect_timeout_ms(2) == 250);  // 1000 / 4, not 16 x 50
  // A reload to a longer configured timeout applies at once, above the raised one.
  detector.SetOptions({400, 1000});
  CHECK(detector.suspect_timeout_ms(2) == 400);
  CHECK(detector.suspect_timeout_ms(7) == 0);  // not monitored
}

TEST_CASE("with own_pause_ms set, a gap in this node's own ticks is nobody's silence", "[fd]") {
  FailureDetectorOptions options{50, 1000};
  options.own_pause_ms = 25;
  FailureDetector detector(options, {2}, 0);
  std::vector<SuspicionEvent> events;
  for (uint64_t t = 2; t <= 40; t += 2) detector.Tick(t, &events);  // 40 ms watched in silence
  CHECK(events.empty());
  // Frozen or starved from 40 to 540: node 2's messages wait unread; not suspected for that.
  detector.Tick(540, &events);
  CHECK(events.empty());
  CHECK(detector.heard_within_count(540, 45) == 1);
  for (uint64_t t = 542; t < 550; t += 2) detector.Tick(t, &events);
  CHECK(events.empty());
  detector.Tick(550, &events);  // 50 ms of watched silence: 40 before the pause, 10 after
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == Kind::kSuspect);
  // A gap of own_pause_ms or less is watched time, and without own_pause_ms every gap is.
  FailureDetector plain({50, 1000}, {2}, 0);
  plain.Tick(2, &events);
  events.clear();
  plain.Tick(540, &events);
  REQUIRE(events.size() == 1);
  FailureDetector short_gaps(options, {2}, 0);
  events.clear();
  for (uint64_t t = 25; t <= 50; t += 25) short_gaps.Tick(t, &events);
  CHECK(events.size() == 1);
}

TEST_CASE("what wrong suspicions taught carries into a new view's detector", "[fd]") {
  FailureDetector old_view({50, 10000}, {2, 3}, 0);
  std::vector<SuspicionEvent> events;
  old_view.Heard(3, 50, &events);
  old_view.Tick(50, &events);  // 2 suspected
  old_view.Heard(2, 60, &events);  // wrongly: 100 ms from now on
  CHECK(old_view.suspect_timeout_ms(2) == 100);
  FailureDetector new_view({50, 10000}, {2, 4}, 60);
  new_view.Learn(old_view.learned());
  CHECK(new_view.suspect_timeout_ms(2) == 100);
  CHECK(new_view.suspect_timeout_ms(4) == 50);
  events.clear();
  new_view.Heard(4, 150, &events);
  new_view.Tick(159, &events);  // 2 silent 99 ms: not yet
  CHECK(events.empty());
  new_view.Heard(4, 160, &events);
  new_view.Tick(160, &events);  // 100 ms of silence in all: suspected now
  REQUIRE(events.size() == 1);
  CHECK(events[0].node == 2);
  // And it halves an exclusion timeout after the mistake (at 60), as in the old view.
  FailureDetector heard({50, 10000}, {2}, 60);
  heard.Learn(old_view.learned());
  events.clear();
  for (uint64_t t = 60; t <= 10060; t += 20) {
    heard.Heard(2, t, &events);
    heard.Tick(t, &events);
    if (t == 10040) CHECK(heard.suspect_timeout_ms(2) == 100);
  }
  CHECK(events.empty());
  CHECK(heard.suspect_timeout_ms(2) == 50);
}

}  // namespace cohort::membership
