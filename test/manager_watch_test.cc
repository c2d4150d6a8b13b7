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

}  // namespace
}  // namespace cohort::membership
