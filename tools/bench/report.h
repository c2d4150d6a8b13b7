// Results of one cohort-bench run: the text table (with ratios to the floors of the same run),
// the issue-7 target check, the --json file and the --plot data.
#ifndef COHORT_TOOLS_BENCH_REPORT_H_
#define COHORT_TOOLS_BENCH_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "tools/bench/allocations.h"
#include "tools/bench/etcd.h"
#include "tools/bench/jgroups.h"
#include "tools/bench/memory.h"
#include "tools/bench/workload.h"

namespace cohort::bench {

// Sequential latency (one caller, call budget + time limit) and closed-loop throughput per
// number of callers; by_callers[i] belongs to Report::callers[i].
struct Series {
  LoadResult sequential;
  std::vector<LoadResult> by_callers;
  // One-way only: requests delivered at a servant per second (accept + order + deliver), per
  // number of callers; LoadResult::throughput is the accept rate.
  std::vector<double> delivered_per_s;
};

struct FloorResult {
  std::string name;  // grpc_echo | tcp_pingpong
  bool measured = false;
  Series series;
};

struct GroupResult {
  int n = 0;
  std::string ordering;  // consensus | sequencer
  std::string style;     // closed | open
  std::string mode;      // first | majority | all | one_way
  std::string attached_to;
  Series series;
  // Target rows (n = 3, sequential): p50 of this row / p50 of the gRPC echo, each measured right
  // after the other in kPairedRounds alternations (the echo drifts over a run), and their median.
  std::vector<double> paired_ratios;
  double paired_ratio = 0;
};

struct FailoverResult {
  std::string scenario;   // e.g. coordinator-kill
  std::string ordering;
  std::string style;
  std::string signal;     // SIGKILL | SIGSTOP
  std::string victim;     // n1
  std::string attached_to;
  int n = 0;
  int64_t ok_before = 0, ok_after = 0, failed = 0;
  double baseline_gap_ms = 0;  // longest gap between completions before the signal
  double stall_ms = 0;         // longest gap between completions that ends after the signal
  double p50_gap_before_ms = 0;  // median gap (= call latency) before the signal
  double p50_gap_after_ms = 0;   // median gap after the stall, in the degraded view
  double suspect_timeout_ms = 50;
  std::string first_error;
  std::string note;
  std::string load;  // other calls during the scenario, if any
};

// Wait-for-all across an exclusion (n = 3, consensus, closed, default timeouts): sequential
// wait-for-all calls with a 15 s deadline while n1 is killed -9; calls that cannot be met fail
// fast (UNAVAILABLE while a member is suspected) and are retried after 20 ms.
struct ExclusionResult {
  bool measured = false;
  double exclude_timeout_ms = 10000;
  int64_t ok_before = 0;
  double waited_ms = 0;     // the longest successful call that ended after the kill
  double resumed_ms = -1;   // kill -> the first success counted against the view without n1
  uint32_t resumed_replies = 0, resumed_wanted = 0;
  int64_t failed_fast = 0;  // calls refused while n1 was suspected but not yet excluded
  std::string first_error;
  std::string note;
};

struct Report {
  std::string started_at;
  std::string command_line;
  bool quick = false;
  int64_t netlab_delay_ms = -1;  // >= 0: daemons in netlab hosts with this delay (--netlab)
  int payload_bytes = 0;
  std::vector<int> sizes;
  std::vector<int> callers;
  double seq_time_s = 0, window_s = 0;
  int64_t seq_calls = 0;
  FloorResult grpc, tcp;
  FloorResult tls;  // tls_pingpong: --tls runs only (tools/bench/tls_floor.h)
  // The floors' sequential p50 measured again at the end of the run (0: not measured). On an idle
  // VM a ping-pong's p50 moves with how deeply idle the CPUs are, so the start and end values are
  // both shown, and the p50 ratios (p50/grpc, p50/tcp, the latency targets) divide by their mean.
  double grpc_p50_end = 0, tcp_p50_end = 0;
  std::vector<GroupResult> groups;
  std::vector<AllocationResult> allocations;  // per (n, ordering), with the group rows
  std::vector<FailoverResult> failovers;
  ExclusionResult exclusion;  // measured with the failovers
  MemoryResult memory;  // measured unless --skip memory
  EtcdResult etcd;      // measured unless --skip etcd or etcd is not built
  JGroupsResult jgroups;  // measured unless --skip jgroups or JGroups is not built
  double total_seconds = 0;
};

void PrintReport(const Report& report, std::ostream& out);
// The floor p50 the ratios divide by: the mean of the start and end values (start alone if no end).
double FloorP50(const FloorResult& floor, double end_p50);
bool WriteJson(const Report& report, const std::string& path, std::string* error);
// Writes DIR/bench.csv and DIR/bench.gp; runs gnuplot (PNG) if it is installed. Returns a line
// saying what it did.
std::string WritePlots(const Report& report, const std::string& dir);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_REPORT_H_
