#include "nso/heap_count.h"

namespace cohort::nso::heap_count_internal {

std::atomic<uint64_t> allocations{0};
std::atomic<bool> counted{false};

}  // namespace cohort::nso::heap_count_internal
