// Exhaustive exploration of the sequencer order (consensus/sequencer_order.h) among n members:
// Bounds::broadcasts messages, each broadcast by any member at any point, under every
// interleaving of deliveries, losses, clock ticks, suspicions (false ones included, each moving
// the sequencer to a later epoch) and crashes within the bounds, each distinct state visited
// once (test/explorer_engine.h).
//
// Checked in every state reached (atomic broadcast, Chandra & Toueg 1996, section 6; 003
// section 3's asymmetric order):
//   total order: of any two members' delivery sequences one is a prefix of the other (a crashed
//     member's deliveries count: uniform);
//   integrity: a member delivers a message once, and only a message that was broadcast;
//   FIFO: a member delivers each origin's messages in the order they were broadcast, none
//     skipped.
// And termination: with no more faults (suspicions then exact), every member up delivers every
// message broadcast by a member up and every message any member delivered, if a majority is up.
#ifndef COHORT_TEST_SEQUENCER_EXPLORER_H_
#define COHORT_TEST_SEQUENCER_EXPLORER_H_

#include "test/explorer_engine.h"

namespace cohort::explore {

// Bounds::max_round bounds the epoch; Bounds::consensus.optimisation_3 and retransmit_ms are
// the order's.
Report ExploreSequencer(const Bounds& bounds);

}  // namespace cohort::explore

#endif  // COHORT_TEST_SEQUENCER_EXPLORER_H_
