// A binary linking //nso:count_heap counts every operator new, whatever its form; one that does
// not says it does not count (heap_count_uncounted_test).
#include <catch2/catch.hpp>

#include <memory>
#include <new>
#include <string>
#include <thread>
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

TEST_CASE("heap count: a thread's own allocations, whatever the others do", "[heap_count]") {
  REQUIRE(ThreadHeapAllocations().has_value());
  const uint64_t start = *ThreadHeapAllocations();
  const uint64_t process_start = *HeapAllocations();
  uint64_t other_thread = 0;
  std::thread other([&other_thread] {
    const uint64_t before = *ThreadHeapAllocations();
    std::vector<std::unique_ptr<int>> made;
    for (int i = 0; i < 50; ++i) made.push_back(std::make_unique<int>(i));
    other_thread = *ThreadHeapAllocations() - before;
  });
  other.join();
  CHECK(other_thread >= 50);
  CHECK(*ThreadHeapAllocations() - start <= 2);  // the thread's own bookkeeping, if any
  auto one = std::make_unique<int>(1);
  const uint64_t mine = *ThreadHeapAllocations() - start;
  CHECK(mine >= 1);
  CHECK(*HeapAllocations() - process_start >= other_thread + mine);
}

}  // namespace cohort::nso
