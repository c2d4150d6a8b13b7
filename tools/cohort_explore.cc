// cohort-explore: exhaustive exploration within bounds of one Chandra-Toueg consensus instance
// (test/consensus_explorer.h: agreement, validity, integrity, termination), of the total order
// on a sequence of instances (test/consensus_order_explorer.h) or of the sequencer order
// (test/sequencer_explorer.h; both orders: total order, integrity, FIFO, termination): every
// interleaving of deliveries, losses, clock ticks, suspicions and crashes, each distinct state
// once. The test (//test:consensus_explorer_test) runs small bounds; this runs any.
//
//   cohort-explore [--order consensus|consensus-order|sequencer] [--n N] [--optimisations 123] [--crashes C]
//                  [--suspicions S] [--ticks T] [--drops D] [--broadcasts B] [--freezes F]
//                  [--decided-log L] [--max-round R] [--max-instances I] [--max-states M]
//                  [--completion-every K] [--sleep-sets on|off] [--past-done on|off]
//                  [--shuffle SEED]
//
// Exit 0: explored completely, no violation; 1: a violation (printed with the actions leading
// to it); 3: stopped at --max-states before the end, no violation found so far.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "test/consensus_explorer.h"
#include "test/consensus_order_explorer.h"
#include "test/sequencer_explorer.h"

namespace {

int Usage() {
  std::fputs(
      "usage: cohort-explore [--order consensus|consensus-order|sequencer] [--n N]\n"
      "                      [--optimisations 123] [--crashes C] [--suspicions S] [--ticks T]\n"
      "                      [--drops D] [--broadcasts B] [--freezes F] [--decided-log L]\n"
      "                      [--max-round R] [--max-instances I] [--max-states M]\n"
      "                      [--completion-every K] [--sleep-sets on|off]\n"
      "                      [--past-done on|off] [--shuffle SEED]\n"
      "  --order:         one consensus instance (default), the total order on a sequence of\n"
      "                   consensus instances, or the sequencer order\n"
      "  --n:             members, 1..7 (default 3)\n"
      "  --optimisations: which of 004 section 4's optimisations are on, e.g. 13, or - for none\n"
      "                   (default 123)\n"
      "  --crashes, --suspicions, --ticks, --drops: how many of each fault the exploration may\n"
      "                   take, each at any point (defaults 1, 2, 3, 1; a suspicion is one\n"
      "                   member starting or stopping to suspect another)\n"
      "  --broadcasts:    the orders: messages broadcast, each by any member (default 2)\n"
      "  --freezes:       the orders: members whose view ends (Freeze), each at any point;\n"
      "                   termination is then not checked (default 0)\n"
      "  --decided-log:   the consensus order: decided instances kept for laggards (default 0:\n"
      "                   cohortd's); a member asking beyond them needs the state\n"
      "  --max-round:     states past this round (epoch) are checked, not explored (default 4)\n"
      "  --max-instances: the consensus order: states past this instance are checked, not\n"
      "                   explored (default 4)\n"
      "  --max-states:    stop after this many distinct states (default 3000000)\n"
      "  --completion-every: termination is checked from quiescent states and from 1 state in K\n"
      "                   (default 8)\n"
      "  --sleep-sets:    skip transitions to states another order of the same actions\n"
      "                   reaches (default on; off takes every transition)\n"
      "  --past-done:     explore on from states where everything is done (default off)\n"
      "  --shuffle:       take each state's actions in an order drawn from SEED (default 0: a\n"
      "                   fixed order); runs stopped at --max-states then sample the whole\n"
      "                   space, each seed other states\n",
      stderr);
  return 2;
}

bool ParseCount(const char* text, uint64_t low, uint64_t high, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value < low || value > high) return false;
  *out = value;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  cohort::explore::Bounds bounds;
  std::string optimisations = "123";
  std::string order = "consensus";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    if (arg == "--order") {
      order = value;
      if (order != "consensus" && order != "consensus-order" && order != "sequencer") {
        return Usage();
      }
      continue;
    }
    if (arg == "--optimisations") {
      optimisations = value;
      if (optimisations.find_first_not_of("123-") != std::string::npos) return Usage();
      continue;
    }
    if (arg == "--past-done") {
      const std::string choice = value;
      if (choice != "on" && choice != "off") return Usage();
      bounds.past_done = choice == "on";
      continue;
    }
    if (arg == "--sleep-sets") {
      const std::string choice = value;
      if (choice != "on" && choice != "off") return Usage();
      bounds.sleep_sets = choice == "on";
      continue;
    }
    if (arg == "--shuffle") {
      if (!ParseCount(value, 0, UINT64_MAX, &bounds.shuffle_seed)) return Usage();
      continue;
    }
    if (arg == "--max-states") {
      if (!ParseCount(value, 1, UINT64_MAX, &bounds.max_states)) return Usage();
      continue;
    }
    // The small counts: flag, lowest and highest value, where it goes.
    const struct {
      const char* flag;
      uint64_t low, high;
      uint32_t* field;
    } counts[] = {
        {"--n", 1, 7, &bounds.n},
        {"--crashes", 0, 1000, &bounds.crashes},
        {"--suspicions", 0, 1000, &bounds.suspicion_changes},
        {"--ticks", 0, 1000, &bounds.ticks},
        {"--drops", 0, 1000, &bounds.drops},
        {"--broadcasts", 0, 1000, &bounds.broadcasts},
        {"--freezes", 0, 1000, &bounds.freezes},
        {"--decided-log", 0, 1000000, &bounds.decided_log_max},
        {"--max-round", 1, 1000, &bounds.max_round},
        {"--max-instances", 1, 1000, &bounds.max_instances},
        {"--completion-every", 1, 1000, &bounds.completion_every},
    };
    const auto* count = std::find_if(std::begin(counts), std::end(counts),
                                     [&arg](const auto& c) { return arg == c.flag; });
    uint64_t number = 0;
    if (count == std::end(counts) || !ParseCount(value, count->low, count->high, &number)) {
      return Usage();
    }
    *count->field = static_cast<uint32_t>(number);
  }
  bounds.consensus.optimisation_1 = optimisations.find('1') != std::string::npos;
  bounds.consensus.optimisation_2 = optimisations.find('2') != std::string::npos;
  bounds.consensus.optimisation_3 = optimisations.find('3') != std::string::npos;

  const auto start = std::chrono::steady_clock::now();
  const cohort::explore::Report report =
      order == "sequencer"         ? cohort::explore::ExploreSequencer(bounds)
      : order == "consensus-order" ? cohort::explore::ExploreConsensusOrder(bounds)
                                   : cohort::explore::Explore(bounds);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%s, n %u, optimisations %s, bounds: crashes %u, suspicions %u, ticks %u, drops %u, "
      "broadcasts %u, freezes %u, round %u, instance %u\n"
      "states %llu (%s), transitions %llu, termination checks %llu, states with a decision "
      "%llu, past the round (instance) bound %llu, latest decision round %u, %.1f s\n",
      order == "sequencer"         ? "sequencer order"
      : order == "consensus-order" ? "consensus order"
                                   : "consensus",
      bounds.n, optimisations.c_str(), bounds.crashes, bounds.suspicion_changes, bounds.ticks,
      bounds.drops, bounds.broadcasts, bounds.freezes, bounds.max_round, bounds.max_instances,
      static_cast<unsigned long long>(report.states),
      report.complete ? "complete" : "stopped at --max-states",
      static_cast<unsigned long long>(report.transitions),
      static_cast<unsigned long long>(report.completions),
      static_cast<unsigned long long>(report.decided_states),
      static_cast<unsigned long long>(report.cut_states), report.max_decision_round, seconds);
  if (!report.violation.empty()) {
    std::printf("VIOLATION: %s\n", report.violation.c_str());
    return 1;
  }
  std::printf("no violation\n");
  return report.complete ? 0 : 3;
}
