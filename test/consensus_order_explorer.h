// Exhaustive exploration of the symmetric total order on a sequence of consensus instances
// (consensus/consensus_order.h) among n members: Bounds::broadcasts messages, each broadcast by
// any member at any point, so that instances start on their own or on another's message, batch
// several messages or none, decide ahead of a member that then catches up, and rotate their
// round-1 coordinator by what the previous instance decided; under every interleaving of
// deliveries, losses, clock ticks (retransmission, optimisation 1's delay, the DECISION owed
// under optimisation 3), suspicions (false ones included) and crashes within the bounds, each
// distinct state visited once (test/explorer_engine.h).
//
// What is checked: test/broadcast_model.h (total order, integrity, FIFO, termination).
#ifndef COHORT_TEST_CONSENSUS_ORDER_EXPLORER_H_
#define COHORT_TEST_CONSENSUS_ORDER_EXPLORER_H_

#include "test/explorer_engine.h"

namespace cohort::explore {

// Bounds::max_round bounds the round of each member's running instance; Bounds::consensus is
// the instances' options (cohortd's: ConsensusOptions{}).
Report ExploreConsensusOrder(const Bounds& bounds);

}  // namespace cohort::explore

#endif  // COHORT_TEST_CONSENSUS_ORDER_EXPLORER_H_
