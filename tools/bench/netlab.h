// --netlab: the daemons in network namespaces (../shared/netlab), node I in host hI with its
// links delayed; the bench sets the lab up, runs itself again inside it and takes it down.
#ifndef COHORT_TOOLS_BENCH_NETLAB_H_
#define COHORT_TOOLS_BENCH_NETLAB_H_

#include <string>

#include "tools/bench/options.h"

namespace cohort::bench {

constexpr char kNetlabPrefix[] = "cbench";  // a lab of its own, beside the tests' "cohort" lab
constexpr char kNetlabNet[] = "10.79.0";

// A servant process for a daemon in a netlab host (--role echo-servant): echoes until killed.
int RunEchoServant(const std::string& address, const std::string& group);

// --netlab: sets up the lab (node I in host hI, links of the daemon hosts delayed), runs this
// bench again inside one more host with --netlab-inside, and takes the lab down afterwards.
int RunInNetlab(const Options& options, int argc, char** argv);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_NETLAB_H_
