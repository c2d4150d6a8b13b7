// The rows with embedded NSOs (nso/embedded.h): group calls from a member node running inside
// the bench process beside two cohortd members, and with no cohortd at all, every node an
// application process with its NSO and servant embedded.
#ifndef COHORT_TOOLS_BENCH_EMBEDDED_ROWS_H_
#define COHORT_TOOLS_BENCH_EMBEDDED_ROWS_H_

#include <string>

#include "tools/bench/options.h"
#include "tools/bench/report.h"

namespace cohort::bench {

// Group calls from an EMBEDDED member (003 section 3): n = 3, members n1 and n3 are cohortd
// processes, n2 is a node inside this process with its own echo servant; the client is that
// node's in-process Client (closed style), so the only gRPC left is between the daemons and the
// two remote servants.
void MeasureEmbedded(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report);

// --role app-member: an application process with its NSO embedded (nso/embedded.h) and its echo
// servant in the same address space, the setting of 003 section 5 ("the client (server) NSO in
// the same address space as the client (server)"), the servant dispatched inline (the echo never
// blocks; Servant::DispatchInline); serves until killed.
int RunAppMember(const std::string& config, const std::string& group);

// Group calls with no cohortd at all: members n1..nN are application processes (--role
// app-member), each running its own NSO with its echo servant in-process, and the bench is an
// application too: `app-closed` calls come from member n2 embedded in this process (with its own
// servant; every servant here dispatches inline), `app-open` calls from a non-member node n(N+1)
// embedded in this process, through the
// request manager (wait-for-first: asynchronous forwarding). The daemon-mode rows (group_rows.h,
// MeasureEmbedded above) measure the deployment with cohortd; these measure the configuration 003
// section 5 measured.
void MeasureApps(const Options& options, const std::string& dir, Report* report);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_EMBEDDED_ROWS_H_
