// Runs a node-level simulation case once per seed and order: a fresh `Run` (constructed from the
// seed and the group's ordering) for seeds first..first + seeds - 1 of consensus, then of the
// sequencer.
// SIMLOG=info|debug shows the nodes' log.
#ifndef COHORT_TEST_EACH_RUN_H_
#define COHORT_TEST_EACH_RUN_H_

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <functional>

#include "nso/config.h"
#include "nso/logging.h"

namespace cohort::test {

template <typename Run>
void ForEachRun(const std::function<void(Run&)>& body, uint64_t seeds = 10, uint64_t first = 1) {
  nso::ConfigureLogging(getenv("SIMLOG") ? getenv("SIMLOG") : "off", "text", "");
  for (auto ordering :
       {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    for (uint64_t seed = first; seed < first + seeds; ++seed) {
      INFO("seed " << seed << (ordering == nso::GroupConfig::Ordering::kSequencer
                                   ? " (sequencer)" : " (consensus)"));
      Run run(seed, ordering);
      body(run);
    }
  }
}

}  // namespace cohort::test

#endif  // COHORT_TEST_EACH_RUN_H_
