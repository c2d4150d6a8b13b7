// The group rows against the bench's own cohortd daemons: per n and ordering, n members and one
// daemon that hosts none, an echo servant per member, and every reply mode from clients attached
// in each style (closed, closed-out, open, closed-async, closed-spread).
#ifndef COHORT_TOOLS_BENCH_GROUP_ROWS_H_
#define COHORT_TOOLS_BENCH_GROUP_ROWS_H_

#include <string>

#include "tools/bench/daemons.h"
#include "tools/bench/options.h"
#include "tools/bench/report.h"

namespace cohort::bench {

// With `placement` (--netlab) each daemon and its servant process run in their netlab host.
void MeasureGroups(const Options& options, const std::string& cohortd, const std::string& dir,
                   const NetlabPlacement* placement, Report* report);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_GROUP_ROWS_H_
