// Deterministic simulation of a group's total order over the simulated network (STYLE.md
// example 3): the real ConsensusOrder / SequencerOrder code, a seeded network that delays, drops,
// duplicates and reorders, crashes of fewer than half of the members (the coordinator or
// sequencer included), partitions and false suspicions. A chaos phase checks safety (integrity,
// validity, FIFO per origin, identical delivery order); a healing phase then checks termination:
// every broadcast of a correct member is delivered by every correct member. One seed replays
// exactly. Used by test/consensus_sim_test.cc and tools/cohort_sim.cc.
#ifndef COHORT_TEST_ORDER_SIM_H_
#define COHORT_TEST_ORDER_SIM_H_

#include <cstdint>
#include <string>

#include "consensus/chandra_toueg.h"

namespace cohort::sim {

enum class Ordering { kConsensus, kSequencer };

struct OrderSimOptions {
  uint64_t seed = 1;
  Ordering ordering = Ordering::kConsensus;
  consensus::ConsensusOptions consensus;  // optimisations; timers are set by the simulation
  uint64_t chaos_ms = 1500;        // faults are injected during this much simulated time
  uint64_t liveness_limit_ms = 60000;  // after healing, everything must be delivered by then
  uint32_t broadcasts_max = 60;
};

struct OrderSimResult {
  bool ok = true;
  std::string violation;  // empty when ok
  uint32_t members = 0;
  uint64_t faults_injected = 0;  // crashes, partitions, suspicions, loss settings
  uint64_t broadcasts = 0;
  uint64_t deliveries = 0;       // summed over members
  uint64_t messages_sent = 0;    // network sends
  uint64_t end_ms = 0;           // simulated time at the end
  uint64_t trace_hash = 0;
};

OrderSimResult RunOrderSimulation(const OrderSimOptions& options);

// One failure-free consensus instance among n members that all propose at time 0, over a network
// with a fixed per-message delay (the setting of 004 section 4).
struct PaperRun {
  uint32_t coordinator_steps = 0;   // decision time of the round-1 coordinator / delay
  uint32_t participant_steps = 0;   // latest decision time of the others / delay
  uint32_t causal_steps_max = 0;    // largest InstanceRecord-style causal step count
  uint32_t decision_round_max = 0;
  uint64_t messages = 0;            // all consensus messages sent
  consensus::OrderCounters counters;  // summed over members
  bool all_decided = false;
  bool agreement = false;
};
// With `crashed_coordinator`, member 1 (the round-1 coordinator) is crashed from the start and
// suspected by all others (004 section 5: the aggressive timeout); it is then left out of the
// results, and coordinator_steps is 0.
PaperRun RunFailureFreeConsensus(uint32_t n, consensus::ConsensusOptions options,
                                 uint64_t delay_ms = 10, bool crashed_coordinator = false);

// "consensus" / "sequencer".
const char* OrderingName(Ordering ordering);

}  // namespace cohort::sim

#endif  // COHORT_TEST_ORDER_SIM_H_
