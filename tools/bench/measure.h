// What every part of a cohort-bench run shares: its progress lines on stderr, and the series of
// one kind of call (Measure).
#ifndef COHORT_TOOLS_BENCH_MEASURE_H_
#define COHORT_TOOLS_BENCH_MEASURE_H_

#include <string>

#include "tools/bench/options.h"
#include "tools/bench/report.h"
#include "tools/bench/workload.h"

namespace cohort::bench {

// A progress line on stderr: "[cohort-bench] " and `line`.
void Progress(const std::string& line);

// Sequential latency, then closed-loop throughput per number of callers (the sequential run
// doubles as the 1-caller throughput).
Series Measure(const Options& options, const CallFactory& factory);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_MEASURE_H_
