// Numbers per group name that Node::Tick gathers once per tick (calls waiting, open deliveries,
// a servant's unread bytes), kept from one tick to the next: the names of the last ticks stay,
// zeroed, so a steady load allocates nothing per tick (issue 7: a std::map made per tick took a
// node per busy group, three times a tick).
#ifndef COHORT_NSO_TICK_COUNTS_H_
#define COHORT_NSO_TICK_COUNTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace cohort::nso {

class TickCounts {
 public:
  // Zeroes every number (a new tick); past kKeptNames names, those at zero are dropped.
  void Reset() {
    if (numbers_.size() > kKeptNames) {
      absl::erase_if(numbers_, [](const auto& entry) { return entry.second == 0; });
    }
    for (auto& entry : numbers_) entry.second = 0;
  }
  void Add(absl::string_view name, uint64_t amount = 1) { Slot(name) += amount; }
  void Max(absl::string_view name, uint64_t value) {
    uint64_t& number = Slot(name);
    number = std::max(number, value);
  }
  // 0 for a name not counted in this tick.
  uint64_t Get(absl::string_view name) const {
    auto it = numbers_.find(name);
    return it == numbers_.end() ? 0 : it->second;
  }

 private:
  static constexpr size_t kKeptNames = 256;
  uint64_t& Slot(absl::string_view name) {
    auto it = numbers_.find(name);
    if (it == numbers_.end()) it = numbers_.emplace(std::string(name), 0).first;
    return it->second;
  }

  absl::flat_hash_map<std::string, uint64_t> numbers_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TICK_COUNTS_H_
