// nso/stall_clock.h: the stall warning counts from the later of the last delivery and the moment
// work began to wait, not from the last delivery alone.
#include <catch2/catch.hpp>

#include "nso/stall_clock.h"

namespace cohort::nso {
namespace {

TEST_CASE("stall clock: a group idle for long is not stalled the moment work arrives",
          "[nso]") {
  StallClock clock;
  // Last delivery at t=1000, then idle (nothing waits) until t=41000.
  CHECK(clock.Observe(false, 1000, 20000) == 0);
  CHECK(clock.Observe(true, 1000, 41000) == 0);  // work arrives: it has waited 0 ms
  CHECK(clock.Observe(true, 1000, 41500) == 500);
  CHECK(clock.Observe(true, 1000, 43100) == 2100);
  // A delivery while work keeps waiting: counted from it.
  CHECK(clock.Observe(true, 43200, 43300) == 100);
  // Nothing waits: 0, and the next wait counts from its own start.
  CHECK(clock.Observe(false, 43200, 50000) == 0);
  CHECK(clock.Observe(true, 43200, 60000) == 0);
  CHECK(clock.Observe(true, 43200, 62500) == 2500);
}

}  // namespace
}  // namespace cohort::nso
