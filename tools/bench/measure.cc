#include "tools/bench/measure.h"

#include <cstdint>
#include <iostream>

#include "absl/time/time.h"

namespace cohort::bench {

void Progress(const std::string& line) { std::cerr << "[cohort-bench] " << line << std::endl; }

Series Measure(const Options& options, const CallFactory& factory) {
  Series series;
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  series.sequential = RunLoad(1, sequential, factory);
  for (int callers : options.callers) {
    if (callers == 1) {
      series.by_callers.push_back(series.sequential);
      continue;
    }
    LoadLimits window{INT64_MAX, absl::Milliseconds(options.window_ms), 2};
    series.by_callers.push_back(RunLoad(callers, window, factory));
  }
  return series;
}

}  // namespace cohort::bench
