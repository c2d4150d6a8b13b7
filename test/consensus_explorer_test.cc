// Every interleaving within small bounds (test/explorer_engine.h): agreement, validity,
// integrity and termination of one Chandra-Toueg instance (test/consensus_explorer.h) under a
// crash, message loss, a false suspicion, timers and any delivery order, with each of 004
// section 4's optimisations on or off; total order, integrity, FIFO and termination of the
// order on a sequence of consensus instances (test/consensus_order_explorer.h) and of the
// sequencer order (test/sequencer_explorer.h). The bounds keep each exploration within
// seconds; larger ones: cohort-explore (RELIABILITY.md has the runs).
#include <catch2/catch.hpp>

#include "test/consensus_explorer.h"
#include "test/consensus_order_explorer.h"
#include "test/sequencer_explorer.h"

namespace cohort::explore {
namespace {

Bounds Make(uint32_t n, int mask, uint32_t ticks, uint32_t suspicions, uint32_t crashes,
            uint32_t drops, uint32_t max_round) {
  Bounds bounds;
  bounds.n = n;
  bounds.consensus.optimisation_1 = (mask & 1) != 0;
  bounds.consensus.optimisation_2 = (mask & 2) != 0;
  bounds.consensus.optimisation_3 = (mask & 4) != 0;
  bounds.ticks = ticks;
  bounds.suspicion_changes = suspicions;
  bounds.crashes = crashes;
  bounds.drops = drops;
  bounds.max_round = max_round;
  return bounds;
}

Report RequireSafeAndLive(const Bounds& bounds, Report (*explore)(const Bounds&) = Explore) {
  const Report report = explore(bounds);
  INFO("n = " << bounds.n << ", optimisations " << bounds.consensus.optimisation_1
              << bounds.consensus.optimisation_2 << bounds.consensus.optimisation_3 << ": "
              << report.states << " states, " << report.completions << " termination checks");
  INFO(report.violation);
  REQUIRE(report.violation.empty());
  REQUIRE(report.complete);
  CHECK(report.completions > 0);
  CHECK(report.decided_states > 0);
  return report;
}

TEST_CASE("explorer: n = 3, each optimisation mask: a crash, a loss, a tick", "[explore]") {
  for (int mask = 0; mask < 8; ++mask) {
    // Without optimisations 1 and 2 every member runs rounds back to back: fewer of them.
    const Report report = RequireSafeAndLive(Make(3, mask, 1, 0, 1, 1, mask == 0 ? 2 : 3));
    // A crashed coordinator is replaced: some decision comes in a later round.
    CHECK(report.max_decision_round >= 2);
  }
}

TEST_CASE("explorer: n = 3, a false suspicion and a crash", "[explore]") {
  // cohortd's options (all three optimisations), with a tick as well.
  CHECK(RequireSafeAndLive(Make(3, 7, 1, 1, 1, 0, 4)).max_decision_round >= 2);
  for (int mask : {3, 5}) RequireSafeAndLive(Make(3, mask, 0, 1, 1, 0, 3));
}

TEST_CASE("explorer: n = 4 and n = 5 (optimisation 3 does not apply)", "[explore]") {
  RequireSafeAndLive(Make(4, 3, 1, 0, 1, 1, 3));
  RequireSafeAndLive(Make(4, 0, 0, 0, 1, 1, 2));
  RequireSafeAndLive(Make(5, 3, 0, 0, 1, 1, 3));
}

TEST_CASE("explorer: the checks fail when the model is broken", "[explore]") {
  SECTION("a network that changes a proposal's value breaks agreement") {
    Bounds bounds = Make(3, 7, 0, 0, 0, 0, 3);
    bounds.corruptions = 1;
    const Report report = Explore(bounds);
    REQUIRE_THAT(report.violation, Catch::Contains("agreement"));
    CHECK_THAT(report.violation, Catch::Contains("deliver corrupted PROPOSAL"));
  }
  SECTION("a lost message that is never sent again breaks termination") {
    Bounds bounds = Make(3, 7, 1, 0, 0, 1, 3);
    bounds.consensus.retransmit_ms = 1000000000;  // Tick never resends
    const Report report = Explore(bounds);
    REQUIRE_THAT(report.violation, Catch::Contains("termination"));
    CHECK_THAT(report.violation, Catch::Contains("drop "));
  }
  SECTION("two crashes of three leave no majority: not explored for termination, still safe") {
    const Report report = Explore(Make(3, 7, 1, 0, 2, 0, 3));
    CHECK(report.violation.empty());
    CHECK(report.complete);
  }
}

Bounds Sequencer(uint32_t n, bool optimisation_3, uint32_t ticks, uint32_t suspicions,
                 uint32_t crashes, uint32_t drops, uint32_t broadcasts) {
  Bounds bounds = Make(n, optimisation_3 ? 7 : 3, ticks, suspicions, crashes, drops, 2);
  bounds.broadcasts = broadcasts;
  return bounds;
}

TEST_CASE("explorer: the sequencer order, a crash of the sequencer, a loss, a suspicion",
          "[explore]") {
  // Two messages from any members; the sequencer (member 1) or another crashes at any point.
  CHECK(RequireSafeAndLive(Sequencer(3, true, 1, 0, 1, 1, 2), ExploreSequencer).max_decision_round >= 1);
  // A false suspicion moves the sequencer to a later epoch (consensus/sequencer_order.h).
  CHECK(RequireSafeAndLive(Sequencer(3, true, 0, 1, 1, 0, 1), ExploreSequencer).max_decision_round >= 1);
  // Without optimisation 3 the sequencer sends commit notices.
  RequireSafeAndLive(Sequencer(3, false, 0, 0, 1, 1, 1), ExploreSequencer);
  RequireSafeAndLive(Sequencer(4, true, 0, 0, 1, 0, 1), ExploreSequencer);
  RequireSafeAndLive(Sequencer(5, true, 0, 0, 1, 0, 1), ExploreSequencer);
}

TEST_CASE("explorer: the sequencer order's checks fail on a forged entry", "[explore]") {
  Bounds bounds = Sequencer(3, true, 0, 0, 0, 0, 1);
  bounds.corruptions = 1;
  const Report report = ExploreSequencer(bounds);
  REQUIRE_THAT(report.violation, Catch::Contains("never broadcast"));
  CHECK_THAT(report.violation, Catch::Contains("deliver corrupted ORDERED"));
}

Bounds Order(uint32_t n, int mask, uint32_t ticks, uint32_t suspicions, uint32_t crashes,
             uint32_t drops, uint32_t broadcasts, uint32_t max_round = 3) {
  Bounds bounds = Make(n, mask, ticks, suspicions, crashes, drops, max_round);
  bounds.broadcasts = broadcasts;
  return bounds;
}

TEST_CASE("explorer: the consensus order, n = 3: two broadcasts, a crash or a loss",
          "[explore]") {
  // cohortd's options. Two messages from any members at any point: they share an instance's
  // batch or take one each, an instance starts on its own message or on another's; member 1,
  // round 1's first coordinator, or another crashes at any point.
  CHECK(RequireSafeAndLive(Order(3, 7, 0, 0, 1, 0, 2), ExploreConsensusOrder)
            .max_decision_round >= 2);
  RequireSafeAndLive(Order(3, 7, 0, 0, 0, 1, 2), ExploreConsensusOrder);
  // One message, with a crash, a loss and a tick (retransmission) together.
  RequireSafeAndLive(Order(3, 7, 1, 0, 1, 1, 1), ExploreConsensusOrder);
}

TEST_CASE("explorer: the consensus order, each optimisation mask: a crash and a loss",
          "[explore]") {
  for (int mask = 0; mask < 8; ++mask) {
    // Without optimisation 1 rounds follow each other at once: fewer of them.
    RequireSafeAndLive(Order(3, mask, 0, 0, 1, 1, 1, (mask & 1) != 0 ? 3 : 2),
                       ExploreConsensusOrder);
  }
}

TEST_CASE("explorer: the consensus order, a false suspicion, n = 4", "[explore]") {
  // While member 1 is wrongly suspected the others decide empty batches and its message waits
  // for a later instance: the first instance is explored, later ones checked.
  Bounds bounds = Order(3, 7, 0, 1, 1, 0, 1, 2);
  bounds.max_instances = 1;
  CHECK(RequireSafeAndLive(bounds, ExploreConsensusOrder).max_decision_round >= 2);
  RequireSafeAndLive(Order(4, 7, 0, 0, 1, 0, 1), ExploreConsensusOrder);
}

TEST_CASE("explorer: both orders, a view that ends (Freeze) at any member, at any point",
          "[explore]") {
  // A frozen order delivers nothing more and only answers laggards (consensus/total_order.h);
  // the others' order stays safe. With a crash, a loss and a tick; the sequencer order with two
  // members' views ending too.
  Bounds bounds = Order(3, 7, 1, 0, 1, 1, 1);
  bounds.freezes = 1;
  RequireSafeAndLive(bounds, ExploreConsensusOrder);
  RequireSafeAndLive(bounds, ExploreSequencer);
  bounds = Sequencer(3, true, 1, 0, 0, 0, 2);
  bounds.freezes = 2;
  RequireSafeAndLive(bounds, ExploreSequencer);
}

TEST_CASE("explorer: the consensus order with one decided instance kept for laggards",
          "[explore]") {
  // A member that falls behind a pruned instance is reported and needs the state (membership
  // re-admits it); the order stays safe meanwhile, and the others terminate. With a crash or a
  // loss, a member 2 instances behind is reached (checked by hand: without leaving such a
  // member out, termination fails).
  for (uint32_t crashes : {0u, 1u}) {
    Bounds bounds = Order(3, 7, 0, 0, crashes, 1 - crashes, 2);
    bounds.decided_log_max = 1;
    RequireSafeAndLive(bounds, ExploreConsensusOrder);
  }
}

TEST_CASE("explorer: the consensus order, three broadcasts, instances up to 2", "[explore]") {
  // Three messages from any members at any point, no fault: batches of one, two or three,
  // instances that start on any of them (148,628 states with sleep sets).
  Bounds bounds = Order(3, 7, 0, 0, 0, 0, 3);
  bounds.max_instances = 2;
  RequireSafeAndLive(bounds, ExploreConsensusOrder);
}

TEST_CASE("explorer: the consensus order's checks fail on a forged proposal", "[explore]") {
  Bounds bounds = Order(3, 7, 0, 0, 0, 0, 1);
  bounds.corruptions = 1;
  const Report report = ExploreConsensusOrder(bounds);
  REQUIRE_THAT(report.violation, Catch::Contains("never broadcast"));
  CHECK_THAT(report.violation, Catch::Contains("deliver corrupted PROPOSAL"));
}

TEST_CASE("explorer: sleep sets visit the same states with fewer transitions", "[explore]") {
  // Exploring on past done states (where sleep sets and the full search differ, Bounds::
  // sleep_sets), the two searches must visit exactly the same states: one consensus instance
  // with a crash, a loss and a tick, the consensus order with a crash and a false suspicion
  // (its first instance), the sequencer order with a false suspicion and a loss.
  struct Case {
    const char* what;
    Bounds bounds;
    Report (*explore)(const Bounds&);
  };
  Case cases[] = {
      {"one instance", Make(3, 7, 1, 0, 1, 1, 3), Explore},
      {"consensus order", Order(3, 7, 0, 1, 1, 0, 1), ExploreConsensusOrder},
      {"sequencer order", Sequencer(3, true, 0, 1, 0, 1, 1), ExploreSequencer},
  };
  cases[1].bounds.max_instances = 1;  // past it: states checked, not explored
  for (const Case& c : cases) {
    Bounds bounds = c.bounds;
    bounds.past_done = true;
    bounds.sleep_sets = false;
    const Report full = c.explore(bounds);
    bounds.sleep_sets = true;
    const Report asleep = c.explore(bounds);
    INFO(c.what << ": " << full.states << " states, " << full.transitions << " transitions; "
                << asleep.states << " states, " << asleep.transitions << " with sleep sets");
    REQUIRE(full.complete);
    REQUIRE(asleep.complete);
    CHECK(full.violation.empty());
    CHECK(asleep.violation.empty());
    CHECK(asleep.states == full.states);
    CHECK(asleep.cut_states == full.cut_states);
    CHECK(asleep.transitions < full.transitions);
    // In any order of actions (a fixed order hid a loss skipped with its message's sleeping
    // delivery: the lost message's state was reached in another way).
    for (uint64_t seed : {1, 2}) {
      bounds.shuffle_seed = seed;
      const Report shuffled = c.explore(bounds);
      INFO("actions shuffled with seed " << seed << ": " << shuffled.states << " states");
      CHECK(shuffled.complete);
      CHECK(shuffled.states == full.states);
      CHECK(shuffled.cut_states == full.cut_states);
    }
    bounds.shuffle_seed = 0;
    // Stopping at done states, sleep sets leave out what only lies past one.
    bounds.past_done = false;
    const Report stopped = c.explore(bounds);
    CHECK(stopped.complete);
    CHECK(stopped.states <= full.states);
  }
}

}  // namespace
}  // namespace cohort::explore
