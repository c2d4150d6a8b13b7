// A binary linking //nso:count_heap counts every operator new, whatever its form; one that does
// not says it does not count (heap_count_uncounted_test).
#include <catch2/catch.hpp>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "nso/heap_count.h"

namespace cohort::nso {

TEST_CASE("heap count: every form of operator new is counted", "[heap_count]") {
  REQUIRE(HeapAllocations().has_value());
  const uint64_t start = *HeapAllocations();
  auto one = std::make_unique<int>(1);
  CHECK(*HeapAllocations() == start + 1);
  auto many = std::make_unique<int[]>(100);
  CHECK(*HeapAllocations() == start + 2);
  struct alignas(64) Wide {
    char bytes[64];
  };
  auto wide = std::make_unique<Wide>();
  CHECK(reinterpret_cast<uintptr_t>(wide.get()) % 64 == 0);
  CHECK(*HeapAllocations() == start + 3);
  int* quiet = new (std::nothrow) int(2);
  CHECK(*HeapAllocations() == start + 4);
  delete quiet;
  std::string longer(100, 'x');  // past the short-string buffer
  CHECK(*HeapAllocations() == start + 5);
  std::vector<int> reserved;
  reserved.reserve(10);
  for (int i = 0; i < 10; ++i) reserved.push_back(i);  // no allocation past the reserve
  CHECK(*HeapAllocations() == start + 6);
}

}  // namespace cohort::nso
