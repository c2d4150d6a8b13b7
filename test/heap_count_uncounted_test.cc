// A binary that does not link //nso:count_heap reports no count (a daemon then says 0).
#include <catch2/catch.hpp>

#include <memory>

#include "nso/heap_count.h"

TEST_CASE("heap count: not counted without count_heap", "[heap_count]") {
  auto one = std::make_unique<int>(1);
  CHECK_FALSE(cohort::nso::HeapAllocations().has_value());
}
