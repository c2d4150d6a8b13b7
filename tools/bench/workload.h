// Bounded closed-loop workloads: C caller threads each issue a call as soon as the previous one
// returns (003 section 5.1), until a call budget or a time limit is reached, whichever is first.
#ifndef COHORT_TOOLS_BENCH_WORKLOAD_H_
#define COHORT_TOOLS_BENCH_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace cohort::bench {

// One call; true if it succeeded, else false with *error set. Each caller thread gets its own
// CallFn from the factory (so it may own a connection), created before timing starts.
using CallFn = std::function<bool(std::string* error)>;
using CallFactory = std::function<CallFn(int caller)>;

struct LoadResult {
  int callers = 0;
  int64_t calls = 0;    // successful calls
  int64_t errors = 0;   // failed calls
  double seconds = 0;   // wall time of the measured window
  double p50_us = 0;    // latency of successful calls
  double p99_us = 0;
  double mean_us = 0;
  double throughput = 0;  // successful calls per second
  std::string first_error;
};

struct LoadLimits {
  int64_t max_calls = INT64_MAX;  // over all callers
  absl::Duration max_time = absl::Seconds(1);
  int64_t warmup_calls = 0;       // per caller, not measured
};

LoadResult RunLoad(int callers, const LoadLimits& limits, const CallFactory& factory);

// One asynchronous call in `slot` (0 .. in_flight - 1; one call per slot at a time): starts it
// and returns; `done` runs exactly once, in any thread, with whether it succeeded and, if not,
// why. A slot's calls get the same `done` object (so that a call kept per slot, Client::
// InvokeAsyncInto's AsyncCall, allocates nothing per call).
using AsyncDone = std::function<void(bool ok, const std::string& error)>;
using AsyncCallFn = std::function<void(int slot, const AsyncDone& done)>;

// ONE thread keeps `in_flight` calls outstanding (Client::InvokeAsyncInto): each completion
// starts the next in its slot, until the call budget or the time limit. `callers` in the result
// is `in_flight`.
LoadResult RunAsyncLoad(int in_flight, const LoadLimits& limits, const AsyncCallFn& call);

// The latencies and errors of a run as its result.
LoadResult Summarize(int callers, std::vector<double> latencies, int64_t errors,
                     std::string first_error, double seconds);

// Percentile (0..100) of `values` (sorted in place), nearest-rank.
double Percentile(std::vector<double>* values, double percentile);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_WORKLOAD_H_
