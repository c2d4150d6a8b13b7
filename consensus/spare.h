// Memory kept for reuse by the object that holds it (a map node, a shared batch): a copy of the
// holder starts without it, so two copies never share or fight over one (the exhaustive explorer
// copies protocol states, test/consensus_explorer.h). Reusing such memory instead of allocating
// per message or per instance is issue 7's first deliverable (omniORB2, 001 sections 5-6).
#ifndef COHORT_CONSENSUS_SPARE_H_
#define COHORT_CONSENSUS_SPARE_H_

#include <cstddef>
#include <utility>

namespace cohort::consensus {

// Memory kept for reuse holds at most about this many bytes per object (a batch, a reply, a
// frame): past it, the memory goes with the message, so a burst of large messages does not
// leave every holder keeping the largest.
inline constexpr size_t kSpareBytesMax = 64 * 1024;

template <typename T>
struct Spare {
  Spare() = default;
  Spare(const Spare&) {}
  Spare& operator=(const Spare&) { return *this; }
  Spare(Spare&&) = default;
  Spare& operator=(Spare&&) = default;

  T value{};
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_SPARE_H_
