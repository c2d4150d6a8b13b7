// The second peer comparison of issue 7: a JGroups 5 group (tools/bench/jgroups/JGroupsBench.java)
// of 3 members on loopback over TCP with SEQUENCER (total order), each with an echo method behind
// an RpcDispatcher, and a driver member multicasting the calls: wait-for-first and wait-for-all,
// sequential (p50, p99) and with 64 callers, in the same run as Cohort. Built by
// tools/bench/jgroups-build (JGroups from Maven Central); without it one line says so.
#ifndef COHORT_TOOLS_BENCH_JGROUPS_H_
#define COHORT_TOOLS_BENCH_JGROUPS_H_

#include <cstdint>
#include <string>

namespace cohort::bench {

struct JGroupsMode {
  double p50_us = 0;
  double p99_us = 0;
  double ops_1 = 0;   // calls per second, 1 caller
  double ops_64 = 0;  // 64 callers
};

// A stream of sequential wait-for-majority calls while the first member (JGroups' coordinator and
// sequencer) is killed -9 or frozen with SIGSTOP, as cohort-bench's own failover scenarios.
struct JGroupsFailover {
  bool measured = false;
  double stall_ms = 0;     // longest gap between completions that ends after the signal
  bool recovered = false;  // false: no call completed after the signal (stall_ms: a lower bound)
  int64_t ok_before = 0, ok_after = 0, failed = 0;
};

struct JGroupsResult {
  bool measured = false;
  std::string version;
  std::string note;  // why not measured
  JGroupsMode first;
  JGroupsMode all;
  JGroupsFailover kill;    // SIGKILL of the coordinator/sequencer
  JGroupsFailover freeze;  // SIGSTOP of it
  int failover_after_ms = 0;  // how long the stream ran after the signal
};

// `dir` holds jgroups.jar and JGroupsBench.class (tools/bench/jgroups-build); logs go to
// `log_dir` (exists).
JGroupsResult MeasureJGroups(const std::string& dir, const std::string& log_dir, int payload_bytes,
                             bool quick);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_JGROUPS_H_
