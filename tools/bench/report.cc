#include "tools/bench/report.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/json_string.h"

namespace cohort::bench {
namespace {

using ::cohort::tools::JsonString;

std::string Num(double value, int precision = 0) {
  return absl::StrFormat("%.*f", precision, value);
}

std::string Ratio(double numerator, double denominator) {
  if (denominator <= 0 || numerator <= 0) return "-";
  return absl::StrFormat("%.2f", numerator / denominator);
}

// Index of `callers` in the report's list, or -1.
int CallerIndex(const Report& report, int callers) {
  for (size_t i = 0; i < report.callers.size(); ++i) {
    if (report.callers[i] == callers) return static_cast<int>(i);
  }
  return -1;
}

const GroupResult* Find(const Report& report, int n, const std::string& ordering,
                        const std::string& style, const std::string& mode) {
  for (const GroupResult& group : report.groups) {
    if (group.n == n && group.ordering == ordering && group.style == style && group.mode == mode) {
      return &group;
    }
  }
  return nullptr;
}

// Throughput shown for a series: for one-way, the delivered rate (ordered and handed to a
// servant), which is what one-way throughput means for a group; the accept rate is in the JSON.
double ShownThroughput(const Series& series, size_t i) {
  if (!series.delivered_per_s.empty()) return series.delivered_per_s[i];
  return series.by_callers[i].throughput;
}

struct Target {
  std::string what;
  std::string measured;
  std::string limit;
  std::string verdict;  // met | NOT MET | not measured
  // Latency targets: the median of the paired ratios (GroupResult::paired_ratio) and its verdict,
  // where measured.
  std::string paired;
  std::string paired_verdict;
};

std::vector<Target> Targets(const Report& report) {
  std::vector<Target> targets;
  double grpc_p50 = FloorP50(report.grpc, report.grpc_p50_end);
  auto verdict = [](bool measured, bool met) {
    return !measured ? std::string("not measured") : met ? std::string("met") : std::string("NOT MET");
  };
  // A sequential p50 against the gRPC echo's.
  // Beside it, where measured, the median of the paired ratios (the row and the echo measured
  // one right after the other, GroupResult::paired_ratios) and its verdict.
  auto latency = [&](const GroupResult* g, std::string what, double limit) {
    bool measured = g && grpc_p50 > 0 && g->series.sequential.calls > 0;
    double ratio = measured ? g->series.sequential.p50_us / grpc_p50 : 0;
    Target target{std::move(what), measured ? Num(ratio, 2) : "-",
                  absl::StrCat("<= ", Num(limit, 1)), verdict(measured, ratio <= limit)};
    if (measured && g->paired_ratio > 0) {
      target.paired = Num(g->paired_ratio, 2);
      target.paired_verdict = verdict(true, g->paired_ratio <= limit);
    }
    targets.push_back(std::move(target));
  };
  for (const char* ordering : {"sequencer", "consensus"}) {
    latency(Find(report, 3, ordering, "open", "first"),
            absl::StrCat("first, open group via request manager, ", ordering, ", n=3: p50 / grpc_echo_p50"),
            1.2);
  }
  {
    const GroupResult* g = Find(report, 3, "consensus", "closed", "all");
    latency(g, "all, closed group, consensus, n=3: p50 / grpc_echo_p50", 2.0);
    const EtcdResult& e = report.etcd;
    bool with_etcd = g && g->series.sequential.calls > 0 && e.measured && e.sequential.p50_us > 0;
    double etcd_ratio = with_etcd ? g->series.sequential.p50_us / e.sequential.p50_us : 0;
    targets.push_back({"all, closed, consensus, n=3: p50 / etcd sequential put p50",
                       with_etcd ? Num(etcd_ratio, 2) : "-", "<= 0.5",
                       with_etcd ? verdict(true, etcd_ratio <= 0.5)
                                 : "not measured (no etcd in this run)"});
  }
  // The same two latency targets from an embedded member (003 section 3: client and NSO in one
  // address space), for comparison with the daemon-mode paths above.
  for (const auto& [mode, limit] : {std::pair<const char*, double>{"first", 1.2}, {"all", 2.0}}) {
    latency(Find(report, 3, "consensus", "embed", mode),
            absl::StrCat(mode, ", embedded member (closed), consensus, n=3: p50 / grpc_echo_p50"), limit);
  }
  // And with no daemon: every node an application process with its NSO embedded and its servant
  // beside it (003 section 5's setting; the bench's --role app-member).
  for (const char* ordering : {"sequencer", "consensus"}) {
    latency(Find(report, 3, ordering, "app-open", "first"),
            absl::StrCat("first, open group via request manager, ", ordering,
                         ", n=3, application processes (no cohortd): p50 / grpc_echo_p50"),
            1.2);
  }
  latency(Find(report, 3, "consensus", "app-closed", "all"),
          "all, closed group, consensus, n=3, application processes: p50 / grpc_echo_p50", 2.0);
  int i64 = CallerIndex(report, 64);
  for (const char* ordering : {"consensus", "sequencer"}) {
    const GroupResult* g = Find(report, 3, ordering, "closed", "all");
    bool measured = g && i64 >= 0 && report.grpc.measured &&
                    report.grpc.series.by_callers[i64].throughput > 0;
    double ratio = measured ? g->series.by_callers[i64].throughput /
                                  report.grpc.series.by_callers[i64].throughput
                            : 0;
    targets.push_back({absl::StrCat("all, closed, ", ordering,
                                    ", n=3, 64 callers: ops/s / grpc_echo ops/s (64 callers)"),
                       measured ? Num(ratio, 2) : "-", ">= 1.0",
                       measured ? verdict(true, ratio >= 1.0) : "not measured (needs 64 in --callers)"});
  }
  {
    const GroupResult* g = Find(report, 3, "consensus", "closed", "all");
    const EtcdResult& e = report.etcd;
    bool measured = g && i64 >= 0 && e.measured && e.concurrent.throughput > 0;
    double ratio = measured ? g->series.by_callers[i64].throughput / e.concurrent.throughput : 0;
    targets.push_back({"all, closed, consensus, n=3, 64 callers: ops/s / etcd 64-client put ops/s",
                       measured ? Num(ratio, 2) : "-", ">= 3.0",
                       measured ? verdict(true, ratio >= 3.0)
                                : "not measured (no etcd in this run, or 64 not in --callers)"});
  }
  for (const auto& [ordering, style] :
       {std::pair<const char*, const char*>{"consensus", "closed"}, {"sequencer", "closed"},
        {"consensus", "app-closed"}, {"sequencer", "app-closed"}}) {
    const GroupResult* g3 = Find(report, 3, ordering, style, "all");
    const GroupResult* g7 = Find(report, 7, ordering, style, "all");
    bool measured = g3 && g7 && g3->series.sequential.calls > 0 && g7->series.sequential.calls > 0;
    double ratio = measured ? g7->series.sequential.p50_us / g3->series.sequential.p50_us : 0;
    targets.push_back({absl::StrCat("scaling, all, ", style, ", ", ordering, ": p50(n=7) / p50(n=3)"),
                       measured ? Num(ratio, 2) : "-", "<= 1.5",
                       measured ? verdict(true, ratio <= 1.5) : "not measured (needs 3 and 7 in --sizes)"});
  }
  for (const FailoverResult& f : report.failovers) {
    bool measured = f.ok_after > 0;
    targets.push_back({absl::StrCat("failover stall, majority, ", f.scenario, " (", f.ordering, ", ",
                                    f.style, ", ", f.signal, " ", f.victim, ")"),
                       measured ? absl::StrCat(Num(f.stall_ms, 1), " ms") : "none after",
                       "<= 150 ms", measured ? verdict(true, f.stall_ms <= 150) : "NOT MET"});
  }
  {
    const ExclusionResult& x = report.exclusion;
    bool resumed = x.measured && x.resumed_ms >= 0;
    bool met = resumed && x.resumed_replies == x.resumed_wanted &&
               x.resumed_ms <= x.exclude_timeout_ms + 1000;
    targets.push_back({"failover, all: wait-for-all succeeds once the exclusion timeout removed the killed member",
                       resumed ? absl::StrCat(Num(x.resumed_ms, 0), " ms") : "-",
                       absl::StrCat("<= ", Num(x.exclude_timeout_ms + 1000, 0), " ms"),
                       !x.measured ? "not measured" : met ? "met" : "NOT MET"});
  }
  const MemoryResult& m = report.memory;
  targets.push_back({absl::StrCat("memory: ", m.nsos ? m.nsos : 100000,
                                  " idle attached NSOs, bytes per NSO (RSS delta)"),
                     m.measured ? Num(m.bytes_per_nso, 0) : "-", "<= 2048",
                     verdict(m.measured, m.bytes_per_nso <= 2048)});
  targets.push_back({"memory: bytes per NSO + one idle single-member group of its own",
                     m.measured && m.groups ? Num(m.bytes_per_nso + m.bytes_per_group, 0) : "-",
                     "<= 2048",
                     verdict(m.measured && m.groups > 0, m.bytes_per_nso + m.bytes_per_group <= 2048)});
  return targets;
}

std::string JsonLoad(const LoadResult& r) {
  return absl::StrFormat(
      "{\"callers\": %d, \"calls\": %d, \"errors\": %d, \"seconds\": %.3f, \"p50_us\": %.1f, "
      "\"p99_us\": %.1f, \"mean_us\": %.1f, \"throughput\": %.1f, \"first_error\": %s}",
      r.callers, r.calls, r.errors, r.seconds, r.p50_us, r.p99_us, r.mean_us, r.throughput,
      JsonString(r.first_error));
}

std::string JsonSeries(const Series& s, const Report& report) {
  std::vector<std::string> loads;
  for (size_t i = 0; i < s.by_callers.size(); ++i) {
    std::string load = JsonLoad(s.by_callers[i]);
    if (!s.delivered_per_s.empty()) {
      load.pop_back();
      load += absl::StrFormat(", \"delivered_per_s\": %.1f}", s.delivered_per_s[i]);
    }
    if (report.grpc.measured && i < report.grpc.series.by_callers.size()) {
      load.pop_back();
      load += absl::StrFormat(", \"throughput_over_grpc_echo\": %.4f}",
                              ShownThroughput(s, i) /
                                  std::max(1e-9, report.grpc.series.by_callers[i].throughput));
    }
    loads.push_back(load);
  }
  std::string ratios;
  if (double grpc_p50 = FloorP50(report.grpc, report.grpc_p50_end); grpc_p50 > 0) {
    ratios += absl::StrFormat(", \"p50_over_grpc_echo_p50\": %.4f",
                              s.sequential.p50_us / grpc_p50);
  }
  if (double tcp_p50 = FloorP50(report.tcp, report.tcp_p50_end); tcp_p50 > 0) {
    ratios += absl::StrFormat(", \"p50_over_tcp_pingpong_p50\": %.4f",
                              s.sequential.p50_us / tcp_p50);
  }
  return absl::StrCat("{\"sequential\": ", JsonLoad(s.sequential), ratios, ", \"by_callers\": [",
                      absl::StrJoin(loads, ", "), "]}");
}

}  // namespace

double FloorP50(const FloorResult& floor, double end_p50) {
  if (!floor.measured) return 0;
  double start = floor.series.sequential.p50_us;
  return end_p50 > 0 ? (start + end_p50) / 2 : start;
}

void PrintReport(const Report& report, std::ostream& out) {
  const double grpc_p50 = FloorP50(report.grpc, report.grpc_p50_end);
  const double tcp_p50 = FloorP50(report.tcp, report.tcp_p50_end);
  std::string where =
      report.netlab_delay_ms < 0
          ? std::string("loopback")
          : absl::StrCat("netlab hosts (daemon links delayed ", report.netlab_delay_ms,
                         " ms each way: daemon-daemon +", 2 * report.netlab_delay_ms,
                         " ms one way; floors on the bench host's loopback)");
  out << "\ncohort-bench: payload " << report.payload_bytes << " B, " << where
      << ", sequential latency "
      << "from <= " << report.seq_calls << " calls / " << Num(report.seq_time_s, 1)
      << " s, throughput windows " << Num(report.window_s, 1) << " s" << (report.quick ? " (--quick)" : "")
      << "\n\n";

  // Floors.
  std::ostringstream header;
  header << absl::StrFormat("%-14s %9s %9s", "floor", "p50_us", "p99_us");
  for (int c : report.callers) header << absl::StrFormat(" %10s", absl::StrCat("ops/s@", c));
  out << "== floors (two processes on 127.0.0.1) ==\n" << header.str() << "\n";
  for (const FloorResult* floor : {&report.grpc, &report.tcp, &report.tls}) {
    if (floor == &report.tls && !floor->measured) continue;  // --tls runs only
    if (!floor->measured) {
      out << absl::StrFormat("%-14s %9s\n", floor->name, "skipped");
      continue;
    }
    out << absl::StrFormat("%-14s %9s %9s", floor->name, Num(floor->series.sequential.p50_us),
                           Num(floor->series.sequential.p99_us));
    for (const LoadResult& r : floor->series.by_callers) out << absl::StrFormat(" %10s", Num(r.throughput));
    out << "\n";
  }
  if (report.grpc_p50_end > 0 || report.tcp_p50_end > 0) {
    out << "again at the end of the run (p50_us): grpc_echo " << Num(report.grpc_p50_end)
        << ", tcp_pingpong " << Num(report.tcp_p50_end) << "; the p50 ratios below divide by the "
        << "mean of start and end: grpc_echo " << Num(grpc_p50) << ", tcp_pingpong " << Num(tcp_p50)
        << "\n";
  }

  // Group calls.
  out << "\n== group calls (p50/grpc = p50 / grpc_echo_p50, p50/tcp = p50 / tcp_pingpong_p50, "
         "xgrpc@C = ops/s / grpc_echo ops/s with C callers; one_way ops/s = delivered/s) ==\n";
  std::ostringstream gh;
  gh << absl::StrFormat("%-2s %-9s %-10s %-8s %9s %9s %8s %8s", "n", "ordering", "style", "mode",
                        "p50_us", "p99_us", "p50/grpc", "p50/tcp");
  for (int c : report.callers) {
    gh << absl::StrFormat(" %10s %8s", absl::StrCat("ops/s@", c), absl::StrCat("xgrpc@", c));
  }
  gh << "  errors";
  out << gh.str() << "\n";
  for (const GroupResult& g : report.groups) {
    const Series& s = g.series;
    out << absl::StrFormat("%-2d %-9s %-10s %-8s %9s %9s %8s %8s", g.n, g.ordering, g.style, g.mode,
                           s.sequential.calls ? Num(s.sequential.p50_us) : "-",
                           s.sequential.calls ? Num(s.sequential.p99_us) : "-",
                           Ratio(s.sequential.p50_us, grpc_p50), Ratio(s.sequential.p50_us, tcp_p50));
    int64_t errors = s.sequential.errors;
    for (size_t i = 0; i < s.by_callers.size(); ++i) {
      double shown = ShownThroughput(s, i);
      double floor = report.grpc.measured ? report.grpc.series.by_callers[i].throughput : 0;
      out << absl::StrFormat(" %10s %8s", Num(shown), Ratio(shown, floor));
      if (report.callers[i] != 1) errors += s.by_callers[i].errors;
    }
    out << absl::StrFormat("  %6d", errors) << "\n";
  }
  for (const GroupResult& g : report.groups) {
    std::string error = g.series.sequential.first_error;
    for (const LoadResult& r : g.series.by_callers) {
      if (error.empty()) error = r.first_error;
    }
    if (!error.empty()) {
      out << "  first error, n=" << g.n << " " << g.ordering << " " << g.style << " " << g.mode
          << ": " << error << "\n";
    }
  }

  // Scaling.
  if (!report.sizes.empty() && !report.groups.empty()) {
    int smallest = report.sizes.front();
    out << "\n== scaling: sequential p50 at n / p50 at n=" << smallest << " ==\n";
    out << absl::StrFormat("%-9s %-10s %-8s", "ordering", "style", "mode");
    for (int n : report.sizes) out << absl::StrFormat(" %8s", absl::StrCat("n=", n));
    out << "\n";
    for (const char* ordering : {"consensus", "sequencer"}) {
      for (const char* style : {"closed", "closed-out", "open", "app-closed", "app-open"}) {
        for (const char* mode : {"first", "majority", "all", "one_way"}) {
          const GroupResult* base = Find(report, smallest, ordering, style, mode);
          if (!base) continue;
          out << absl::StrFormat("%-9s %-10s %-8s", ordering, style, mode);
          for (int n : report.sizes) {
            const GroupResult* g = Find(report, n, ordering, style, mode);
            out << absl::StrFormat(" %8s", g ? Ratio(g->series.sequential.p50_us,
                                                     base->series.sequential.p50_us)
                                             : "-");
          }
          out << "\n";
        }
      }
    }
  }

  // Failover.
  if (!report.failovers.empty()) {
    out << "\n== failover: sequential wait-for-majority calls, signal to the victim mid-stream ==\n";
    out << absl::StrFormat("%-23s %-9s %-6s %-10s %-6s %2s %7s %7s %6s %9s %6s %8s %8s\n",
                           "scenario", "ordering", "style", "signal", "client", "n", "ok_pre",
                           "ok_post", "failed", "stall_ms", "x_susp", "p50_pre", "p50_post");
    for (const FailoverResult& f : report.failovers) {
      out << absl::StrFormat("%-23s %-9s %-6s %-10s %-6s %2d %7d %7d %6d %9s %6s %8s %8s\n",
                             f.scenario, f.ordering, f.style, absl::StrCat(f.signal, " ", f.victim),
                             f.attached_to, f.n, f.ok_before, f.ok_after, f.failed,
                             Num(f.stall_ms, 1), Ratio(f.stall_ms, f.suspect_timeout_ms),
                             Num(f.p50_gap_before_ms, 2), Num(f.p50_gap_after_ms, 2));
    }
    out << "  stall_ms = longest gap between consecutive completed calls ending after the signal; "
           "x_susp = stall / suspect_timeout_ms (50, the default); p50_pre/p50_post = median ms between "
           "completions (= call latency) before the signal and after it; longest gaps before the signal:";
    for (const FailoverResult& f : report.failovers) out << " " << Num(f.baseline_gap_ms, 1);
    out << " ms\n";
    for (const FailoverResult& f : report.failovers) {
      if (!f.first_error.empty()) out << "  first error, " << f.scenario << " " << f.ordering << ": " << f.first_error << "\n";
      if (!f.note.empty()) out << "  note, " << f.scenario << " " << f.ordering << ": " << f.note << "\n";
      if (!f.load.empty()) out << "  load, " << f.scenario << " " << f.ordering << ": " << f.load << "\n";
    }
  }

  {
    const ExclusionResult& x = report.exclusion;
    if (x.measured || !x.note.empty()) {
      out << "\n== failover: wait-for-all across an exclusion (consensus, closed, n=3, SIGKILL n1, "
             "exclude_timeout_ms "
          << Num(x.exclude_timeout_ms, 0) << ") ==\n";
      if (x.measured) {
        out << "  ok before the kill " << x.ok_before << "; first success after it at "
            << (x.resumed_ms >= 0 ? absl::StrCat(Num(x.resumed_ms, 0), " ms with ", x.resumed_replies,
                                                 " of ", x.resumed_wanted, " replies")
                                  : std::string("-"))
            << "; longest successful call " << Num(x.waited_ms, 0) << " ms; " << x.failed_fast
            << " calls refused at once while n1 was suspected, not yet excluded\n";
      }
      if (!x.first_error.empty()) out << "  first refusal: " << x.first_error << "\n";
      if (!x.note.empty()) out << "  note: " << x.note << "\n";
    }
  }

  // etcd.
  {
    const EtcdResult& e = report.etcd;
    out << "\n== etcd " << e.version << ": 3 members on 127.0.0.1, data on tmpfs, etcd's "
        << "benchmark tool, put of " << report.payload_bytes << " B values ==\n";
    if (e.measured) {
      out << absl::StrFormat("%-22s %9s %9s %10s\n", "run", "p50_us", "p99_us", "ops/s");
      for (const EtcdRun* run : {&e.sequential, &e.concurrent}) {
        out << absl::StrFormat("%-22s %9s %9s %10s\n",
                               absl::StrCat("put, ", run->clients, " client(s)"), Num(run->p50_us),
                               Num(run->p99_us), Num(run->throughput));
      }
    } else {
      out << "etcd " << e.note << "\n";
    }
  }

  // JGroups, with Cohort's closed consensus n=3 calls of this run beside it.
  {
    const JGroupsResult& g = report.jgroups;
    out << "\n== JGroups " << g.version << ": 3 members + a driver member on 127.0.0.1, TCP, "
        << "SEQUENCER (total order), RpcDispatcher echo of " << report.payload_bytes
        << " B, driver multicasts ==\n";
    if (g.measured) {
      out << absl::StrFormat("%-8s %9s %9s %10s %10s %16s %16s\n", "mode", "p50_us", "p99_us",
                             "ops/s@1", "ops/s@64", "cohort_p50/jg", "cohort_ops64/jg");
      for (const auto& [name, mode] : {std::pair<const char*, const JGroupsMode*>{"first", &g.first},
                                       {"all", &g.all}}) {
        const GroupResult* c = Find(report, 3, "consensus", "closed", name);
        std::string p50_ratio = "-", ops_ratio = "-";
        if (c != nullptr && c->series.sequential.calls > 0 && mode->p50_us > 0) {
          p50_ratio = Num(c->series.sequential.p50_us / mode->p50_us, 2);
        }
        const int i64 = CallerIndex(report, 64);
        double ops64 = c != nullptr && i64 >= 0 && static_cast<size_t>(i64) <
                                                        c->series.by_callers.size()
                           ? c->series.by_callers[i64].throughput
                           : 0;
        if (ops64 > 0 && mode->ops_64 > 0) ops_ratio = Num(ops64 / mode->ops_64, 2);
        out << absl::StrFormat("%-8s %9s %9s %10s %10s %16s %16s\n", name, Num(mode->p50_us),
                               Num(mode->p99_us), Num(mode->ops_1), Num(mode->ops_64), p50_ratio,
                               ops_ratio);
      }
      out << "  cohort_p50/jg: Cohort's closed consensus n=3 p50 of the same mode / JGroups p50 "
             "(< 1: Cohort faster); cohort_ops64/jg: calls/s with 64 callers, Cohort / JGroups\n";
      for (const auto& [name, f] :
           {std::pair<const char*, const JGroupsFailover*>{"SIGKILL", &g.kill},
            {"SIGSTOP", &g.freeze}}) {
        if (!f->measured) {
          out << "  failover " << name << " of the coordinator/sequencer: not measured\n";
          continue;
        }
        out << absl::StrFormat(
            "  failover %s of the coordinator/sequencer, wait-for-majority stream: stall %s%s ms"
            " (ok before %d, after %d, failed %d)\n",
            name, f->recovered ? "" : "> ", Num(f->stall_ms), f->ok_before, f->ok_after,
            f->failed);
      }
    } else {
      out << "JGroups " << g.note << "\n";
    }
  }

  // Heap allocations per call.
  if (!report.allocations.empty()) {
    out << "\n== heap allocations per call (closed all: client at n2; open first: client at"
           " n(N+1), outside the group; operator new counts; issue 7: none per message) ==\n";
    out << "n  ordering   path        calls  per daemon (n1..n(N+1))                    daemons"
           "  client+servants (Invoke)  16 in flight (InvokeAsync)  status read (subtracted)\n";
    for (const AllocationResult& a : report.allocations) {
      if (!a.note.empty()) {
        out << absl::StrFormat("%-2d %-10s %-10s  not measured: %s\n", a.n, a.ordering, a.path,
                               a.note);
        continue;
      }
      std::string each;
      for (double d : a.per_daemon) absl::StrAppend(&each, each.empty() ? "" : " / ", Num(d, 1));
      out << absl::StrFormat("%-2d %-10s %-10s  %5d  %-42s %7s  %-24s  %-26s  %s\n", a.n,
                             a.ordering, a.path, a.calls, each, Num(a.daemons, 1),
                             absl::StrCat(Num(a.client_and_servants, 1), " (",
                                          Num(a.invoke_by_value, 1), ")"),
                             absl::StrCat(Num(a.pipelined_into, 1), " (",
                                          Num(a.pipelined_by_value, 1), ")"),
                             Num(a.status_read, 0));
    }
  }

  // Memory.
  if (report.memory.measured || !report.memory.note.empty()) {
    const MemoryResult& m = report.memory;
    out << "\n== memory: one cohortd, RSS (VmRSS) delta ==\n";
    out << absl::StrFormat("attached NSOs: %d in %.1f s, RSS %s -> %s KiB: %s bytes per NSO\n",
                           m.nsos, m.attach_seconds, Num(m.nso_rss_before_kib),
                           Num(m.nso_rss_after_kib), Num(m.bytes_per_nso));
    if (m.groups > 0) {
      out << absl::StrFormat(
          "groups: 1 vs %d single-member event-driven groups, RSS %s vs %s KiB: %s bytes per "
          "group\n",
          m.groups, Num(m.one_group_rss_kib), Num(m.many_groups_rss_kib), Num(m.bytes_per_group));
    }
    if (!m.note.empty()) out << "  note: " << m.note << "\n";
  }

  // Targets.
  out << "\n== issue 7 targets (n=3 unless stated; ratios from this run) ==\n";
  for (const Target& t : Targets(report)) {
    std::string measured = t.measured;
    std::string verdict = t.verdict;
    if (!t.paired.empty()) {
      absl::StrAppend(&measured, " (", t.paired, ")");
      absl::StrAppend(&verdict, " (paired: ", t.paired_verdict, ")");
    }
    out << absl::StrFormat("%-82s %-17s %-9s %s\n", t.what, measured, t.limit, verdict);
  }
  out << "\ntotal " << Num(report.total_seconds, 1) << " s\n";
}

bool WriteJson(const Report& report, const std::string& path, std::string* error) {
  std::ostringstream j;
  j << "{\n  \"tool\": \"cohort-bench\",\n  \"started_at\": " << JsonString(report.started_at)
    << ",\n  \"command_line\": " << JsonString(report.command_line)
    << ",\n  \"quick\": " << (report.quick ? "true" : "false")
    << ",\n  \"netlab_delay_ms\": " << report.netlab_delay_ms
    << ",\n  \"payload_bytes\": " << report.payload_bytes
    << ",\n  \"sizes\": [" << absl::StrJoin(report.sizes, ", ") << "]"
    << ",\n  \"callers\": [" << absl::StrJoin(report.callers, ", ") << "]"
    << ",\n  \"sequential_max_calls\": " << report.seq_calls
    << ",\n  \"sequential_max_seconds\": " << report.seq_time_s
    << ",\n  \"throughput_window_seconds\": " << report.window_s
    << ",\n  \"total_seconds\": " << Num(report.total_seconds, 1) << ",\n  \"floors\": {";
  bool first = true;
  for (const FloorResult* floor : {&report.grpc, &report.tcp, &report.tls}) {
    if (!floor->measured) continue;
    j << (first ? "" : ",") << "\n    " << JsonString(floor->name) << ": "
      << JsonSeries(floor->series, report);
    first = false;
  }
  j << "\n  },\n  \"groups\": [";
  first = true;
  for (const GroupResult& g : report.groups) {
    j << (first ? "" : ",") << "\n    {\"n\": " << g.n << ", \"ordering\": " << JsonString(g.ordering)
      << ", \"style\": " << JsonString(g.style) << ", \"mode\": " << JsonString(g.mode)
      << ", \"client_attached_to\": " << JsonString(g.attached_to);
    if (!g.paired_ratios.empty()) {
      j << ", \"paired_ratio\": " << Num(g.paired_ratio, 3) << ", \"paired_ratios\": [";
      for (size_t i = 0; i < g.paired_ratios.size(); ++i) {
        j << (i ? ", " : "") << Num(g.paired_ratios[i], 3);
      }
      j << "]";
    }
    j << ", \"results\": " << JsonSeries(g.series, report) << "}";
    first = false;
  }
  j << "\n  ],\n  \"failover\": [";
  first = true;
  for (const FailoverResult& f : report.failovers) {
    j << (first ? "" : ",") << "\n    {\"scenario\": " << JsonString(f.scenario)
      << ", \"ordering\": " << JsonString(f.ordering) << ", \"style\": " << JsonString(f.style)
      << ", \"signal\": " << JsonString(f.signal) << ", \"victim\": " << JsonString(f.victim)
      << ", \"client_attached_to\": " << JsonString(f.attached_to)
      << ", \"load\": " << JsonString(f.load) << ", \"n\": " << f.n
      << ", \"ok_before\": " << f.ok_before << ", \"ok_after\": " << f.ok_after
      << ", \"failed\": " << f.failed << ", \"baseline_gap_ms\": " << Num(f.baseline_gap_ms, 2)
      << ", \"stall_ms\": " << Num(f.stall_ms, 2)
      << ", \"p50_gap_before_ms\": " << Num(f.p50_gap_before_ms, 3)
      << ", \"p50_gap_after_ms\": " << Num(f.p50_gap_after_ms, 3)
      << ", \"suspect_timeout_ms\": " << Num(f.suspect_timeout_ms, 0)
      << ", \"first_error\": " << JsonString(f.first_error) << ", \"note\": " << JsonString(f.note)
      << "}";
    first = false;
  }
  j << "\n  ],\n  \"floor_p50_end\": {\"grpc_echo\": " << Num(report.grpc_p50_end, 1)
    << ", \"tcp_pingpong\": " << Num(report.tcp_p50_end, 1) << ", \"ratios_divide_by\": {\"grpc_echo\": "
    << Num(FloorP50(report.grpc, report.grpc_p50_end), 1) << ", \"tcp_pingpong\": "
    << Num(FloorP50(report.tcp, report.tcp_p50_end), 1) << "}}";
  const ExclusionResult& x = report.exclusion;
  j << ",\n  \"exclusion\": {\"measured\": " << (x.measured ? "true" : "false")
    << ", \"exclude_timeout_ms\": " << Num(x.exclude_timeout_ms, 0) << ", \"ok_before\": " << x.ok_before
    << ", \"waited_ms\": " << Num(x.waited_ms, 1) << ", \"resumed_ms\": " << Num(x.resumed_ms, 1)
    << ", \"resumed_replies\": " << x.resumed_replies << ", \"resumed_wanted\": " << x.resumed_wanted
    << ", \"failed_fast\": " << x.failed_fast << ", \"first_error\": " << JsonString(x.first_error)
    << ", \"note\": " << JsonString(x.note) << "}";
  const EtcdResult& e = report.etcd;
  j << ",\n  \"etcd\": {\"measured\": " << (e.measured ? "true" : "false")
    << ", \"version\": " << JsonString(e.version) << ", \"note\": " << JsonString(e.note);
  for (const auto& [name, run] : {std::pair<const char*, const EtcdRun*>{"sequential", &e.sequential},
                                  {"clients_64", &e.concurrent}}) {
    j << ", " << JsonString(name) << ": {\"clients\": " << run->clients << ", \"total\": "
      << run->total << ", \"p50_us\": " << Num(run->p50_us, 1) << ", \"p99_us\": "
      << Num(run->p99_us, 1) << ", \"ops_per_s\": " << Num(run->throughput, 1) << "}";
  }
  j << "}";
  const JGroupsResult& jg = report.jgroups;
  j << ",\n  \"jgroups\": {\"measured\": " << (jg.measured ? "true" : "false")
    << ", \"version\": " << JsonString(jg.version) << ", \"note\": " << JsonString(jg.note);
  for (const auto& [name, mode] : {std::pair<const char*, const JGroupsMode*>{"first", &jg.first},
                                   {"all", &jg.all}}) {
    j << ", " << JsonString(name) << ": {\"p50_us\": " << Num(mode->p50_us, 1)
      << ", \"p99_us\": " << Num(mode->p99_us, 1) << ", \"ops_per_s_1\": " << Num(mode->ops_1, 1)
      << ", \"ops_per_s_64\": " << Num(mode->ops_64, 1) << "}";
  }
  for (const auto& [name, f] : {std::pair<const char*, const JGroupsFailover*>{"kill", &jg.kill},
                                {"freeze", &jg.freeze}}) {
    j << ", " << JsonString(name) << ": {\"measured\": " << (f->measured ? "true" : "false")
      << ", \"stall_ms\": " << Num(f->stall_ms, 1)
      << ", \"recovered\": " << (f->recovered ? "true" : "false")
      << ", \"ok_before\": " << f->ok_before << ", \"ok_after\": " << f->ok_after
      << ", \"failed\": " << f->failed << ", \"after_ms\": " << jg.failover_after_ms << "}";
  }
  j << "}";
  j << ",\n  \"allocations\": [";
  first = true;
  for (const AllocationResult& a : report.allocations) {
    j << (first ? "" : ",") << "\n    {\"n\": " << a.n << ", \"ordering\": " << JsonString(a.ordering)
      << ", \"path\": " << JsonString(a.path) << ", \"calls\": " << a.calls
      << ", \"per_daemon\": [";
    for (size_t i = 0; i < a.per_daemon.size(); ++i) {
      j << (i ? ", " : "") << Num(a.per_daemon[i], 2);
    }
    j << "], \"daemons\": " << Num(a.daemons, 2)
      << ", \"client_and_servants\": " << Num(a.client_and_servants, 2)
      << ", \"invoke_by_value\": " << Num(a.invoke_by_value, 2)
      << ", \"pipelined_into\": " << Num(a.pipelined_into, 2)
      << ", \"pipelined_by_value\": " << Num(a.pipelined_by_value, 2)
      << ", \"status_read\": " << Num(a.status_read, 0)
      << ", \"note\": " << JsonString(a.note) << "}";
    first = false;
  }
  j << "]";
  const MemoryResult& m = report.memory;
  j << ",\n  \"memory\": {\"measured\": " << (m.measured ? "true" : "false")
    << ", \"nsos\": " << m.nsos << ", \"nso_rss_before_kib\": " << Num(m.nso_rss_before_kib)
    << ", \"nso_rss_after_kib\": " << Num(m.nso_rss_after_kib)
    << ", \"bytes_per_nso\": " << Num(m.bytes_per_nso, 1) << ", \"groups\": " << m.groups
    << ", \"one_group_rss_kib\": " << Num(m.one_group_rss_kib)
    << ", \"many_groups_rss_kib\": " << Num(m.many_groups_rss_kib)
    << ", \"bytes_per_group\": " << Num(m.bytes_per_group, 1)
    << ", \"note\": " << JsonString(m.note) << "}";
  j << ",\n  \"targets\": [";
  first = true;
  for (const Target& t : Targets(report)) {
    j << (first ? "" : ",") << "\n    {\"what\": " << JsonString(t.what)
      << ", \"measured\": " << JsonString(t.measured) << ", \"limit\": " << JsonString(t.limit)
      << ", \"verdict\": " << JsonString(t.verdict);
    if (!t.paired.empty()) {
      j << ", \"paired\": " << JsonString(t.paired)
        << ", \"paired_verdict\": " << JsonString(t.paired_verdict);
    }
    j << "}";
    first = false;
  }
  j << "\n  ]\n}\n";
  std::ofstream file(path);
  file << j.str();
  if (!file.good()) {
    *error = absl::StrCat("cannot write ", path);
    return false;
  }
  return true;
}

std::string WritePlots(const Report& report, const std::string& dir) {
  std::string csv_path = dir + "/bench.csv";
  std::ofstream csv(csv_path);
  csv << "series,callers,p50_us,p99_us,throughput\n";
  std::vector<std::string> series_names;
  auto emit = [&](const std::string& name, const Series& s) {
    series_names.push_back(name);
    for (size_t i = 0; i < s.by_callers.size(); ++i) {
      const LoadResult& r = s.by_callers[i];
      csv << name << "," << r.callers << "," << Num(r.p50_us, 1) << "," << Num(r.p99_us, 1) << ","
          << Num(ShownThroughput(s, i), 1) << "\n";
    }
  };
  if (report.grpc.measured) emit("grpc_echo", report.grpc.series);
  if (report.tcp.measured) emit("tcp_pingpong", report.tcp.series);
  for (const GroupResult& g : report.groups) {
    if (g.mode == "one_way") continue;
    emit(absl::StrCat(g.ordering, "-", g.style, "-", g.mode, "-n", g.n), g.series);
  }
  csv.close();
  // Like 003 section 5's graphs (RPC time and throughput against the number of clients): one
  // chart per group size with the floors, each ordering x style x mode a line; the embedded rows
  // go with their n.
  std::vector<int> sizes = report.sizes;
  for (const GroupResult& g : report.groups) {
    if (std::find(sizes.begin(), sizes.end(), g.n) == sizes.end()) sizes.push_back(g.n);
  }
  std::ofstream gp(dir + "/bench.gp");
  gp << "set datafile separator ','\nset terminal pngcairo size 1400,900 font ',10'\n"
        "set termoption noenhanced\nset key outside right\nset grid\nset xlabel 'concurrent callers'\nset logscale x 2\n";
  std::vector<std::string> pngs;
  for (int n : sizes) {
    std::vector<std::string> lines = {"grpc_echo", "tcp_pingpong"};
    for (const std::string& name : series_names) {
      if (absl::EndsWith(name, absl::StrCat("-n", n))) lines.push_back(name);
    }
    for (const auto& [column, metric, label, log_y] :
         {std::tuple<int, const char*, const char*, bool>{3, "latency", "p50 latency (us)", true},
          {5, "throughput", "throughput (calls/s)", true}}) {
      std::string png = absl::StrCat(dir, "/", metric, "-n", n, ".png");
      pngs.push_back(png);
      gp << "set output '" << png << "'\nset ylabel '" << label << "'\n"
         << (log_y ? "set logscale y\n" : "unset logscale y\n")
         << "set title '" << metric << " against callers, n = " << n
         << " (payload " << report.payload_bytes << " B, loopback)'\nplot ";
      bool first = true;
      for (const std::string& name : lines) {
        if (std::find(series_names.begin(), series_names.end(), name) == series_names.end()) continue;
        gp << (first ? "" : ", \\\n     ") << "'" << csv_path << "' using 2:(strcol(1) eq '"
           << name << "' ? $" << column << " : 1/0) with linespoints title '" << name << "'";
        first = false;
      }
      gp << "\n";
    }
  }
  gp.close();
  if (std::system("command -v gnuplot >/dev/null 2>&1") == 0) {
    std::string command = absl::StrCat("gnuplot '", dir, "/bench.gp' 2>/dev/null");
    if (std::system(command.c_str()) == 0) {
      return absl::StrCat("plots: ", absl::StrJoin(pngs, " "), " (data ", csv_path, ")");
    }
    return absl::StrCat("plots: gnuplot failed; data in ", csv_path, ", script ", dir, "/bench.gp");
  }
  return absl::StrCat("plots: no PNG (gnuplot is not installed; `apt-get install gnuplot-nox` ",
                      "then `gnuplot ", dir, "/bench.gp`); data in ", csv_path);
}

}  // namespace cohort::bench
