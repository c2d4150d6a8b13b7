// Exhaustive exploration of one Chandra-Toueg consensus instance (consensus/chandra_toueg.h)
// among n members: every interleaving of message deliveries, losses, clock ticks, suspicions
// (false ones included) and crashes within the bounds, each distinct state visited once.
//
// Checked in every state reached (Chandra & Toueg 1996, section 5; 004 section 2.3):
//   agreement: no two members decide differently (a crashed member's decision counts);
//   validity:  a decision is some member's initial value;
//   integrity: a member's decision never changes.
// And termination, from the states with nothing in flight and from a fixed share of the others
// (Bounds::completion_every): with no more faults, every member still up suspecting exactly the
// crashed ones (◇S after its stabilisation) and every message delivered, each member still up
// decides, if a majority is up.
//
// The instance starts as consensus/consensus_order.cc starts it: a member proposes its own
// value at any point, or when the first message of the instance reaches it. Members are
// 1..n, node i's initial value holds i messages (so the proposal rule's tie-break on size is
// exercised), round 1's coordinator is member 1.
#ifndef COHORT_TEST_CONSENSUS_EXPLORER_H_
#define COHORT_TEST_CONSENSUS_EXPLORER_H_

#include <cstdint>
#include <string>

#include "consensus/chandra_toueg.h"

namespace cohort::explore {

struct Bounds {
  uint32_t n = 3;
  consensus::ConsensusOptions consensus;
  uint32_t crashes = 1;            // crash-stop failures, each at any point
  uint32_t suspicion_changes = 2;  // a member starts or stops suspecting another
  uint32_t ticks = 3;              // a member's clock moves on by tick_ms (its timers fire)
  uint32_t drops = 1;              // in-flight messages lost
  uint64_t tick_ms = 25;           // default options: > round_delay_ms, half retransmit_ms
  // Rounds can go on without end while suspicions are wrong (◇S promises nothing before it
  // stabilises), even with no timer firing: states past this round are checked, not explored.
  uint32_t max_round = 4;
  // A faulty network that replaces a PROPOSAL's value by another member's initial value, at
  // most this many times: outside the fault model, so that the checks are seen to fail.
  uint32_t corruptions = 0;
  uint64_t max_states = 3000000;  // stop, incomplete, after this many distinct states
  uint32_t completion_every = 8;  // termination checked from 1 in this many states as well
};

struct Report {
  uint64_t states = 0;             // distinct states visited
  uint64_t transitions = 0;        // actions taken (some lead to states visited already)
  uint64_t completions = 0;        // termination checks run
  uint64_t decided_states = 0;     // states in which some member has decided
  uint32_t max_decision_round = 0; // the latest round any member decided in (termination
                                   // checks included: they run past max_round)
  uint64_t cut_states = 0;         // states past max_round, not explored further
  bool complete = false;           // every state within the bounds visited
  std::string violation;           // empty: none; else what broke, and the actions leading to it
};

Report Explore(const Bounds& bounds);

}  // namespace cohort::explore

#endif  // COHORT_TEST_CONSENSUS_EXPLORER_H_
