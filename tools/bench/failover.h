// Failover: sequential wait-for-majority calls while n1, in the role of a scenario (coordinator,
// sequencer, request manager, orderer), is killed -9 or frozen, with the stall they see; and
// wait-for-all calls across the exclusion of a killed member (Report::failovers, exclusion).
#ifndef COHORT_TOOLS_BENCH_FAILOVER_H_
#define COHORT_TOOLS_BENCH_FAILOVER_H_

#include <string>

#include "tools/bench/options.h"
#include "tools/bench/report.h"

namespace cohort::bench {

// Every scenario on a cluster of its own in `dir`, then the exclusion run.
void MeasureFailover(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_FAILOVER_H_
