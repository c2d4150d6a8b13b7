// Paired ratios: each target row's sequential p50 divided by that of a gRPC echo measured right
// before it, over a few rounds (GroupResult::paired_ratios, paired_ratio), against one echo server
// kept for the whole run.
#ifndef COHORT_TOOLS_BENCH_PAIRED_H_
#define COHORT_TOOLS_BENCH_PAIRED_H_

#include <string>

#include "invocation/client.h"
#include "tools/bench/options.h"
#include "tools/bench/report.h"
#include "tools/bench/workload.h"

namespace cohort::bench {

// Starts the run's echo server (if it does not start: a progress line, and no paired ratios).
void StartPairingEcho(const Options& options);
void StopPairingEcho();

// The rows of issue 7's latency targets (report.cc, Targets): n = 3.
bool IsTargetRow(int n, const std::string& style, Mode mode);

constexpr int kPairedRounds = 5;

// kPairedRounds x (the echo's sequential p50, then the row's), each over up to 500 calls or
// 300 ms: the ratios and their median into `result`.
void MeasurePaired(const Options& options, const CallFactory& row, GroupResult* result);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_PAIRED_H_
