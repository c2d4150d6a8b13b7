// The claims of 004 section 4 (and 2.3), checked exactly: one failure-free consensus among n
// members, fixed per-message delay D, all members proposing at time 0. steps = decision time / D.
#include <catch2/catch.hpp>

#include "consensus/chandra_toueg.h"
#include "test/order_sim.h"

namespace cohort::sim {
namespace {

consensus::ConsensusOptions Options(bool one, bool two, bool three) {
  consensus::ConsensusOptions options;
  options.optimisation_1 = one;
  options.optimisation_2 = two;
  options.optimisation_3 = three;
  return options;
}

TEST_CASE("004 2.3: without optimisations the decision takes 4 communication steps", "[paper]") {
  for (uint32_t n : {3u, 4u, 5u, 7u}) {
    const PaperRun run = RunFailureFreeConsensus(n, Options(false, false, false));
    INFO("n = " << n);
    REQUIRE(run.all_decided);
    CHECK(run.agreement);
    CHECK(run.coordinator_steps == 3);  // estimate, proposal, ack
    CHECK(run.participant_steps == 4);  // ... decision
    CHECK(run.causal_steps_max == 4);   // the per-instance record agrees with the clock
    CHECK(run.counters.rounds_total == n);  // everyone decides in round 1
  }
}

TEST_CASE("004 4.2: optimisation 2 removes one phase: 3 steps instead of 4", "[paper]") {
  for (uint32_t n : {3u, 5u, 7u}) {
    const PaperRun run = RunFailureFreeConsensus(n, Options(false, true, false));
    INFO("n = " << n);
    REQUIRE(run.all_decided);
    CHECK(run.agreement);
    CHECK(run.coordinator_steps == 2);
    CHECK(run.participant_steps == 3);
    CHECK(run.causal_steps_max == 3);
  }
}

TEST_CASE("004 4.3: optimisation 3 with n = 3: participants decide after 2 steps", "[paper]") {
  const PaperRun run = RunFailureFreeConsensus(3, Options(false, false, true));
  REQUIRE(run.all_decided);
  CHECK(run.agreement);
  CHECK(run.participant_steps == 2);  // on receipt of the proposal
  CHECK(run.coordinator_steps == 3);  // on the first ack
  // With optimisation 2 as well, the participants decide one step after the start.
  const PaperRun both = RunFailureFreeConsensus(3, Options(false, true, true));
  CHECK(both.participant_steps == 1);
  CHECK(both.coordinator_steps == 2);
  // 004 4.3: it does not apply to other group sizes.
  const PaperRun five = RunFailureFreeConsensus(5, Options(false, false, true));
  CHECK(five.participant_steps == 4);
}

TEST_CASE("004 4.1: optimisation 1 saves 2n - 3 messages per consensus", "[paper]") {
  for (uint32_t n : {3u, 5u, 7u}) {
    for (bool two : {false, true}) {
      const PaperRun plain = RunFailureFreeConsensus(n, Options(false, two, false));
      const PaperRun delayed = RunFailureFreeConsensus(n, Options(true, two, false));
      INFO("n = " << n << ", optimisation 2 " << two);
      REQUIRE(delayed.all_decided);
      CHECK(delayed.agreement);
      // Without optimisation 1 the participants start round 2: n - 2 estimates to its
      // coordinator and its n - 1 proposals (the paper's 2n - 3); with it they wait d and the
      // decision comes first.
      CHECK(plain.counters.messages_sent_estimate - delayed.counters.messages_sent_estimate ==
            n - 2);
      CHECK(plain.counters.messages_sent_proposal - delayed.counters.messages_sent_proposal ==
            n - 1);
      // And the n - 2 members that decided before round 2's proposal reached them answer it
      // with the DECISION (a decision is not relayed on receipt, so no earlier copy stands in).
      CHECK(plain.counters.messages_sent_decision + plain.counters.messages_sent_decided -
                delayed.counters.messages_sent_decision - delayed.counters.messages_sent_decided ==
            n - 2);
      CHECK(plain.messages - delayed.messages == (2 * n - 3) + (n - 2));
      // It costs no step in the failure-free case.
      CHECK(delayed.participant_steps == plain.participant_steps);
    }
  }
}

TEST_CASE("004 4.2: optimisation 2 saves n - 1 messages per consensus", "[paper]") {
  for (uint32_t n : {3u, 5u, 7u}) {
    for (bool one : {false, true}) {
      const PaperRun plain = RunFailureFreeConsensus(n, Options(one, false, false));
      const PaperRun skipped = RunFailureFreeConsensus(n, Options(one, true, false));
      INFO("n = " << n << ", optimisation 1 " << one);
      REQUIRE(skipped.all_decided);
      CHECK(plain.messages - skipped.messages == n - 1);  // the round-1 estimates
      CHECK(skipped.counters.messages_sent_estimate + n - 1 ==
            plain.counters.messages_sent_estimate);
    }
  }
}

TEST_CASE("004 4.3: optimisation 1 has little impact with optimisation 3 (n = 3)", "[paper]") {
  const PaperRun three = RunFailureFreeConsensus(3, Options(false, false, true));
  const PaperRun one_and_three = RunFailureFreeConsensus(3, Options(true, false, true));
  CHECK(three.messages == one_and_three.messages);
  CHECK(three.participant_steps == one_and_three.participant_steps);
}

TEST_CASE("004 2.3 and 5: a crashed, suspected coordinator: decision in round 2", "[paper]") {
  for (uint32_t n : {3u, 5u, 7u}) {
    for (int mask = 0; mask < 8; ++mask) {
      const PaperRun run = RunFailureFreeConsensus(
          n, Options(mask & 1, mask & 2, mask & 4), /*delay_ms=*/10, /*crashed_coordinator=*/true);
      INFO("n = " << n << ", optimisations mask " << mask);
      REQUIRE(run.all_decided);
      CHECK(run.agreement);
      CHECK(run.decision_round_max == 2);
      CHECK(run.counters.messages_sent_nack == n - 1);  // each participant NACKs round 1
    }
  }
}

TEST_CASE("004 2.3: a single member decides its own value at once", "[paper]") {
  const PaperRun run = RunFailureFreeConsensus(1, Options(true, true, true));
  CHECK(run.all_decided);
  CHECK(run.messages == 0);
}

}  // namespace
}  // namespace cohort::sim
