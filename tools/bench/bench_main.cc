// cohort-bench: measures Cohort against its floors in one run (issue 7).
//
//   cohort-bench [--quick] [--sizes 3,5,7] [--callers 1,4,16,64,256] [--payload 100] [--json FILE]
//                [--plot DIR] [--skip floors,groups,embedded,failover,memory,etcd,jgroups]
//                [--cohortd PATH]
//
// 1. Floors: a plain gRPC unary echo and a raw TCP ping-pong to a child process.
// 2. Its own cohortd daemons on loopback (n members + 1 non-member), one in-process echo servant
//    per member, every mode x {consensus, sequencer} x {closed, open} x n. closed: the client is
//    attached to member n2 and calls with Style::kClosed; open: the client is attached to the
//    extra daemon, which hosts no member, and calls with Style::kOpen (through a request manager;
//    wait-for-first uses asynchronous forwarding).
// 3. Embedded mode: the same calls from a member node running inside the bench process; and with
//    no cohortd at all, every node an application process with its NSO and servant embedded.
// 4. Failover: sequential wait-for-majority calls while n1 is killed -9 (or frozen).
// 5. Memory: bytes per idle attached NSO and per idle group (RSS delta, tools/bench/memory.h).
// 6. etcd: 3 members with etcd's own benchmark tool, sequential and 64-client puts (etcd.h).
// 7. JGroups: 3 members with SEQUENCER and a driver member, wait-for-first/all (jgroups.h).
// Every workload is bounded by a call budget and a time limit; every child dies with the bench.
// This file runs the parts in order; each lives in a file of its own: options.h (the command
// line), floor_rows.h, group_rows.h (with group_calls.h and paired.h), embedded_rows.h,
// failover.h, memory.h, etcd.h, jgroups.h and netlab.h.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/bench/daemons.h"
#include "tools/bench/embedded_rows.h"
#include "tools/bench/etcd.h"
#include "tools/bench/failover.h"
#include "tools/bench/floor_rows.h"
#include "tools/bench/floors.h"
#include "tools/bench/group_rows.h"
#include "tools/bench/jgroups.h"
#include "tools/bench/measure.h"
#include "tools/bench/memory.h"
#include "tools/bench/netlab.h"
#include "tools/bench/options.h"
#include "tools/bench/paired.h"
#include "tools/bench/process.h"
#include "tools/bench/report.h"
#include "tools/bench/tls_floor.h"
#include "tools/test_ca.h"

namespace cohort::bench {
namespace {

int Main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as cohortd does
  if (argc == 5 && std::string(argv[1]) == "--role") {
    int port = 0;
    if (!absl::SimpleAtoi(argv[4], &port)) return 2;
    if (std::string(argv[2]) == "echo-server") return RunGrpcEchoServer(port);
    if (std::string(argv[2]) == "tcp-server") return RunTcpEchoServer(port);
    return 2;
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "tls-server") {
    int port = 0;
    if (!absl::SimpleAtoi(argv[4], &port)) return 2;
    return RunTlsEchoServer(port, argv[6]);
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "echo-servant") {
    return RunEchoServant(argv[4], argv[6]);
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "app-member") {
    return RunAppMember(argv[4], argv[6]);
  }
  Options options;
  if (int code = ParseOptions(argc, argv, &options); code != 0) return code < 0 ? 0 : code;
  InstallChildCleanup();
  if (options.netlab_delay_ms >= 0 && !options.netlab_inside) return RunInNetlab(options, argc, argv);

  Report report;
  absl::Time begin = absl::Now();
  report.started_at = absl::FormatTime(absl::RFC3339_sec, begin, absl::UTCTimeZone());
  std::vector<std::string> args(argv, argv + argc);
  report.command_line = absl::StrJoin(args, " ");
  report.quick = options.quick;
  report.payload_bytes = options.payload;
  report.sizes = options.sizes;
  report.callers = options.callers;
  report.seq_calls = options.seq_calls;
  report.seq_time_s = options.seq_ms / 1000.0;
  report.window_s = options.window_ms / 1000.0;

  std::string cohortd;
  if (!options.skip.count("groups") || !options.skip.count("embedded") ||
      !options.skip.count("failover") || !options.skip.count("memory")) {
    cohortd = FindCohortd(options.cohortd);
    if (cohortd.empty()) {
      std::cerr << "cohort-bench: cannot find cohortd; build //tools:cohortd or pass --cohortd\n";
      return 2;
    }
  }
  std::string dir = MakeTempDir();
  if (dir.empty()) {
    std::cerr << "cohort-bench: cannot create a temporary directory\n";
    return 1;
  }
  if (options.tls) {
    std::string make_ca = FindTool("make-test-ca");
    std::string ca_dir = dir + "/tls";
    if (make_ca.empty() || std::system((make_ca + " " + ca_dir + " >/dev/null").c_str()) != 0) {
      std::cerr << "cohort-bench: --tls: tools/make-test-ca failed\n";
      return 1;
    }
    g_tls_ca = ca_dir + "/ca.pem";
    SetDaemonTlsYaml(TestCaTlsYaml(ca_dir));
    for (const char* part : {"embedded", "apps", "memory"}) options.skip.insert(part);
  }
  if (!options.skip.count("floors")) MeasureFloors(options, &report);
  if (!options.skip.count("floors") && !options.netlab_inside && options.netlab_delay_ms < 0) {
    StartPairingEcho(options);
  }
  std::optional<NetlabPlacement> placement;
  if (options.netlab_inside) {
    placement = NetlabPlacement{options.netlab, kNetlabNet};
    report.netlab_delay_ms = options.netlab_delay_ms;
    for (const char* part : {"embedded", "apps", "failover", "memory", "etcd", "jgroups"}) {
      options.skip.insert(part);
    }
  }
  if (!options.skip.count("groups")) {
    MeasureGroups(options, cohortd, dir, placement ? &*placement : nullptr, &report);
  }
  if (!options.skip.count("embedded")) MeasureEmbedded(options, cohortd, dir, &report);
  if (!options.skip.count("apps")) MeasureApps(options, dir, &report);
  if (!options.skip.count("etcd")) {
    Progress("etcd: 3 members, sequential and 64-client puts");
    std::string etcd_logs = dir + "/etcd";
    std::filesystem::create_directories(etcd_logs);
    report.etcd = MeasureEtcd(options.etcd_dir, etcd_logs, options.payload, options.quick);
    if (!report.etcd.measured) Progress("etcd " + report.etcd.note);
  } else {
    report.etcd.note = "skipped (--skip etcd)";
  }
  if (!options.skip.count("jgroups")) {
    Progress("JGroups: 3 members + a driver, SEQUENCER, wait-for-first and wait-for-all");
    std::string jgroups_logs = dir + "/jgroups";
    std::filesystem::create_directories(jgroups_logs);
    report.jgroups =
        MeasureJGroups(options.jgroups_dir, jgroups_logs, options.payload, options.quick);
    if (!report.jgroups.measured) Progress("JGroups " + report.jgroups.note);
  } else {
    report.jgroups.note = "skipped (--skip jgroups)";
  }
  if (!options.skip.count("failover")) MeasureFailover(options, cohortd, dir, &report);
  if (!options.skip.count("memory")) {
    Progress(absl::StrCat("memory: ", options.memory_nsos, " idle NSOs, ", options.memory_groups,
                          " groups"));
    report.memory = MeasureMemory(cohortd, dir, options.memory_nsos, options.memory_groups);
  }
  StopPairingEcho();
  if (!options.skip.count("floors")) MeasureFloors(options, &report, /*again=*/true);
  KillAllChildren();
  report.total_seconds = absl::ToDoubleSeconds(absl::Now() - begin);

  PrintReport(report, std::cout);
  int code = 0;
  if (!options.json.empty()) {
    std::string error;
    if (WriteJson(report, options.json, &error)) {
      std::cout << "json: " << options.json << "\n";
    } else {
      std::cerr << "cohort-bench: " << error << "\n";
      code = 1;
    }
  }
  if (!options.plot.empty()) {
    std::filesystem::create_directories(options.plot);
    std::cout << WritePlots(report, options.plot) << "\n";
  }
  if (options.keep) {
    std::cout << "daemon configs and logs kept in " << dir << "\n";
  } else {
    RemoveTree(dir);
  }
  return code;
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) { return cohort::bench::Main(argc, argv); }
