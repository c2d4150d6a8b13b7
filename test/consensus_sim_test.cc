// Deterministic simulation of both total orders over many seeds (STYLE.md example 3): safety under
// crashes (coordinator/sequencer included, fewer than half), loss, duplication, reordering,
// partitions and false suspicions; termination once the network is stable. A failure prints the
// seed and the command that replays it.
#include <catch2/catch.hpp>

#include <sstream>

#include "test/order_sim.h"

namespace cohort::sim {
namespace {

void RunSeeds(Ordering ordering, uint64_t first_seed, uint64_t seeds,
              consensus::ConsensusOptions consensus = {}) {
  uint64_t faults = 0;
  for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    OrderSimOptions options;
    options.seed = seed;
    options.ordering = ordering;
    options.consensus = consensus;
    const OrderSimResult result = RunOrderSimulation(options);
    faults += result.faults_injected;
    if (!result.ok) {
      std::ostringstream message;
      message << "seed " << seed << " (" << OrderingName(ordering) << ", " << result.members
              << " members): " << result.violation << "\n  replay: bazel run //tools:cohort-sim"
              << " -- --seeds " << seed << ".." << seed << " --ordering "
              << OrderingName(ordering);
      FAIL(message.str());
    }
  }
  CHECK(faults > seeds);  // the runs did inject faults
}

TEST_CASE("consensus order: agreement, validity, integrity, FIFO, termination over 1000 seeds",
          "[sim]") {
  RunSeeds(Ordering::kConsensus, 1, 1000);
}

TEST_CASE("consensus order without optimisations over 300 seeds", "[sim]") {
  consensus::ConsensusOptions plain;
  plain.optimisation_1 = plain.optimisation_2 = plain.optimisation_3 = false;
  RunSeeds(Ordering::kConsensus, 100001, 300, plain);
}

TEST_CASE("sequencer order: agreement, validity, integrity, FIFO, termination over 1000 seeds",
          "[sim]") {
  RunSeeds(Ordering::kSequencer, 1, 1000);
}

TEST_CASE("a seed replays exactly", "[sim]") {
  for (Ordering ordering : {Ordering::kConsensus, Ordering::kSequencer}) {
    OrderSimOptions options;
    options.seed = 42;
    options.ordering = ordering;
    const OrderSimResult a = RunOrderSimulation(options);
    const OrderSimResult b = RunOrderSimulation(options);
    CHECK(a.trace_hash == b.trace_hash);
    CHECK(a.messages_sent == b.messages_sent);
    CHECK(a.deliveries == b.deliveries);
  }
}

}  // namespace
}  // namespace cohort::sim
