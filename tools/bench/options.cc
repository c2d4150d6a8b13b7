#include "tools/bench/options.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cohort::bench {

std::string g_peer_transport;
std::string g_tls_ca;
bool g_client_local = true;
bool g_servant_local = true;

namespace {

constexpr char kUsage[] = R"(usage: cohort-bench [options]

Measures Cohort and its floors in one run on 127.0.0.1 and prints ratios to the floors.

  --quick               ~1 minute run: --sizes 3,7, --callers 1,64, shorter windows
  --sizes LIST          group sizes n (default 3,5,7; each 2..9)
  --callers LIST        concurrent callers for throughput (default 1,4,16,64,256; each 1..256)
  --payload BYTES       request payload size (default 100, like 003 section 5.2)
  --seq-calls N         call budget of a sequential-latency run (default 20000; quick 5000)
  --seq-ms MS           time limit of a sequential-latency run (default 1000; quick 400)
  --window-ms MS        time limit of a throughput run (default 1000; quick 500)
  --skip LIST           any of floors,groups,embedded,apps,failover,memory,etcd,jgroups
  --orderings LIST      only these orderings' group rows: consensus,sequencer (default both)
  --modes LIST          only these modes' group rows: first,majority,all,one_way (default all)
  --etcd-dir DIR        etcd and etcd-benchmark binaries (default /var/tmp/cohort-etcd/bin,
                        where tools/bench/etcd-build puts them); absent: etcd is skipped
  --jgroups-dir DIR     jgroups.jar and the compiled driver (default /var/tmp/cohort-jgroups,
                        where tools/bench/jgroups-build puts them); absent: JGroups is skipped
  --memory-nsos N       idle NSOs attached for the memory figure (default 100000)
  --memory-groups G     single-member groups for the per-group memory figure (default 10000)
  --peer-transport T    grpc or tcp: the daemons' peer_transport (default: cohortd's default)
  --tls                 the daemons use TLS (a test CA made by tools/make-test-ca): mutual TLS
                        between daemons, TLS for their clients and servants on gRPC (the local
                        fast path stays a Unix socket); the floors stay plaintext, and a third,
                        tls_pingpong (the TCP ping-pong over mutual TLS, as between daemons),
                        shows what TLS alone adds; the embedded, application-process and memory
                        parts are skipped
  --client-api A        local or grpc: how the group rows' client reaches its daemon (default
                        local: the fast path when on the same host; grpc: the gRPC API, as a
                        client in another language or on another host does)
  --servant-api A       local or grpc: the same for the group rows' echo servants (ApiService::Serve)
  --netlab DELAY_MS     run the daemons in network namespaces (../shared/netlab, root needed):
                        node I in host hI, every daemon host's link delayed DELAY_MS each way
                        (daemon to daemon +2x, bench to daemon +1x one way); floors and group
                        calls only (not one-way, embedded, failover, memory, etcd)
  --netlab-script PATH  the netlab script (default /work/shared/netlab/netlab)
  --json FILE           write every result as JSON
  --plot DIR            PNG charts of latency and throughput against callers per n (gnuplot),
                        with their data DIR/bench.csv and script DIR/bench.gp
  --cohortd PATH        the daemon binary (default: from this binary's runfiles)
  --keep                keep the temporary directory (daemon YAML and logs)
  --help

Roles used internally: --role echo-server --port P | --role tcp-server --port P |
  --role tls-server --port P --ca-dir D | --role echo-servant --address A --group G |
  --role app-member --config YAML --group G
)";

bool ParseList(const std::string& text, int low, int high, std::vector<int>* out, std::string* error) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < low || value > high) {
      *error = absl::StrCat("\"", part, "\" is not an integer in ", low, "..", high);
      return false;
    }
    if (std::find(out->begin(), out->end(), value) == out->end()) out->push_back(value);
  }
  if (out->empty()) {
    *error = "empty list";
    return false;
  }
  std::sort(out->begin(), out->end());
  return true;
}

}  // namespace

int ParseOptions(int argc, char** argv, Options* options) {
  auto fail = [](const std::string& message) {
    std::cerr << "cohort-bench: " << message << "\n(--help for usage)\n";
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    auto take = [&](std::string* into) {
      if (i + 1 >= argc) return false;
      *into = argv[++i];
      return true;
    };
    auto take_int = [&](int64_t low, int64_t high, int64_t* into) {
      std::string text;
      if (!take(&text) || !absl::SimpleAtoi(text, into) || *into < low || *into > high) return false;
      return true;
    };
    std::string error;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return -1;
    } else if (arg == "--quick") {
      options->quick = true;
    } else if (arg == "--tls") {
      options->tls = true;
    } else if (arg == "--keep") {
      options->keep = true;
    } else if (arg == "--sizes") {
      if (!take(&value) || !ParseList(value, 2, 9, &options->sizes, &error)) return fail("--sizes: " + error);
    } else if (arg == "--callers") {
      if (!take(&value) || !ParseList(value, 1, 256, &options->callers, &error)) return fail("--callers: " + error);
    } else if (arg == "--payload") {
      int64_t payload = 0;
      if (!take_int(0, 1 << 20, &payload)) return fail("--payload: want bytes in 0..1048576");
      options->payload = static_cast<int>(payload);
    } else if (arg == "--seq-calls") {
      if (!take_int(10, 1000000, &options->seq_calls)) return fail("--seq-calls: want 10..1000000");
    } else if (arg == "--seq-ms") {
      if (!take_int(50, 60000, &options->seq_ms)) return fail("--seq-ms: want 50..60000");
    } else if (arg == "--window-ms") {
      if (!take_int(50, 60000, &options->window_ms)) return fail("--window-ms: want 50..60000");
    } else if (arg == "--skip") {
      if (!take(&value)) return fail("--skip: want a list");
      for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        if (part != "floors" && part != "groups" && part != "embedded" && part != "apps" && part != "failover" &&
            part != "memory" && part != "etcd" && part != "jgroups") {
          return fail(absl::StrCat("--skip: unknown part \"", part, "\""));
        }
        options->skip.insert(std::string(part));
      }
    } else if (arg == "--orderings" || arg == "--modes") {
      const bool orderings = arg == "--orderings";
      const std::set<std::string> known =
          orderings ? std::set<std::string>{"consensus", "sequencer"}
                    : std::set<std::string>{"first", "majority", "all", "one_way"};
      if (!take(&value)) return fail(arg + ": want a list");
      std::set<std::string>& into = orderings ? options->orderings : options->modes;
      for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        if (known.count(std::string(part)) == 0) {
          return fail(absl::StrCat(arg, ": unknown \"", part, "\" (want ",
                                   absl::StrJoin(known, ","), ")"));
        }
        into.insert(std::string(part));
      }
      if (into.empty()) return fail(arg + ": empty list");
    } else if (arg == "--memory-nsos") {
      if (!take_int(1, 10000000, &options->memory_nsos)) return fail("--memory-nsos: want 1..10000000");
    } else if (arg == "--memory-groups") {
      if (!take_int(2, 1000000, &options->memory_groups)) return fail("--memory-groups: want 2..1000000");
    } else if (arg == "--peer-transport") {
      if (!take(&g_peer_transport) || (g_peer_transport != "grpc" && g_peer_transport != "tcp")) {
        return fail("--peer-transport: want grpc or tcp");
      }
    } else if (arg == "--client-api") {
      if (!take(&value) || (value != "local" && value != "grpc")) return fail("--client-api: want local or grpc");
      g_client_local = value == "local";
    } else if (arg == "--servant-api") {
      if (!take(&value) || (value != "local" && value != "grpc")) return fail("--servant-api: want local or grpc");
      g_servant_local = value == "local";
    } else if (arg == "--netlab") {
      if (!take_int(0, 10000, &options->netlab_delay_ms)) return fail("--netlab: want a delay in ms, 0..10000");
    } else if (arg == "--netlab-script") {
      if (!take(&options->netlab)) return fail("--netlab-script: want a path");
    } else if (arg == "--netlab-inside") {
      options->netlab_inside = true;
    } else if (arg == "--jgroups-dir") {
      if (!take(&options->jgroups_dir)) return fail("--jgroups-dir: want a directory");
    } else if (arg == "--etcd-dir") {
      if (!take(&options->etcd_dir)) return fail("--etcd-dir: want a directory");
    } else if (arg == "--json") {
      if (!take(&options->json)) return fail("--json: want a file");
    } else if (arg == "--plot") {
      if (!take(&options->plot)) return fail("--plot: want a directory");
    } else if (arg == "--cohortd") {
      if (!take(&options->cohortd)) return fail("--cohortd: want a path");
    } else {
      return fail(absl::StrCat("unknown argument \"", arg, "\""));
    }
  }
  if (options->sizes.empty()) options->sizes = options->quick ? std::vector<int>{3, 7} : std::vector<int>{3, 5, 7};
  if (options->callers.empty()) {
    options->callers = options->quick ? std::vector<int>{1, 64} : std::vector<int>{1, 4, 16, 64, 256};
  }
  if (options->seq_calls < 0) options->seq_calls = options->quick ? 5000 : 20000;
  if (options->seq_ms < 0) options->seq_ms = options->quick ? 400 : 1000;
  if (options->window_ms < 0) options->window_ms = options->quick ? 500 : 1000;
  return 0;
}

}  // namespace cohort::bench
