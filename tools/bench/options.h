// cohort-bench's command line: the options of a run, the usage text and the flag parser, and the
// flags the daemons' and the group rows' set-up read from anywhere (the g_ globals).
#ifndef COHORT_TOOLS_BENCH_OPTIONS_H_
#define COHORT_TOOLS_BENCH_OPTIONS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace cohort::bench {

// --peer-transport: written into every daemon's YAML (empty: cohortd's default).
extern std::string g_peer_transport;
extern std::string g_tls_ca;  // --tls: the CA the daemons' certificates come from (ca.pem)
// --client-api grpc: the group rows' client calls over the gRPC API, not the local fast path.
extern bool g_client_local;
// --servant-api grpc: the group rows' servants take deliveries over gRPC (Serve).
extern bool g_servant_local;

struct Options {
  bool quick = false;
  std::vector<int> sizes;
  std::vector<int> callers;
  int payload = 100;
  int64_t seq_calls = -1;
  int64_t seq_ms = -1;
  int64_t window_ms = -1;
  std::set<std::string> skip;
  // --orderings / --modes: only these group rows (empty: all of them).
  std::set<std::string> orderings;
  std::set<std::string> modes;
  bool WantOrdering(const std::string& ordering) const {
    return orderings.empty() || orderings.count(ordering) > 0;
  }
  bool WantMode(const std::string& mode) const { return modes.empty() || modes.count(mode) > 0; }
  bool tls = false;
  int64_t memory_nsos = 100000;
  int64_t memory_groups = 10000;
  std::string etcd_dir = "/var/tmp/cohort-etcd/bin";
  std::string jgroups_dir = "/var/tmp/cohort-jgroups";
  int64_t netlab_delay_ms = -1;  // --netlab: daemons in network namespaces, links delayed
  std::string netlab = "/work/shared/netlab/netlab";
  bool netlab_inside = false;    // this process is the re-executed bench inside the lab
  std::string json;
  std::string plot;
  std::string cohortd;
  bool keep = false;
};

// Returns 0 to go on, or an exit code.
int ParseOptions(int argc, char** argv, Options* options);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_OPTIONS_H_
