// The floors' rows of a run: the gRPC unary echo and the raw TCP ping-pong (floors.h) and, with
// --tls, the ping-pong over mutual TLS (tls_floor.h), each against a server child process.
#ifndef COHORT_TOOLS_BENCH_FLOOR_ROWS_H_
#define COHORT_TOOLS_BENCH_FLOOR_ROWS_H_

#include "tools/bench/options.h"
#include "tools/bench/report.h"

namespace cohort::bench {

// The floors: a full series at the start of the run; `again` (the end of the run): only the
// sequential p50, to show how far it drifted (Report::grpc_p50_end, tcp_p50_end).
void MeasureFloors(const Options& options, Report* report, bool again = false);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_FLOOR_ROWS_H_
