#include "nso/heap_count.h"

namespace cohort::nso::heap_count_internal {

std::atomic<uint64_t> allocations{0};
std::atomic<bool> counted{false};
thread_local uint64_t thread_allocations = 0;

}  // namespace cohort::nso::heap_count_internal
