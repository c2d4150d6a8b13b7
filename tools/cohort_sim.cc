// cohort-sim: the deterministic simulator runner.
//
//   cohort-sim --table
//       steps to decision and messages per consensus for n = 3, 5, 7 under each of the 8
//       combinations of optimisations (004 section 4), failure-free, fixed per-message delay.
//   cohort-sim --stack --seeds A..B [--ordering consensus|sequencer] [--drift-ppm PPM]
//              [--liveness lively|event] [--fault-free] [--nodes N] [--calls-per-step K]
//              [--link-ms D]
//       the whole stack (test/stack_sim.h) with crashes, partitions, loss and clock drift; the
//       simulated group is lively (default) or event-driven (003 section 3).
//   cohort-sim --stack --seeds A..B --perturb drop|crash|restart:MS|delay:MS|duplicate:MS
//              [--sends X..Y]
//              [--kinds K1,K2] [--sends-every K] [--then PERTURBATION [--then-offsets A..B]]
//              [other --stack flags]
//       every message of each seed's run in turn (one per run) lost, delayed or delivered again
//       late, or its sender crashed right after it (test/stack_perturb.h); with --then, a
//       second message near it as well.
//   cohort-sim --seeds A..B [--ordering consensus|sequencer]
//       the random fault simulation (test/order_sim.h) over seeds A..B; prints seeds run,
//       faults injected, violations, and the command that replays any failing seed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nso/logging.h"
#include "test/order_sim.h"
#include "test/stack_perturb.h"
#include "test/stack_sim.h"

namespace {

using cohort::sim::Ordering;

int PrintTable() {
  std::printf("004 section 4: one failure-free consensus, fixed per-message delay D = 10 ms\n");
  std::printf("steps = decision time / D (coordinator / slowest participant); messages sent\n\n");
  std::printf("%-3s %-11s %-12s %-9s %-9s %-9s %-9s %-9s %-9s %-9s\n", "n", "opts(1,2,3)",
              "steps c/p", "messages", "estimate", "proposal", "ack", "nack", "decision",
              "decided");
  for (uint32_t n : {3u, 5u, 7u}) {
    for (int mask = 0; mask < 8; ++mask) {
      cohort::consensus::ConsensusOptions options;
      options.optimisation_1 = (mask & 1) != 0;
      options.optimisation_2 = (mask & 2) != 0;
      options.optimisation_3 = (mask & 4) != 0;
      const cohort::sim::PaperRun run = cohort::sim::RunFailureFreeConsensus(n, options);
      const std::string opts = std::string(options.optimisation_1 ? "1" : "-") +
                               (options.optimisation_2 ? "2" : "-") +
                               (options.optimisation_3 ? "3" : "-");
      const std::string steps =
          std::to_string(run.coordinator_steps) + "/" + std::to_string(run.participant_steps);
      const auto& c = run.counters;
      std::printf("%-3u %-11s %-12s %-9llu %-9llu %-9llu %-9llu %-9llu %-9llu %-9llu%s\n", n,
                  opts.c_str(), steps.c_str(), static_cast<unsigned long long>(run.messages),
                  static_cast<unsigned long long>(c.messages_sent_estimate),
                  static_cast<unsigned long long>(c.messages_sent_proposal),
                  static_cast<unsigned long long>(c.messages_sent_ack),
                  static_cast<unsigned long long>(c.messages_sent_nack),
                  static_cast<unsigned long long>(c.messages_sent_decision),
                  static_cast<unsigned long long>(c.messages_sent_decided),
                  run.all_decided && run.agreement ? "" : "  NOT DECIDED/AGREED");
    }
  }
  std::printf("\n(optimisation 3 applies to n = 3 only; opts \"-\" = off)\n");
  return 0;
}

bool ParseRange(const std::string& text, uint64_t* first, uint64_t* last) {
  const size_t dots = text.find("..");
  if (dots == std::string::npos) return false;
  char* end = nullptr;
  *first = std::strtoull(text.c_str(), &end, 10);
  if (end != text.c_str() + dots) return false;
  *last = std::strtoull(text.c_str() + dots + 2, &end, 10);
  return *end == '\0' && *first <= *last;
}

int RunSeeds(uint64_t first, uint64_t last, Ordering ordering) {
  uint64_t seeds = 0, faults = 0, violations = 0, broadcasts = 0, messages = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    cohort::sim::OrderSimOptions options;
    options.seed = seed;
    options.ordering = ordering;
    const cohort::sim::OrderSimResult result = cohort::sim::RunOrderSimulation(options);
    ++seeds;
    faults += result.faults_injected;
    broadcasts += result.broadcasts;
    messages += result.messages_sent;
    if (!result.ok) {
      ++violations;
      std::printf("seed %llu (%u members): %s\n  replay: cohort-sim --seeds %llu..%llu "
                  "--ordering %s\n",
                  static_cast<unsigned long long>(seed), result.members,
                  result.violation.c_str(), static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(seed), cohort::sim::OrderingName(ordering));
    }
  }
  std::printf("ordering %s: seeds run %llu, faults injected %llu, broadcasts %llu, "
              "messages %llu, violations %llu\n",
              cohort::sim::OrderingName(ordering), static_cast<unsigned long long>(seeds),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(broadcasts),
              static_cast<unsigned long long>(messages),
              static_cast<unsigned long long>(violations));
  return violations == 0 ? 0 : 1;
}

// The whole stack: real Nodes with membership, invocation and servants (test/stack_sim.h).
int RunStackSeeds(uint64_t first, uint64_t last, cohort::sim::StackSimOptions options,
                  bool verbose) {
  cohort::nso::ConfigureLogging(verbose ? "debug" : "off", "text", "");
  uint64_t seeds = 0, faults = 0, violations = 0, calls = 0, acknowledged = 0, views = 0,
           transfers = 0, servant_crashes = 0, leaves = 0, one_way_lost = 0, call_ms_max = 0,
           fifo_checked = 0,
           fifo_calls = 0, fifo_gave_up_seeds = 0, fifo_refused = 0, calls_refused = 0,
           outside_fifo_calls = 0, late_starts = 0, restarts_named = 0, servants_behind = 0,
           servants_stuck = 0, servants_cut_off = 0, clients_replaced = 0, clients_retired = 0,
           clients_not_retired = 0;
  std::vector<uint64_t> call_ms_p50s;
  std::map<std::string, std::vector<cohort::sim::CallKindTimes>> kinds;
  std::string slowest_call, one_way_lost_example;
  int32_t drift_seen_min = 0, drift_seen_max = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    options.seed = seed;
    const cohort::sim::StackSimResult result = cohort::sim::RunStackSimulation(options);
    ++seeds;
    faults += result.faults;
    calls += result.calls;
    acknowledged += result.calls_acknowledged;
    views += result.views_installed;
    transfers += result.state_transfers;
    servant_crashes += result.servant_crashes;
    leaves += result.leaves;
    late_starts += result.late_starts;
    restarts_named += result.restarts_named;
    servants_behind += result.servants_behind;
    servants_stuck += result.servants_stuck;
    servants_cut_off += result.servants_cut_off;
    clients_replaced += result.clients_replaced;
    clients_retired += result.clients_retired;
    clients_not_retired += result.clients_not_retired;
    if (result.one_way_lost > 0 && one_way_lost == 0) {
      one_way_lost_example = "seed " + std::to_string(seed) + ", " + result.one_way_lost_example;
    }
    one_way_lost += result.one_way_lost;
    if (result.fifo_checked) ++fifo_checked;
    fifo_calls += result.fifo_calls_applied;
    outside_fifo_calls += result.outside_calls_applied;
    if (result.fifo_gave_up > 0) ++fifo_gave_up_seeds;
    fifo_refused += result.fifo_refused;
    calls_refused += result.calls_refused;
    drift_seen_min = std::min(drift_seen_min, result.drift_ppm_min);
    drift_seen_max = std::max(drift_seen_max, result.drift_ppm_max);
    call_ms_p50s.push_back(result.call_ms_p50);
    for (const auto& [kind, times] : result.call_times) kinds[kind].push_back(times);
    if (result.call_ms_max >= call_ms_max) {
      call_ms_max = result.call_ms_max;
      slowest_call = "seed " + std::to_string(seed) + ", " + result.slowest_call;
    }
    if (!result.ok) {
      ++violations;
      std::printf("seed %llu (%u nodes, clocks %+d..%+d ppm): %s\n  replay: cohort-sim --stack "
                  "--seeds %llu..%llu%s --verbose\n",
                  static_cast<unsigned long long>(seed), result.nodes, result.drift_ppm_min,
                  result.drift_ppm_max, result.violation.c_str(),
                  static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
                  cohort::sim::ReplayFlags(options).c_str());
    }
  }
  std::printf("stack, ordering %s%s: seeds run %llu, faults injected %llu (servant crashes %llu%s), "
              "calls %llu (acknowledged %llu), views installed %llu, state transfers %llu, "
              "violations %llu\n",
              options.sequencer ? "sequencer" : "consensus",
              options.event_driven ? ", event-driven group" : "",
              static_cast<unsigned long long>(seeds),
              static_cast<unsigned long long>(faults),
              static_cast<unsigned long long>(servant_crashes),
              (std::string(options.leaves ? ", leaves " + std::to_string(leaves) : "") +
               (options.late_start_ms ? ", late starts " + std::to_string(late_starts) : "") +
               (options.slow_servants
                    ? ", servants behind (flow control) " + std::to_string(servants_behind)
                    : "") +
               (options.stuck_servants
                    ? ", servants stuck " + std::to_string(servants_stuck) + " (cut off " +
                          std::to_string(servants_cut_off) + ")"
                    : "") +
               (options.client_churn_percent > 0
                    ? ", clients replaced " + std::to_string(clients_replaced) + " (retired " +
                          std::to_string(clients_retired) + ", not " +
                          std::to_string(clients_not_retired) + ")"
                    : "") +
               (options.incarnation_files
                    ? ", restarts named by their incarnation file " + std::to_string(restarts_named)
                    : ""))
                  .c_str(),
              static_cast<unsigned long long>(calls),
              static_cast<unsigned long long>(acknowledged), static_cast<unsigned long long>(views),
              static_cast<unsigned long long>(transfers),
              static_cast<unsigned long long>(violations));
  std::printf("FIFO per client checked in %llu seeds (%llu calls applied, %llu of them the outside "
              "caller's); in %llu a member ordered a call from outside without its predecessor "
              "after the longest wait; deliveries refused as out of their client's order: %llu (calls whose "
              "caller was still waiting and got the refusal: %llu)\n",
              static_cast<unsigned long long>(fifo_checked),
              static_cast<unsigned long long>(fifo_calls),
              static_cast<unsigned long long>(outside_fifo_calls),
              static_cast<unsigned long long>(fifo_gave_up_seeds),
              static_cast<unsigned long long>(fifo_refused),
              static_cast<unsigned long long>(calls_refused));
  std::printf("one-way calls accepted by a daemon that stayed up and applied by no replica: %llu%s\n",
              static_cast<unsigned long long>(one_way_lost),
              one_way_lost ? (" (first: " + one_way_lost_example + ")").c_str() : "");
  std::printf("simulated call time (successful calls, links %llu-%llu ms): median of the seeds' "
              "p50 %llu ms, longest %llu ms (%s)\n",
              static_cast<unsigned long long>(options.link_delay_min_ms),
              static_cast<unsigned long long>(options.link_delay_max_ms),
              static_cast<unsigned long long>(cohort::sim::Median(std::move(call_ms_p50s))),
              static_cast<unsigned long long>(call_ms_max), slowest_call.c_str());
  if (!options.faults) {
    std::printf("%-26s %8s %7s %11s %7s\n", "calls by kind", "calls", "min_ms", "p50_ms(med)",
                "max_ms");
    for (auto& [kind, runs] : kinds) {
      uint64_t count = 0, min_ms = UINT64_MAX, max_ms = 0;
      std::vector<uint64_t> p50s;
      for (const auto& times : runs) {
        count += times.count;
        min_ms = std::min(min_ms, times.min_ms);
        max_ms = std::max(max_ms, times.max_ms);
        p50s.push_back(times.p50_ms);
      }
      std::printf("%-26s %8llu %7llu %11llu %7llu\n", kind.c_str(),
                  static_cast<unsigned long long>(count), static_cast<unsigned long long>(min_ms),
                  static_cast<unsigned long long>(cohort::sim::Median(std::move(p50s))),
                  static_cast<unsigned long long>(max_ms));
    }
  }
  std::printf("clock drift: every node's clock rate within +-%u ppm and offset up to %llu ms "
              "(rates drawn: %+d..%+d ppm)\n",
              options.drift_ppm_max,
              static_cast<unsigned long long>(cohort::sim::StackSimOptions{}.clock_offset_ms_max),
              drift_seen_min, drift_seen_max);
  return violations == 0 ? 0 : 1;
}

// Every message of each seed's run singled out in turn (test/stack_perturb.h).
int RunStackPerturbations(uint64_t first, uint64_t last, cohort::sim::StackSimOptions options,
                          const cohort::sim::Perturbation& perturbation,
                          const cohort::sim::SendRange& range,
                          const cohort::sim::ThenPerturbation* then, bool verbose) {
  cohort::nso::ConfigureLogging(verbose ? "debug" : "off", "text", "");
  uint64_t runs = 0, perturbed = 0, crashes = 0, double_crashes = 0, diverged = 0,
           violations = 0, lost_runs = 0, lost = 0, named_runs = 0;
  std::map<std::string, uint64_t> kinds;
  for (uint64_t seed = first; seed <= last; ++seed) {
    options.seed = seed;
    const cohort::sim::PerturbReport report =
        cohort::sim::RunPerturbations(options, perturbation, range, then);
    std::printf("seed %llu: %llu messages sent in the unperturbed run while faults may happen, "
                "%llu runs, %llu perturbed, %llu diverged, violations %llu, runs that lost one-way "
                "calls %llu, views up to %llu\n",
                static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(report.base_messages),
                static_cast<unsigned long long>(report.runs),
                static_cast<unsigned long long>(report.perturbed),
                static_cast<unsigned long long>(report.diverged),
                static_cast<unsigned long long>(report.violations),
                static_cast<unsigned long long>(report.lost_runs),
                static_cast<unsigned long long>(report.views_max));
    for (const std::string& failure : report.failures) std::printf("  %s\n", failure.c_str());
    std::fflush(stdout);
    runs += report.runs;
    perturbed += report.perturbed;
    crashes += report.crashes;
    double_crashes += report.double_crashes;
    diverged += report.diverged;
    violations += report.violations;
    lost_runs += report.lost_runs;
    lost += report.one_way_lost;
    named_runs += report.named_runs;
    for (const auto& [kind, count] : report.kinds) kinds[kind] += count;
  }
  std::string by_kind;
  for (const auto& [kind, count] : kinds) {
    by_kind += (by_kind.empty() ? "" : ", ") + kind + " " + std::to_string(count);
  }
  std::printf("perturbed stack, ordering %s: runs %llu, message singled out in %llu (%s; a "
              "sender crashed after its message in %llu, two in %llu), deliveries differ from "
              "the unperturbed run in %llu, violations %llu, runs that lost one-way calls %llu "
              "(calls %llu)%s\n",
              options.sequencer ? "sequencer" : "consensus",
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(perturbed),
              by_kind.c_str(), static_cast<unsigned long long>(crashes),
              static_cast<unsigned long long>(double_crashes),
              static_cast<unsigned long long>(diverged),
              static_cast<unsigned long long>(violations),
              static_cast<unsigned long long>(lost_runs), static_cast<unsigned long long>(lost),
              options.incarnation_files
                  ? (", a restart named by its incarnation file in " +
                     std::to_string(named_runs) + " runs")
                        .c_str()
                  : "");
  // A lost one-way call is a violation unless faults can cut its caller off (the documented
  // limit, stack_sim.h StackSimResult::one_way_lost).
  return violations == 0 && (options.faults || lost_runs == 0) ? 0 : 1;
}

// `parsed`'s value into *out; or its error on stderr, and false.
template <typename T, typename Out>
bool TakeParsed(absl::StatusOr<T> parsed, Out* out) {
  if (!parsed.ok()) {
    std::fprintf(stderr, "cohort-sim: %s\n", std::string(parsed.status().message()).c_str());
    return false;
  }
  *out = *std::move(parsed);
  return true;
}

int Usage() {
  std::fputs("usage: cohort-sim --table\n"
             "       cohort-sim --seeds A..B [--ordering consensus|sequencer]\n"
             "       cohort-sim --stack --seeds A..B [--ordering consensus|sequencer] [--verbose]\n"
             "                  [--crash-one-at MS | --slow-only] [--drift-ppm PPM]\n"
             "                  [--liveness lively|event] [--streams-break] [--leaves] [--kill-percent P]\n"
             "                  [--client-churn P]\n"
             "                  [--slow-servants [--stuck-servants]]\n"
             "                  [--fault-free] [--nodes N] [--calls-per-step K] [--link-ms D]\n"
             "                  [--suspect-ms MS] [--chaos-ms MS] [--late-start MS] [--incarnation-files]\n"
             "       cohort-sim --stack --seeds A..B --perturb drop|crash|restart:MS|delay:MS|\n"
             "                  duplicate:MS|crash+delay:MS|crash+duplicate:MS\n"
             "                  [--sends X..Y] [--kinds K1,K2] [--sends-every K]\n"
             "                  [--then PERTURBATION [--then-offsets A..B]] [other flags]\n"
             "  --drift-ppm: each node's clock rate is off by up to +-PPM parts per million\n"
             "               (default 50000 = 5%; 0: one clock for all)\n"
             "  --liveness:  the simulated group is lively (default) or event-driven\n"
             "  --streams-break: a crash or partition breaks the streams to a node at once, as TCP\n"
             "               resets do (Transport::Reachable); off: the streams always look up\n"
             "  --leaves:    members also leave the group (LeaveGroup) while their clients call, and\n"
             "               join again 50-1500 ms later\n"
             "  --client-churn P: before a call, with P percent chance, its caller's client detaches\n"
             "               and a new one makes it (departed clients are retired)\n"
             "  --slow-servants: servants read one delivery per 1 ms, or 12 or 6 ms divided by\n"
             "               --calls-per-step, and report their backlog; flow control holds the\n"
             "               group at 8 bytes unread\n"
             "  --stuck-servants: with --slow-servants, half of the servant faults are a servant\n"
             "               that reads nothing for 100-1500 ms; one stuck for 300 ms with 200\n"
             "               bytes unread is cut off and a fresh one attaches later\n"
             "  --kill-percent: of the node crashes, the share that are process kills, whose peers'\n"
             "               connections close and suspect it at once (default 50)\n"
             "  --fault-free: no crash, partition, loss or delay burst (to read the call times)\n"
             "  --nodes:     the group's size (default: 3 to 5, chosen by the seed)\n"
             "  --calls-per-step: calls started together every 15 ms, from random callers (default 1)\n"
             "  --link-ms:   every message takes D ms (default 1-3); with --fault-free and 1, the\n"
             "               call times by kind count the hops on each kind's critical path\n"
             "  --suspect-ms: the group's suspicion timeout (default 50, as cohortd's); the\n"
             "               exclusion timeout stays 800 ms\n"
             "  --chaos-ms:  simulated time with faults and calls, before the checks (default 4000)\n"
             "  --late-start: each node but node 1, with probability 1/2, starts at a time drawn in\n"
             "               1..MS (daemons that come up one by one; never heard of before)\n"
             "  --incarnation-files: each node keeps its incarnation on disk, as cohortd's\n"
             "               incarnation_file: a restarted one says which process it follows\n"
             "  --perturb:   run each seed once as it is, then once per message it sent, with that\n"
             "               message alone lost, delayed MS more, or delivered again MS later, or\n"
             "               its sender crashed right after it (if the fault model allows);\n"
             "               crash+delay:MS, crash+duplicate:MS: both; restart:MS: a crash, and\n"
             "               a restart without state MS later (else when the faults stop)\n"
             "  --sends:     only messages X..Y of the run (1-based); --kinds: only these bodies\n"
             "               (consensus, membership, data, heartbeat, sequencer, reply, forward,\n"
             "               managed_reply); --sends-every: every K-th of those\n"
             "  --then:      a second message too in each run, A..B sends after the first (default\n"
             "               1..20), one run per offset (e.g. --perturb crash --then crash: a second\n"
             "               crash in the midst of the first's view change)\n",
             stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool table = false, stack = false, verbose = false;
  cohort::sim::StackSimOptions stack_options;
  std::string seeds;
  Ordering ordering = Ordering::kConsensus;
  std::optional<cohort::sim::Perturbation> perturbation;
  cohort::sim::ThenPerturbation then;
  bool has_then = false;
  cohort::sim::SendRange sends;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--table") {
      table = true;
    } else if (arg == "--stack") {
      stack = true;
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--slow-only") {
      stack_options.slow_only = true;
      stack_options.faults = false;
    } else if (arg == "--fault-free") {
      stack_options.faults = false;
    } else if (arg == "--streams-break") {
      stack_options.streams_break = true;
    } else if (arg == "--leaves") {
      stack_options.leaves = true;
    } else if (arg == "--client-churn" && i + 1 < argc) {
      stack_options.client_churn_percent = static_cast<uint32_t>(std::stoul(argv[++i]));
    } else if (arg == "--slow-servants") {
      stack_options.slow_servants = true;
    } else if (arg == "--stuck-servants") {
      stack_options.stuck_servants = true;
    } else if (arg == "--kill-percent" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value > 100) return Usage();
      stack_options.kill_percent = static_cast<uint32_t>(value);
    } else if (arg == "--crash-one-at" && i + 1 < argc) {
      stack_options.crash_one_at_ms = std::strtoull(argv[++i], nullptr, 10);
      if (stack_options.crash_one_at_ms == 0) return Usage();
      stack_options.faults = false;
    } else if (arg == "--link-ms" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 1000) return Usage();
      stack_options.link_delay_min_ms = value;
      stack_options.link_delay_max_ms = value;
    } else if (arg == "--suspect-ms" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 400) return Usage();
      stack_options.suspect_timeout_ms = value;
    } else if (arg == "--nodes" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 9) return Usage();
      stack_options.nodes = static_cast<uint32_t>(value);
    } else if (arg == "--calls-per-step" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 64) return Usage();
      stack_options.calls_per_step = static_cast<uint32_t>(value);
    } else if (arg == "--drift-ppm" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value >= 500000) return Usage();  // a clock must move forward
      stack_options.drift_ppm_max = static_cast<uint32_t>(value);
    } else if (arg == "--liveness" && i + 1 < argc) {
      const std::string value = argv[++i];
      if (value == "lively") {
        stack_options.event_driven = false;
      } else if (value == "event") {
        stack_options.event_driven = true;
      } else {
        return Usage();
      }
    } else if (arg == "--incarnation-files") {
      stack_options.incarnation_files = true;
    } else if (arg == "--late-start" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 600000) return Usage();
      stack_options.late_start_ms = value;
    } else if (arg == "--chaos-ms" && i + 1 < argc) {
      const uint64_t value = std::strtoull(argv[++i], nullptr, 10);
      if (value < 1 || value > 600000) return Usage();
      stack_options.chaos_ms = value;
    } else if (arg == "--perturb" && i + 1 < argc) {
      if (!TakeParsed(cohort::sim::ParsePerturbation(argv[++i]), &perturbation)) return Usage();
    } else if (arg == "--then" && i + 1 < argc) {
      if (!TakeParsed(cohort::sim::ParsePerturbation(argv[++i]), &then.perturbation)) {
        return Usage();
      }
      has_then = true;
    } else if (arg == "--then-offsets" && i + 1 < argc) {
      if (!ParseRange(argv[++i], &then.first_offset, &then.last_offset) ||
          then.first_offset == 0) {
        return Usage();
      }
    } else if (arg == "--sends" && i + 1 < argc) {
      if (!ParseRange(argv[++i], &sends.first, &sends.last) || sends.first == 0) return Usage();
    } else if (arg == "--kinds" && i + 1 < argc) {
      if (!TakeParsed(cohort::sim::ParseKinds(argv[++i]), &sends.kinds)) return Usage();
    } else if (arg == "--sends-every" && i + 1 < argc) {
      sends.every = std::strtoull(argv[++i], nullptr, 10);
      if (sends.every < 1) return Usage();
    } else if (arg == "--seeds" && i + 1 < argc) {
      seeds = argv[++i];
    } else if (arg == "--ordering" && i + 1 < argc) {
      const std::string value = argv[++i];
      if (value == "consensus") {
        ordering = Ordering::kConsensus;
      } else if (value == "sequencer") {
        ordering = Ordering::kSequencer;
      } else {
        return Usage();
      }
    } else {
      return Usage();
    }
  }
  if (table) return PrintTable();
  uint64_t first = 0, last = 0;
  if (seeds.empty() || !ParseRange(seeds, &first, &last)) return Usage();
  stack_options.sequencer = ordering == Ordering::kSequencer;
  if ((perturbation && !stack) || (has_then && !perturbation)) return Usage();
  if (stack_options.stuck_servants && !stack_options.slow_servants) return Usage();
  if (perturbation) {
    return RunStackPerturbations(first, last, stack_options, *perturbation, sends,
                                 has_then ? &then : nullptr, verbose);
  }
  if (stack) return RunStackSeeds(first, last, stack_options, verbose);
  return RunSeeds(first, last, ordering);
}
