// Exhaustive exploration of the sequencer order (consensus/sequencer_order.h) among n members:
// Bounds::broadcasts messages, each broadcast by any member at any point, under every
// interleaving of deliveries, losses, clock ticks, suspicions (false ones included, each moving
// the sequencer to a later epoch) and crashes within the bounds, each distinct state visited
// once (test/explorer_engine.h).
//
// What is checked: test/broadcast_model.h (total order, integrity, FIFO, termination).
#ifndef COHORT_TEST_SEQUENCER_EXPLORER_H_
#define COHORT_TEST_SEQUENCER_EXPLORER_H_

#include "test/explorer_engine.h"

namespace cohort::explore {

// Bounds::max_round bounds the epoch; Bounds::consensus.optimisation_3 and retransmit_ms are
// the order's.
Report ExploreSequencer(const Bounds& bounds);

}  // namespace cohort::explore

#endif  // COHORT_TEST_SEQUENCER_EXPLORER_H_
