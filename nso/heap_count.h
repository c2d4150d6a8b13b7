// Heap allocations made by this process (operator new calls since it started), counted when the
// binary links //nso:count_heap (cohortd and cohort-bench do). The hot path should make none per
// message (omniORB2, 001 sections 5-6): cohort-bench divides the daemons' counts by the calls of
// a run, and a daemon reports its count in Admin.Status and as cohort_heap_allocations_total.
#ifndef COHORT_NSO_HEAP_COUNT_H_
#define COHORT_NSO_HEAP_COUNT_H_

#include <atomic>
#include <cstdint>
#include <optional>

namespace cohort::nso {

namespace heap_count_internal {
extern std::atomic<uint64_t> allocations;
extern std::atomic<bool> counted;  // set when count_heap.cc is linked
extern thread_local uint64_t thread_allocations;  // this thread's share of `allocations`
}  // namespace heap_count_internal

// nullopt when this binary does not count (it does not link //nso:count_heap).
inline std::optional<uint64_t> HeapAllocations() {
  if (!heap_count_internal::counted.load(std::memory_order_relaxed)) return std::nullopt;
  return heap_count_internal::allocations.load(std::memory_order_relaxed);
}

// This thread's operator new calls since it started (nullopt as above): what one caller of the
// stub library allocates, whatever the other threads of the process do.
inline std::optional<uint64_t> ThreadHeapAllocations() {
  if (!heap_count_internal::counted.load(std::memory_order_relaxed)) return std::nullopt;
  return heap_count_internal::thread_allocations;
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_HEAP_COUNT_H_
