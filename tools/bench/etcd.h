// The peer comparison of issue 7: a 3-member etcd cluster on loopback (data on tmpfs) driven by
// etcd's own benchmark tool, sequential puts and 64-client puts, in the same run as Cohort.
// The binaries come from tools/bench/etcd-build (etcd from the Go module proxy); without them the
// bench says so in one line and skips.
#ifndef COHORT_TOOLS_BENCH_ETCD_H_
#define COHORT_TOOLS_BENCH_ETCD_H_

#include <string>

namespace cohort::bench {

struct EtcdRun {
  int clients = 0;
  int total = 0;         // puts issued
  double p50_us = 0;
  double p99_us = 0;
  double throughput = 0;  // puts per second (the tool's Requests/sec)
};

struct EtcdResult {
  bool measured = false;
  std::string version;
  std::string note;  // why not measured, or remarks
  EtcdRun sequential;  // 1 client, 1 connection
  EtcdRun concurrent;  // 64 clients, 64 connections
};

// `bin_dir` holds `etcd` and `etcd-benchmark`; logs go to `log_dir` (exists); `value_bytes` is
// the put's value size.
EtcdResult MeasureEtcd(const std::string& bin_dir, const std::string& log_dir, int value_bytes,
                       bool quick);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_ETCD_H_
