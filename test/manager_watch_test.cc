// The caller's watch on its request managers (membership/manager_watch.h): probes after
// probe_ms of silence, reports silence_ms of silence once, forgets managers no longer in use, and
// does not blame a manager for a pause of the watcher's own ticks.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "membership/manager_watch.h"

namespace cohort::membership {
namespace {

using Use = ManagerWatch::Use;
const std::map<NodeId, Use> kN1{{1, Use{25, 100}}};

TEST_CASE("a silent manager is probed, then reported silent once", "[membership]") {
  ManagerWatch watch;
  ManagerWatch::Actions a = watch.Tick(1000, kN1);  // comes into use: silence counts from here
  CHECK(a.probe.empty());
  CHECK(a.silent.empty());
  std::vector<uint64_t> probes;
  uint64_t silent_at = 0;
  for (uint64_t t = 1005; t <= 1200 && silent_at == 0; t += 5) {
    a = watch.Tick(t, kN1);
    if (!a.probe.empty()) probes.push_back(t);
    if (!a.silent.empty()) silent_at = t;
  }
  CHECK(probes == std::vector<uint64_t>{1025, 1050, 1075});
  CHECK(silent_at == 1100);
  // Reported once; still in use afterwards, it is watched afresh.
  CHECK(watch.Tick(1105, kN1).silent.empty());
}

TEST_CASE("a manager that answers is never reported", "[membership]") {
  ManagerWatch watch;
  int probes = 0;
  for (uint64_t t = 0; t <= 5000; t += 5) {
    ManagerWatch::Actions a = watch.Tick(t, kN1);
    CHECK(a.silent.empty());
    probes += static_cast<int>(a.probe.size());
    if (!a.probe.empty()) watch.Heard(1, t + 5);  // its answer, a tick later
  }
  CHECK(probes >= 150);  // every 25-30 ms
  // A manager that sends replies all the time is not even probed.
  ManagerWatch busy;
  for (uint64_t t = 0; t <= 1000; t += 5) {
    busy.Heard(1, t);
    ManagerWatch::Actions a = busy.Tick(t, kN1);
    CHECK(a.probe.empty());
    CHECK(a.silent.empty());
  }
}

TEST_CASE("a manager out of use is forgotten; a pause of the watcher blames nobody",
          "[membership]") {
  ManagerWatch watch;
  watch.Tick(0, kN1);
  CHECK(watch.watching());
  watch.Tick(50, {});
  CHECK_FALSE(watch.watching());
  // In use again at 500: its silence counts from 500, not from the last time it was heard.
  CHECK(watch.Tick(500, kN1).silent.empty());
  CHECK(watch.Tick(505, kN1).silent.empty());
  // The watcher's own ticks stop for 300 ms (frozen, starved): nobody is silent for that.
  ManagerWatch::Actions a = watch.Tick(805, kN1);
  CHECK(a.silent.empty());
  CHECK(a.probe.empty());
  uint64_t silent_at = 0;
  for (uint64_t t = 810; t <= 1000 && silent_at == 0; t += 5) {
    if (!watch.Tick(t, kN1).silent.empty()) silent_at = t;
  }
  CHECK(silent_at == 905);  // 100 ms of its silence once this node ticks again
}


TEST_CASE("a manager reported silent and heard again is allowed twice the silence, up to 8 x; "
          "the allowance halves again after calm_ms without such a mistake",
          "[membership]") {
  ManagerWatch watch;
  const std::map<NodeId, Use> use{{1, Use{25, 100, 1000}}};
  uint64_t now = 0;
  // Each round: in use and silent until reported, then heard (it was slow, not frozen).
  for (uint64_t allowed : {100, 200, 400, 800, 800}) {
    watch.Tick(now, use);  // comes into use
    uint64_t silent_at = 0;
    for (uint64_t t = now + 5; t <= now + 2000 && silent_at == 0; t += 5) {
      if (!watch.Tick(t, use).silent.empty()) silent_at = t;
    }
    CHECK(silent_at - now == allowed);
    now = silent_at + 5;
    watch.Heard(1, now);
    watch.Tick(now, {});  // out of use meanwhile
  }
  CHECK(watch.allowance_factor(1) == 8);
  // Never more than calm_ms (the exclusion timeout).
  const std::map<NodeId, Use> short_calm{{1, Use{25, 100, 500}}};
  watch.Tick(now, short_calm);
  uint64_t silent_at = 0;
  for (uint64_t t = now + 5; t <= now + 2000 && silent_at == 0; t += 5) {
    if (!watch.Tick(t, short_calm).silent.empty()) silent_at = t;
  }
  CHECK(silent_at - now == 500);
  now = silent_at + 5;
  watch.Heard(1, now);  // the last mistake, at `now`
  CHECK(watch.watching());
  // No mistake for calm_ms (500): 8 -> 4, then 2, then 1, and the watch is idle again.
  watch.Tick(now + 499, {});
  CHECK(watch.allowance_factor(1) == 8);
  watch.Tick(now + 500, {});
  CHECK(watch.allowance_factor(1) == 4);
  watch.Tick(now + 1000, {});
  watch.Tick(now + 1500, {});
  CHECK(watch.allowance_factor(1) == 1);
  CHECK_FALSE(watch.watching());
  // A manager reported silent that never speaks again was not a mistake: no raise.
  ManagerWatch frozen;
  frozen.Tick(0, use);
  for (uint64_t t = 5; t <= 100; t += 5) frozen.Tick(t, use);
  frozen.Tick(1200, {});  // calm_ms after the report: forgotten
  frozen.Heard(1, 1300);
  CHECK(frozen.allowance_factor(1) == 1);
  CHECK_FALSE(frozen.watching());
}

}  // namespace
}  // namespace cohort::membership
