// Exhaustive exploration of one Chandra-Toueg consensus instance (consensus/chandra_toueg.h)
// among n members: every interleaving of message deliveries, losses, clock ticks, suspicions
// (false ones included) and crashes within the bounds, each distinct state visited once.
//
// The engine (test/explorer_engine.h) explores; this is its model of one instance.
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

#include "test/explorer_engine.h"

namespace cohort::explore {

Report Explore(const Bounds& bounds);

}  // namespace cohort::explore

#endif  // COHORT_TEST_CONSENSUS_EXPLORER_H_
