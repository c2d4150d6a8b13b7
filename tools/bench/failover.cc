#include "tools/bench/failover.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/bench/daemons.h"
#include "tools/bench/group_calls.h"
#include "tools/bench/measure.h"
#include "tools/bench/workload.h"

namespace cohort::bench {
namespace {

struct FailoverScenario {
  const char* name;
  const char* ordering;
  const char* style;
  int signal;
  // Callers of the victim's own (a second client at n1). The consensus order's round-1
  // coordinator is the member with the most messages in the previous decision, so with calls
  // from n2 alone n2 coordinates and killing n1 would kill no coordinator: n1's callers make it
  // coordinate most instances, the ones ordering n2's calls included.
  int victim_callers = 0;
  // The daemons run with failure_detector.suspect_on_disconnect: false, so a killed victim is
  // found by the suspicion timeout alone, as a host that stops (power lost) is: its closed
  // connections tell nothing.
  bool silent = false;
};

// n = 3 members n1..n3 (of `total` daemons) with echo servants and a client attached to
// `attach`, ready for `style` calls: the set-up of the failover scenarios. Returns "" or why not.
struct FailoverCluster {
  std::unique_ptr<Daemons> daemons;
  std::vector<std::unique_ptr<EchoReplica>> replicas;
  std::unique_ptr<Client> client;
};

std::string StartFailoverCluster(const std::string& cohortd, const std::string& cluster_dir,
                                 int total, const std::string& ordering, int attach, Style style,
                                 const std::string& client_name, FailoverCluster* out,
                                 bool silent_kills = false) {
  const int n = 3;
  const std::string group = "bench";
  std::filesystem::create_directories(cluster_dir);
  out->daemons = std::make_unique<Daemons>(
      cohortd, cluster_dir, total,
      absl::StrCat(silent_kills ? "failure_detector:\n  suspect_on_disconnect: false\n" : "",
                   GroupsYaml(group, n, ordering)));
  std::string error;
  if (!out->daemons->Start(&error)) return "cluster failed: " + error;
  for (int i = 1; i <= n; ++i) {
    out->replicas.push_back(std::make_unique<EchoReplica>());
    absl::Status started = out->replicas.back()->Start(out->daemons->ClientAddress(i), group, i);
    if (!started.ok()) return absl::StrCat("servant at n", i, ": ", started.ToString());
  }
  auto client = Client::Connect(out->daemons->ClientAddress(attach), BenchConnect(client_name));
  if (!client.ok()) return client.status().ToString();
  out->client = *std::move(client);
  absl::Status ready = WaitReady(out->client.get(), group, style, absl::Seconds(15));
  if (!ready.ok()) return "group not ready: " + ready.ToString();
  return "";
}

FailoverResult RunFailover(const Options& options, const std::string& cohortd, const std::string& dir,
                           const FailoverScenario& scenario) {
  const int n = 3;
  const std::string group = "bench";
  FailoverResult result;
  result.scenario = scenario.name;
  result.ordering = scenario.ordering;
  result.style = scenario.style;
  result.signal = scenario.signal == SIGKILL ? "SIGKILL" : "SIGSTOP";
  result.victim = "n1";
  result.n = n;
  // closed-out: closed calls from the daemon that hosts no member, ordered by n1 (its request
  // manager) while n2 and n3 stand by.
  int attach = std::string(scenario.style) == "closed" ? 2 : n + 1;
  Style style = std::string(scenario.style) == "open" ? Style::kOpen : Style::kClosed;
  result.attached_to = absl::StrCat("n", attach);
  FailoverCluster cluster;
  result.note = StartFailoverCluster(
      cohortd, absl::StrCat(dir, "/failover-", scenario.name, "-", scenario.ordering), n + 1,
      scenario.ordering, attach, style, "bench-failover", &cluster, scenario.silent);
  if (!result.note.empty()) return result;
  if (scenario.silent) {
    result.load = "failure_detector.suspect_on_disconnect: false, so n1's closed connections tell "
                  "nothing: the suspicion timeout finds it, as it finds a host that stops";
  }
  Daemons& daemons = *cluster.daemons;
  std::vector<std::unique_ptr<EchoReplica>>& replicas = cluster.replicas;
  Client* client = cluster.client.get();
  std::string payload(options.payload, 'x');
  std::unique_ptr<Client> victim_client;
  std::vector<std::thread> victim_load;
  std::atomic<bool> stop_load{false};
  if (scenario.victim_callers > 0) {
    auto connected = Client::Connect(daemons.ClientAddress(1), BenchConnect("bench-failover-load"));
    if (!connected.ok()) {
      result.note = "victim's callers: " + connected.status().ToString();
      replicas.clear();
      daemons.KillAll();
      return result;
    }
    victim_client = *std::move(connected);
    result.load = absl::StrCat(result.load, result.load.empty() ? "" : "; ", "n1 runs ",
                               scenario.victim_callers,
                               " callers of its own (wait-for-majority), so it coordinates most "
                               "instances, those ordering the measured calls included");
    for (int i = 0; i < scenario.victim_callers; ++i) {
      victim_load.emplace_back([&] {
        while (!stop_load.load()) {
          auto call = victim_client->Invoke(group, "echo", payload, Mode::kMajority,
                                            absl::Seconds(2), style);
          if (!call.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  using Clock = std::chrono::steady_clock;
  const auto before = std::chrono::milliseconds(options.quick ? 500 : 1000);
  const auto after = std::chrono::milliseconds(options.quick ? 1500 : 2500);
  // The stream runs on its own thread; the main thread sends the signal, so the sender is not
  // blocked in a call when its time comes.
  std::vector<Clock::time_point> completions;
  std::atomic<bool> stop{false};
  std::thread stream([&] {
    while (!stop.load()) {
      auto call = client->Invoke(group, "echo", payload, Mode::kMajority, absl::Seconds(2),
                                     style);
      Clock::time_point done = Clock::now();
      if (call.ok() && call->replies.size() >= call->wanted) {
        completions.push_back(done);
      } else {
        ++result.failed;
        if (result.first_error.empty()) RepliesOk(call, &result.first_error);  // its reason
      }
    }
  });
  Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(before);
  Clock::time_point signalled = Clock::now();
  daemons.Signal(1, scenario.signal);
  std::this_thread::sleep_for(after);
  stop.store(true);
  stream.join();
  stop_load.store(true);
  for (std::thread& caller : victim_load) caller.join();
  victim_client.reset();
  Clock::time_point previous = start;
  std::vector<double> gaps_before, gaps_after;
  for (Clock::time_point done : completions) {
    double gap = std::chrono::duration<double, std::milli>(done - previous).count();
    if (done <= signalled) {
      ++result.ok_before;
      result.baseline_gap_ms = std::max(result.baseline_gap_ms, gap);
      gaps_before.push_back(gap);
    } else {
      ++result.ok_after;
      result.stall_ms = std::max(result.stall_ms, gap);
      gaps_after.push_back(gap);
    }
    previous = done;
  }
  result.p50_gap_before_ms = Percentile(&gaps_before, 50);
  result.p50_gap_after_ms = Percentile(&gaps_after, 50);
  if (result.baseline_gap_ms >= result.suspect_timeout_ms) {
    // Seen once in session 6 (sequencer-kill: 54 ms before the signal, 3 ms after it).
    result.note = absl::StrCat(
        "a gap of ", static_cast<int>(result.baseline_gap_ms + 0.5),
        " ms before the signal (a suspicion timeout or more): a false suspicion may have moved "
        "n1's role (coordinator, sequencer, request manager) to another member before the "
        "signal, and then this stall does not measure the loss of that role");
  }
  if (result.ok_after == 0) {
    // Nothing completed after the signal: the stall is at least the rest of the window.
    result.stall_ms = std::chrono::duration<double, std::milli>(Clock::now() - previous).count();
    result.note = "no call completed after the signal within the window";
  }
  replicas.clear();
  daemons.KillAll();
  return result;
}

// Wait-for-all across an exclusion: sequential wait-for-all calls (15 s deadline) from n2 while
// n1 is killed -9; the call in flight then waits for the exclusion timeout (10 s by default) to
// remove n1, calls made while n1 is suspected fail fast and are retried every 20 ms, and the first
// call that succeeds has every reply of the new view.
ExclusionResult RunExclusion(const Options& options, const std::string& cohortd, const std::string& dir) {
  const int n = 3;
  const std::string group = "bench";
  ExclusionResult result;
  FailoverCluster cluster;
  result.note = StartFailoverCluster(cohortd, absl::StrCat(dir, "/exclusion"), n, "consensus", 2,
                                     Style::kClosed, "bench-exclusion", &cluster);
  if (!result.note.empty()) return result;
  Daemons& daemons = *cluster.daemons;
  std::vector<std::unique_ptr<EchoReplica>>& replicas = cluster.replicas;
  Client* client = cluster.client.get();
  using Clock = std::chrono::steady_clock;
  std::string payload(options.payload, 'x');
  std::atomic<bool> killed{false};
  Clock::time_point killed_at;
  std::atomic<bool> stop{false};
  std::thread stream([&] {
    while (!stop.load()) {
      Clock::time_point start = Clock::now();
      auto call = client->Invoke(group, "echo", payload, Mode::kAll, absl::Seconds(15),
                                     Style::kClosed);
      Clock::time_point done = Clock::now();
      bool ok = call.ok() && call->replies.size() >= call->wanted;
      if (ok && !killed.load()) {
        ++result.ok_before;
      } else if (ok) {
        // Also the call in flight at the kill: it waits for the exclusion.
        result.waited_ms = std::max(
            result.waited_ms, std::chrono::duration<double, std::milli>(done - start).count());
        // Counted against the view without n1 (a call n1 answered before it died is not).
        if (result.resumed_ms < 0 && call->wanted < static_cast<uint32_t>(n)) {
          result.resumed_ms = std::chrono::duration<double, std::milli>(done - killed_at).count();
          result.resumed_replies = call->replies.size();
          result.resumed_wanted = call->wanted;
          stop.store(true);
        }
      } else {
        ++result.failed_fast;
        if (result.first_error.empty()) RepliesOk(call, &result.first_error);  // its reason
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(options.quick ? 500 : 1000));
  killed_at = Clock::now();
  killed.store(true);
  daemons.Signal(1, SIGKILL);
  Clock::time_point limit = killed_at + std::chrono::seconds(20);
  while (!stop.load() && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop.store(true);
  stream.join();
  result.measured = result.ok_before > 0;
  if (result.resumed_ms < 0) result.note = "no wait-for-all call succeeded within 20 s of the kill";
  replicas.clear();
  daemons.KillAll();
  return result;
}

}  // namespace

void MeasureFailover(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report) {
  const FailoverScenario scenarios[] = {
      {"coordinator-kill", "consensus", "closed", SIGKILL, /*victim_callers=*/3},
      {"sequencer-kill", "sequencer", "closed", SIGKILL},
      {"coordinator-kill-silent", "consensus", "closed", SIGKILL, /*victim_callers=*/3, /*silent=*/true},
      {"sequencer-kill-silent", "sequencer", "closed", SIGKILL, 0, /*silent=*/true},
      {"request-manager-kill", "consensus", "open", SIGKILL},
      {"request-manager-kill", "sequencer", "open", SIGKILL},
      {"coordinator-freeze", "consensus", "closed", SIGSTOP, /*victim_callers=*/3},
      {"request-manager-freeze", "consensus", "open", SIGSTOP},
      {"request-manager-freeze", "sequencer", "open", SIGSTOP},
      {"orderer-kill", "consensus", "closed-out", SIGKILL},
      {"orderer-freeze", "sequencer", "closed-out", SIGSTOP},
  };
  for (const FailoverScenario& scenario : scenarios) {
    Progress(absl::StrCat("failover: ", scenario.name, " (", scenario.ordering, ", ", scenario.style, ")"));
    FailoverResult result = RunFailover(options, cohortd, dir, scenario);
    // The coordinator of consensus rotates to the member with the most messages in the last
    // decision (consensus/consensus_order.h), and n1's own callers only make that likely; the
    // sequencer (or the request manager) moves off n1 for good after one false suspicion of it
    // (consensus/sequencer_order.h: a later epoch), at start-up included. Where only the
    // suspicion timeout can find n1 (a freeze, a silent kill), a stall under half of it means
    // n1 did not hold the role for the call in flight, so the scenario did not happen: it runs
    // again (at most 3 times), and the note keeps what the earlier attempts measured. The
    // longest stall is kept, never a shorter one. (A kill the survivors are told of stalls a few
    // ms whether n1 held the role or not.) Seen in session 39's full run: sequencer-kill-silent
    // stalled 3.4 ms, against 49-51 ms in every other run.
    std::string stalls = absl::StrCat(static_cast<int>(result.stall_ms + 0.5));
    const bool timeout_only = scenario.signal == SIGSTOP || scenario.silent;
    for (int attempt = 2; timeout_only && attempt <= 3 &&
                          result.ok_after > 0 && result.stall_ms < result.suspect_timeout_ms / 2;
         ++attempt) {
      Progress(absl::StrCat("failover: ", scenario.name, " again: n1 did not hold its role (stall ",
                            static_cast<int>(result.stall_ms + 0.5), " ms)"));
      FailoverResult again = RunFailover(options, cohortd, dir, scenario);
      absl::StrAppend(&stalls, ", ", static_cast<int>(again.stall_ms + 0.5));
      if (again.stall_ms > result.stall_ms) result = std::move(again);
    }
    if (stalls.find(',') != std::string::npos) {
      result.note = absl::StrCat(result.note, result.note.empty() ? "" : "; ", "attempts' stalls ",
                                 stalls, " ms (one under half the suspicion timeout: n1 did not "
                                 "hold its role for the call in flight); the longest is reported");
    }
    report->failovers.push_back(std::move(result));
  }
  Progress("failover: wait-for-all across the exclusion of a killed member (~11 s)");
  report->exclusion = RunExclusion(options, cohortd, dir);
}

}  // namespace cohort::bench
