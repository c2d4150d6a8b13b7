// cohort-bench: measures Cohort against its floors in one run (issue 7).
//
//   cohort-bench [--quick] [--sizes 3,5,7] [--callers 1,4,16,64,256] [--payload 100] [--json FILE]
//                [--plot DIR] [--skip floors,groups,embedded,failover,memory,etcd,jgroups]
//                [--cohortd PATH]
//
// 1. Floors: a plain gRPC unary echo and a raw TCP ping-pong to a child process.
// 2. Its own cohortd daemons on loopback (n members + 1 non-member), one in-process echo servant
//    per member, every mode x {consensus, sequencer} x {closed, open} x n. closed: the client is
//    attached to member n2 and calls with Style::kClosed; open: the client is attached to the
//    extra daemon, which hosts no member, and calls with Style::kOpen (through a request manager;
//    wait-for-first uses asynchronous forwarding).
// 3. Embedded mode: the same calls from a member node running inside the bench process; and with
//    no cohortd at all, every node an application process with its NSO and servant embedded.
// 4. Failover: sequential wait-for-majority calls while n1 is killed -9 (or frozen).
// 5. Memory: bytes per idle attached NSO and per idle group (RSS delta, tools/bench/memory.h).
// 6. etcd: 3 members with etcd's own benchmark tool, sequential and 64-client puts (etcd.h).
// 7. JGroups: 3 members with SEQUENCER and a driver member, wait-for-first/all (jgroups.h).
// Every workload is bounded by a call budget and a time limit; every child dies with the bench.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "tools/bench/daemons.h"
#include "tools/bench/etcd.h"
#include "tools/bench/floors.h"
#include "tools/bench/tls_floor.h"
#include "tools/bench/memory.h"
#include "tools/bench/process.h"
#include "tools/bench/report.h"
#include "tools/bench/workload.h"
#include "tools/test_ca.h"

namespace cohort::bench {
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

// --peer-transport: written into every daemon's YAML (empty: cohortd's default).
std::string g_peer_transport;
std::string g_tls_ca;  // --tls: the CA the daemons' certificates come from (ca.pem)
// --client-api grpc: the group rows' client calls over the gRPC API, not the local fast path.
bool g_client_local = true;
// --servant-api grpc: the group rows' servants take deliveries over gRPC (Serve).
bool g_servant_local = true;

struct Options {
  bool quick = false;
  std::vector<int> sizes;
  std::vector<int> callers;
  int payload = 100;
  int64_t seq_calls = -1;
  int64_t seq_ms = -1;
  int64_t window_ms = -1;
  std::set<std::string> skip;
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

// Returns 0 to go on, or an exit code.
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

void Progress(const std::string& line) { std::cerr << "[cohort-bench] " << line << std::endl; }

// Sequential latency, then closed-loop throughput per number of callers (the sequential run
// doubles as the 1-caller throughput).
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

// ---- paired ratios ------------------------------------------------------------------------------

// A gRPC echo server kept for the whole run, so that each target row's p50 can be divided by an
// echo p50 measured seconds, not minutes, away (on this VM the echo's p50 drifts 10-20% within a
// run: the ratios to the mean of its start and end move with it).
struct PairingEcho {
  pid_t pid = -1;
  std::shared_ptr<grpc::Channel> channel;
};
PairingEcho g_pairing_echo;

void StartPairingEcho(const Options& options) {
  const int port = FreePort();
  g_pairing_echo.pid = Spawn({SelfExe(), "--role", "echo-server", "--port", std::to_string(port)}, "");
  if (!WaitForPort(port, absl::Seconds(10))) {
    Progress("paired ratios: the echo server did not start; skipped");
    KillChild(g_pairing_echo.pid);
    g_pairing_echo.pid = -1;
    return;
  }
  g_pairing_echo.channel = DaemonChannel(absl::StrCat("127.0.0.1:", port));
}

void StopPairingEcho() {
  if (g_pairing_echo.pid > 0) KillChild(g_pairing_echo.pid);
  g_pairing_echo = {};
}

// The rows of issue 7's latency targets (report.cc, Targets): n = 3.
bool IsTargetRow(int n, const std::string& style, Mode mode) {
  if (n != 3) return false;
  if (mode == Mode::kFirst) return style == "open" || style == "embed" || style == "app-open";
  if (mode == Mode::kAll) return style == "closed" || style == "embed" || style == "app-closed";
  return false;
}

constexpr int kPairedRounds = 5;

// kPairedRounds x (the echo's sequential p50, then the row's), each over up to 500 calls or
// 300 ms: the ratios and their median into `result`.
void MeasurePaired(const Options& options, const CallFactory& row, GroupResult* result) {
  if (g_pairing_echo.channel == nullptr) return;
  CallFactory echo = GrpcEchoCalls(g_pairing_echo.channel, std::string(options.payload, 'x'));
  LoadLimits limits{500, absl::Milliseconds(300), 20};
  for (int round = 0; round < kPairedRounds; ++round) {
    const double echo_p50 = RunLoad(1, limits, echo).p50_us;
    const double row_p50 = RunLoad(1, limits, row).p50_us;
    if (echo_p50 <= 0 || row_p50 <= 0) return;  // a round without a successful call: no figure
    result->paired_ratios.push_back(row_p50 / echo_p50);
  }
  std::vector<double> sorted = result->paired_ratios;
  std::sort(sorted.begin(), sorted.end());
  result->paired_ratio = sorted[sorted.size() / 2];
}

// ---- floors -------------------------------------------------------------------------------------

// The floors: a full series at the start of the run; `again` (the end of the run): only the
// sequential p50, to show how far it drifted (Report::grpc_p50_end, tcp_p50_end).
void MeasureFloors(const Options& options, Report* report, bool again = false) {
  std::string payload(options.payload, 'x');
  std::string self = SelfExe();
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  const char* label = again ? "floor again (sequential): " : "floor: ";
  // Measures `calls` into `floor`, or only their sequential p50 into `*end_p50`.
  auto measure = [&](const CallFactory& calls, FloorResult* floor, double* end_p50) {
    if (again) {
      *end_p50 = RunLoad(1, sequential, calls).p50_us;
      return;
    }
    floor->series = Measure(options, calls);
    floor->measured = true;
  };
  int grpc_port = FreePort();
  pid_t echo = Spawn({self, "--role", "echo-server", "--port", std::to_string(grpc_port)}, "");
  int tcp_port = FreePort();
  pid_t tcp = Spawn({self, "--role", "tcp-server", "--port", std::to_string(tcp_port)}, "");
  report->grpc.name = "grpc_echo";
  report->tcp.name = "tcp_pingpong";
  if (WaitForPort(grpc_port, absl::Seconds(10))) {
    Progress(absl::StrCat(label, "gRPC unary echo"));
    auto channel = DaemonChannel(absl::StrCat("127.0.0.1:", grpc_port));
    measure(GrpcEchoCalls(channel, payload), &report->grpc, &report->grpc_p50_end);
  } else {
    Progress(absl::StrCat(label, "gRPC echo server did not start; skipped"));
  }
  KillChild(echo);
  if (WaitForPort(tcp_port, absl::Seconds(10))) {
    Progress(absl::StrCat(label, "raw TCP ping-pong"));
    measure(TcpEchoCalls(tcp_port, payload), &report->tcp, &report->tcp_p50_end);
  } else {
    Progress(absl::StrCat(label, "TCP echo server did not start; skipped"));
  }
  KillChild(tcp);
  if (!g_tls_ca.empty() && !again) {
    // --tls: the same ping-pong over mutual TLS with the run's test CA (what TLS alone adds).
    std::string ca_dir = g_tls_ca.substr(0, g_tls_ca.rfind('/'));
    int tls_port = FreePort();
    pid_t tls = Spawn({self, "--role", "tls-server", "--port", std::to_string(tls_port),
                       "--ca-dir", ca_dir},
                      "");
    report->tls.name = "tls_pingpong";
    if (WaitForPort(tls_port, absl::Seconds(10))) {
      Progress(absl::StrCat(label, "TCP ping-pong over mutual TLS"));
      measure(TlsEchoCalls(tls_port, payload, ca_dir), &report->tls, nullptr);
    } else {
      Progress(absl::StrCat(label, "TLS echo server did not start; skipped"));
    }
    KillChild(tls);
  }
}

// ---- group calls --------------------------------------------------------------------------------

// How the bench's clients and servants connect to a daemon (TLS with --tls).
ConnectOptions BenchConnect(const std::string& name) {
  ConnectOptions options;
  options.client_name = name;
  options.ca_file = g_tls_ca;
  options.tls = !g_tls_ca.empty();
  return options;
}

// An echo servant attached to one member daemon; counts what it is delivered.
struct EchoReplica {
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> delivered{0};

  absl::Status Start(const std::string& address, const std::string& group, int index) {
    ConnectOptions options = BenchConnect(absl::StrCat("bench-servant-", index));
    options.local = g_servant_local;
    return Serve(Servant::Create(address, group, options));
  }
  // Hosted by an embedded node of this process.
  absl::Status StartEmbedded(EmbeddedNode* node, const std::string& group,
                             bool dispatch_inline = false) {
    return Serve(node->CreateServant(group, "bench-embedded-servant"), dispatch_inline);
  }

  absl::Status Serve(absl::StatusOr<std::unique_ptr<Servant>> created, bool dispatch_inline = false) {
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    if (dispatch_inline) servant->DispatchInline();
    servant->Serve("echo", [this](const std::string& payload) -> absl::StatusOr<std::string> {
      delivered.fetch_add(1, std::memory_order_relaxed);
      return payload;
    });
    return servant->Start();
  }
};

std::string GroupsYaml(const std::string& group, int n, const std::string& ordering) {
  std::vector<std::string> members;
  for (int i = 1; i <= n; ++i) members.push_back(absl::StrCat("n", i));
  // Every call names its style explicitly; everything else stays at cohortd's defaults.
  return absl::StrCat(g_peer_transport.empty() ? "" : absl::StrCat("peer_transport: ", g_peer_transport, "\n"),
                      "groups:\n  - name: ", group, "\n    members: [", absl::StrJoin(members, ", "),
                      "]\n    ordering: ", ordering, "\n");
}

// Waits until `client`'s daemon suspects nobody in `group` and a wait-for-all call succeeds.
absl::Status WaitReady(Client* client, const std::string& group, Style style,
                       absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not ready");
  while (absl::Now() < end) {
    auto view = client->GroupDetails(group);
    if (view.ok() && std::none_of(view->members.begin(), view->members.end(),
                                  [](const ViewMember& m) { return m.suspected; })) {
      auto result = client->Invoke(group, "echo", "ready", Mode::kAll, absl::Seconds(2), style);
      if (result.ok()) return absl::OkStatus();
      last = result.status();
    } else if (!view.ok()) {
      last = view.status();
    } else {
      last = absl::UnavailableError("members still suspected");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

// Caller i calls through clients[i % clients.size()] (one client: every caller through it).
// A group call's result: true when the mode was met and every reply is OK, else why not.
bool RepliesOk(const absl::StatusOr<GroupReplies>& result, std::string* error) {
  if (!result.ok()) {
    *error = result.status().ToString();
    return false;
  }
  if (result->replies.size() < result->wanted) {
    *error = absl::StrCat(result->replies.size(), " of ", result->wanted, " replies");
    return false;
  }
  for (const Reply& reply : result->replies) {
    if (!reply.status.ok()) {
      *error = absl::StrCat(reply.member, ": ", reply.status.ToString());
      return false;
    }
  }
  return true;
}

CallFactory GroupCalls(std::vector<Client*> clients, const std::string& group, Mode mode,
                       Style style, std::string payload) {
  return [clients, group, mode, style, payload](int caller) -> CallFn {
    Client* client = clients[static_cast<size_t>(caller) % clients.size()];
    return [client, group, mode, style, payload](std::string* error) {
      if (mode == Mode::kOneWay) {
        absl::Status status = client->Send(group, "echo", payload);
        if (!status.ok()) *error = status.ToString();
        return status.ok();
      }
      return RepliesOk(client->Invoke(group, "echo", payload, mode, absl::Seconds(5), style),
                       error);
    };
  };
}

// Which rows a series of calls fills (GroupResult's key).
struct RowKey {
  int n;
  std::string ordering;
  std::string style;
  std::string attached_to;
};

// closed-async: ONE caller thread with C calls outstanding (Client::InvokeAsync, pipelined on its
// stream), in place of C threads; wait-for-all. C = 1 is the sequential run.
void MeasureAsync(const Options& options, Client* client, const RowKey& key, Report* report) {
  Progress(absl::StrCat("n=", key.n, " ", key.ordering, " ", key.style, " all"));
  std::string payload(options.payload, 'x');
  AsyncCallFn call = [client, payload](AsyncDone done) {
    client->InvokeAsync("bench", "echo", payload, Mode::kAll,
                        [done](absl::StatusOr<GroupReplies> result) {
                          std::string error;
                          bool ok = RepliesOk(result, &error);
                          done(ok, error);
                        });
  };
  GroupResult result;
  result.n = key.n;
  result.ordering = key.ordering;
  result.style = key.style;
  result.mode = "all";
  result.attached_to = key.attached_to;
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  result.series.sequential = RunAsyncLoad(1, sequential, call);
  for (int callers : options.callers) {
    if (callers == 1) {
      result.series.by_callers.push_back(result.series.sequential);
      continue;
    }
    LoadLimits window{INT64_MAX, absl::Milliseconds(options.window_ms), 2};
    result.series.by_callers.push_back(RunAsyncLoad(callers, window, call));
  }
  report->groups.push_back(std::move(result));
}

const char* BenchModeName(Mode mode) {
  switch (mode) {
    case Mode::kFirst: return "first";
    case Mode::kMajority: return "majority";
    case Mode::kAll: return "all";
    case Mode::kOneWay: return "one_way";
  }
  return "?";
}

// One-way: after each run, wait (bounded) until the servant at n1 has been delivered every accepted
// request, and report accepted / (window + drain) as the delivered rate.
double DrainOneWay(const EchoReplica& replica, int64_t before, const LoadResult& run) {
  int64_t target = before + run.calls;
  absl::Time start = absl::Now();
  absl::Time end = start + absl::Seconds(10);
  while (replica.delivered.load() < target && absl::Now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double drain = absl::ToDoubleSeconds(absl::Now() - start);
  int64_t delivered = std::min(replica.delivered.load() - before, run.calls);
  return delivered / std::max(1e-9, run.seconds + drain);
}

// One-way calls: each run separately, so that each can be drained into a delivered rate at
// `probe`, an in-process servant of the group.
Series MeasureOneWay(const Options& options, const CallFactory& factory, const EchoReplica& probe) {
  Series series;
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  int64_t before = probe.delivered.load();
  series.sequential = RunLoad(1, sequential, factory);
  double sequential_delivered = DrainOneWay(probe, before + 20, series.sequential);
  for (int callers : options.callers) {
    if (callers == 1) {
      series.by_callers.push_back(series.sequential);
      series.delivered_per_s.push_back(sequential_delivered);
      continue;
    }
    before = probe.delivered.load();
    LoadLimits window{INT64_MAX, absl::Milliseconds(options.window_ms), 0};
    LoadResult run = RunLoad(callers, window, factory);
    series.by_callers.push_back(run);
    series.delivered_per_s.push_back(DrainOneWay(probe, before, run));
  }
  return series;
}


// Once the group "bench" is ready for `call_style` calls from every client: one row per mode of
// `modes` that waits for replies, and a one-way row when `probe` (an in-process servant of the
// group, which counts deliveries) is given. Caller i calls through clients[i % clients.size()].
void MeasureReplyModes(const Options& options, const std::vector<Client*>& clients,
                       const RowKey& key, Style call_style, Report* report,
                       const EchoReplica* probe = nullptr,
                       const std::vector<Mode>& modes = {Mode::kFirst, Mode::kMajority, Mode::kAll,
                                                         Mode::kOneWay}) {
  const std::string group = "bench";
  for (Client* client : clients) {
    absl::Status ready = WaitReady(client, group, call_style, absl::Seconds(15));
    if (!ready.ok()) {
      Progress(absl::StrCat("group not ready (", key.style, "): ", ready.ToString()));
      return;
    }
  }
  std::string payload(options.payload, 'x');
  for (Mode mode : modes) {
    if (mode == Mode::kOneWay && probe == nullptr) continue;
    Progress(absl::StrCat("n=", key.n, " ", key.ordering, " ", key.style, " ", BenchModeName(mode)));
    GroupResult result;
    result.n = key.n;
    result.ordering = key.ordering;
    result.style = key.style;
    result.mode = BenchModeName(mode);
    result.attached_to = key.attached_to;
    CallFactory factory = GroupCalls(clients, group, mode, call_style, payload);
    result.series = mode == Mode::kOneWay ? MeasureOneWay(options, factory, *probe)
                                          : Measure(options, factory);
    if (IsTargetRow(key.n, key.style, mode)) MeasurePaired(options, factory, &result);
    report->groups.push_back(std::move(result));
  }
}

// closed-spread: the callers are spread over the members' daemons (caller i through n(i mod N
// + 1)), as when every replica's host runs clients: several members broadcast, and the round-1
// coordinator changes from one consensus instance to the next (consensus/consensus_order.h).
// Wait-for-all only; the sequential run is one caller through n1.
void MeasureSpread(const Options& options, Daemons& daemons, int n, const std::string& ordering,
                   Report* report) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<Client*> raw;
  for (int i = 1; i <= n; ++i) {
    auto client = Client::Connect(daemons.ClientAddress(i), BenchConnect(absl::StrCat("bench-spread-", i)));
    if (!client.ok()) {
      Progress("connect: " + client.status().ToString());
      return;
    }
    raw.push_back(client->get());
    clients.push_back(*std::move(client));
  }
  MeasureReplyModes(options, raw, {n, ordering, "closed-spread", absl::StrCat("n1..n", n)},
                    Style::kClosed, report, nullptr, {Mode::kAll});
}

void MeasureGroups(const Options& options, const std::string& cohortd, const std::string& dir,
                   const NetlabPlacement* placement, Report* report) {
  const std::string group = "bench";
  for (int n : options.sizes) {
    for (const char* ordering : {"consensus", "sequencer"}) {
      std::string cluster_dir = absl::StrCat(dir, "/groups-n", n, "-", ordering);
      std::filesystem::create_directories(cluster_dir);
      // n members and one more daemon that hosts no member: the open-style entry point.
      Daemons daemons(cohortd, cluster_dir, n + 1, GroupsYaml(group, n, ordering), placement);
      std::string error;
      Progress(absl::StrCat("cluster n=", n, " ", ordering, ": starting ", n + 1, " daemons"));
      if (!daemons.Start(&error)) {
        Progress("cluster failed: " + error);
        continue;
      }
      std::vector<std::unique_ptr<EchoReplica>> replicas;
      bool ok = true;
      for (int i = 1; i <= n && ok; ++i) {
        if (placement != nullptr) {  // in the member's own host, like the daemon
          daemons.SpawnBeside(i, {SelfExe(), "--role", "echo-servant", "--address",
                                  daemons.ClientAddress(i), "--group", group},
                              absl::StrCat(cluster_dir, "/servant-n", i, ".log"));
          continue;
        }
        replicas.push_back(std::make_unique<EchoReplica>());
        absl::Status started = replicas.back()->Start(daemons.ClientAddress(i), group, i);
        if (!started.ok()) {
          Progress(absl::StrCat("servant at n", i, ": ", started.ToString()));
          ok = false;
        }
      }
      for (const char* style : {"closed", "closed-out", "open"}) {
        if (!ok) break;
        // closed: the client's daemon hosts a member (n2, not the round-1 coordinator/sequencer);
        // closed-out: the client's daemon n(N+1) hosts none and multicasts the call to every
        // member (003 section 4.1's closed group from outside; each orders it, the reply cache
        // executes it once); open: from n(N+1) through the request manager.
        const std::string name = style;
        int attach = name == "closed" ? 2 : n + 1;
        Style call_style = name == "open" ? Style::kOpen : Style::kClosed;
        ConnectOptions connect = BenchConnect("bench-client");
        connect.local = g_client_local;
        auto client = Client::Connect(daemons.ClientAddress(attach), connect);
        if (!client.ok()) {
          Progress("connect: " + client.status().ToString());
          continue;
        }
        // One-way's delivered rate is counted by in-process servants; not in the lab.
        MeasureReplyModes(options, {client->get()}, {n, ordering, name, absl::StrCat("n", attach)},
                          call_style, report, replicas.empty() ? nullptr : replicas.front().get());
        if (name == "closed") {
          MeasureAsync(options, client->get(), {n, ordering, "closed-async", absl::StrCat("n", attach)},
                       report);
        }
      }
      if (ok) MeasureSpread(options, daemons, n, ordering, report);
      replicas.clear();  // detach servants before their daemons go
      daemons.KillAll();
    }
  }
}

// ---- embedded mode ------------------------------------------------------------------------------

// Group calls from an EMBEDDED member (003 section 3): n = 3, members n1 and n3 are cohortd
// processes, n2 is a node inside this process with its own echo servant; the client is that
// node's in-process Client (closed style), so the only gRPC left is between the daemons and the
// two remote servants.
void MeasureEmbedded(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report) {
  const std::string group = "bench";
  const int n = 3;
  const int embedded = 2;
  for (const char* ordering : {"consensus", "sequencer"}) {
    std::string cluster_dir = absl::StrCat(dir, "/embedded-", ordering);
    std::filesystem::create_directories(cluster_dir);
    Daemons daemons(cohortd, cluster_dir, n, GroupsYaml(group, n, ordering));
    std::string error;
    Progress(absl::StrCat("embedded n=3 ", ordering, ": 2 daemons + n2 in this process"));
    if (!daemons.Start(&error, embedded)) {
      Progress("cluster failed: " + error);
      continue;
    }
    auto node = EmbeddedNode::StartFromFile(daemons.ConfigPath(embedded));
    if (!node.ok()) {
      Progress("embedded node: " + node.status().ToString());
      continue;
    }
    std::vector<std::unique_ptr<EchoReplica>> replicas;
    bool ok = true;
    for (int i = 1; i <= n && ok; ++i) {
      replicas.push_back(std::make_unique<EchoReplica>());
      absl::Status started = i == embedded
                                 ? replicas.back()->StartEmbedded(node->get(), group)
                                 : replicas.back()->Start(daemons.ClientAddress(i), group, i);
      if (!started.ok()) {
        Progress(absl::StrCat("servant at n", i, ": ", started.ToString()));
        ok = false;
      }
    }
    auto client = (*node)->Connect("bench-embedded-client");
    if (ok && client.ok()) {
      MeasureReplyModes(options, {client->get()}, {n, ordering, "embed", "n2 (in-process)"},
                        Style::kClosed, report);
    }
    if (client.ok()) client->reset();
    replicas.clear();  // servants before the node
    (*node)->Shutdown();
    daemons.KillAll();
  }
}

// ---- application processes (every NSO embedded) -------------------------------------------------

// --role app-member: an application process with its NSO embedded (nso/embedded.h) and its echo
// servant in the same address space, the setting of 003 section 5 ("the client (server) NSO in
// the same address space as the client (server)"), the servant dispatched inline (the echo never
// blocks; Servant::DispatchInline); serves until killed.
int RunAppMember(const std::string& config, const std::string& group) {
  auto node = EmbeddedNode::StartFromFile(config);
  if (!node.ok()) {
    std::cerr << "app-member: " << node.status() << "\n";
    return 1;
  }
  EchoReplica replica;
  absl::Status started = replica.StartEmbedded(node->get(), group, /*dispatch_inline=*/true);
  if (!started.ok()) {
    std::cerr << "app-member: servant: " << started << "\n";
    return 1;
  }
  return replica.servant->Wait().ok() ? 0 : 1;
}

// Group calls with no cohortd at all: members n1..nN are application processes (--role
// app-member), each running its own NSO with its echo servant in-process, and the bench is an
// application too: `app-closed` calls come from member n2 embedded in this process (with its own
// servant; every servant here dispatches inline), `app-open` calls from a non-member node n(N+1)
// embedded in this process, through the
// request manager (wait-for-first: asynchronous forwarding). The daemon-mode rows above measure
// the deployment with cohortd; these measure the configuration 003 section 5 measured.
void MeasureApps(const Options& options, const std::string& dir, Report* report) {
  const std::string group = "bench";
  const std::string self = SelfExe();
  for (int n : options.sizes) {
    for (const char* ordering : {"consensus", "sequencer"}) {
      std::string cluster_dir = absl::StrCat(dir, "/apps-n", n, "-", ordering);
      std::filesystem::create_directories(cluster_dir);
      const int member = 2, outsider = n + 1;
      Daemons nodes("", cluster_dir, n + 1, GroupsYaml(group, n, ordering));
      std::string error;
      Progress(absl::StrCat("applications n=", n, " ", ordering, ": ", n - 1,
                            " member processes + n2 and n", outsider, " in this process"));
      bool started = nodes.StartWith(&error, {member, outsider}, [&](int i) -> std::vector<std::string> {
        return {self, "--role", "app-member", "--config", nodes.ConfigPath(i), "--group", group};
      });
      if (!started) {
        Progress("cluster failed: " + error);
        continue;
      }
      auto inside = EmbeddedNode::StartFromFile(nodes.ConfigPath(member));
      auto outside = EmbeddedNode::StartFromFile(nodes.ConfigPath(outsider));
      if (!inside.ok() || !outside.ok()) {
        Progress("embedded node: " + (inside.ok() ? outside.status() : inside.status()).ToString());
        continue;
      }
      EchoReplica replica;
      absl::Status served = replica.StartEmbedded(inside->get(), group, /*dispatch_inline=*/true);
      if (!served.ok()) {
        Progress("servant at n2: " + served.ToString());
        continue;
      }
      for (const char* style : {"app-closed", "app-open"}) {
        bool closed = std::string(style) == "app-closed";
        Style call_style = closed ? Style::kClosed : Style::kOpen;
        auto client = (closed ? *inside : *outside)->Connect("bench-app-client");
        if (!client.ok()) {
          Progress("connect: " + client.status().ToString());
          continue;
        }
        // One-way too: the servant of n2, in this process, counts what is delivered.
        MeasureReplyModes(options, {client->get()},
                          {n, ordering, style, absl::StrCat("n", closed ? member : outsider, " (in-process)")},
                          call_style, report, &replica);
      }
      replica.servant.reset();  // the servant before its node
      (*inside)->Shutdown();
      (*outside)->Shutdown();
      nodes.KillAll();
    }
  }
}

// ---- failover -----------------------------------------------------------------------------------

struct FailoverScenario {
  const char* name;
  const char* ordering;
  const char* style;
  int signal;
  // Callers of the victim's own (a second client at n1). The consensus order's round-1
  // coordinator is the member with the most messages in the previous decision, so with calls
  // from n2 alone n2 coordinates and killing n1 would kill no coordinator: n1's callers make it
  // coordinate most instances, the ones ordering n2's calls included.
  int victim_callers = 0;
  // The daemons run with failure_detector.suspect_on_disconnect: false, so a killed victim is
  // found by the suspicion timeout alone, as a host that stops (power lost) is: its closed
  // connections tell nothing.
  bool silent = false;
};

// n = 3 members n1..n3 (of `total` daemons) with echo servants and a client attached to
// `attach`, ready for `style` calls: the set-up of the failover scenarios. Returns "" or why not.
struct FailoverCluster {
  std::unique_ptr<Daemons> daemons;
  std::vector<std::unique_ptr<EchoReplica>> replicas;
  std::unique_ptr<Client> client;
};

std::string StartFailoverCluster(const std::string& cohortd, const std::string& cluster_dir,
                                 int total, const std::string& ordering, int attach, Style style,
                                 const std::string& client_name, FailoverCluster* out,
                                 bool silent_kills = false) {
  const int n = 3;
  const std::string group = "bench";
  std::filesystem::create_directories(cluster_dir);
  out->daemons = std::make_unique<Daemons>(
      cohortd, cluster_dir, total,
      absl::StrCat(silent_kills ? "failure_detector:\n  suspect_on_disconnect: false\n" : "",
                   GroupsYaml(group, n, ordering)));
  std::string error;
  if (!out->daemons->Start(&error)) return "cluster failed: " + error;
  for (int i = 1; i <= n; ++i) {
    out->replicas.push_back(std::make_unique<EchoReplica>());
    absl::Status started = out->replicas.back()->Start(out->daemons->ClientAddress(i), group, i);
    if (!started.ok()) return absl::StrCat("servant at n", i, ": ", started.ToString());
  }
  auto client = Client::Connect(out->daemons->ClientAddress(attach), BenchConnect(client_name));
  if (!client.ok()) return client.status().ToString();
  out->client = *std::move(client);
  absl::Status ready = WaitReady(out->client.get(), group, style, absl::Seconds(15));
  if (!ready.ok()) return "group not ready: " + ready.ToString();
  return "";
}

FailoverResult RunFailover(const Options& options, const std::string& cohortd, const std::string& dir,
                           const FailoverScenario& scenario) {
  const int n = 3;
  const std::string group = "bench";
  FailoverResult result;
  result.scenario = scenario.name;
  result.ordering = scenario.ordering;
  result.style = scenario.style;
  result.signal = scenario.signal == SIGKILL ? "SIGKILL" : "SIGSTOP";
  result.victim = "n1";
  result.n = n;
  // closed-out: closed calls from the daemon that hosts no member, ordered by n1 (its request
  // manager) while n2 and n3 stand by.
  int attach = std::string(scenario.style) == "closed" ? 2 : n + 1;
  Style style = std::string(scenario.style) == "open" ? Style::kOpen : Style::kClosed;
  result.attached_to = absl::StrCat("n", attach);
  FailoverCluster cluster;
  result.note = StartFailoverCluster(
      cohortd, absl::StrCat(dir, "/failover-", scenario.name, "-", scenario.ordering), n + 1,
      scenario.ordering, attach, style, "bench-failover", &cluster, scenario.silent);
  if (!result.note.empty()) return result;
  if (scenario.silent) {
    result.load = "failure_detector.suspect_on_disconnect: false, so n1's closed connections tell "
                  "nothing: the suspicion timeout finds it, as it finds a host that stops";
  }
  Daemons& daemons = *cluster.daemons;
  std::vector<std::unique_ptr<EchoReplica>>& replicas = cluster.replicas;
  Client* client = cluster.client.get();
  std::string payload(options.payload, 'x');
  std::unique_ptr<Client> victim_client;
  std::vector<std::thread> victim_load;
  std::atomic<bool> stop_load{false};
  if (scenario.victim_callers > 0) {
    auto connected = Client::Connect(daemons.ClientAddress(1), BenchConnect("bench-failover-load"));
    if (!connected.ok()) {
      result.note = "victim's callers: " + connected.status().ToString();
      replicas.clear();
      daemons.KillAll();
      return result;
    }
    victim_client = *std::move(connected);
    result.load = absl::StrCat(result.load, result.load.empty() ? "" : "; ", "n1 runs ",
                               scenario.victim_callers,
                               " callers of its own (wait-for-majority), so it coordinates most "
                               "instances, those ordering the measured calls included");
    for (int i = 0; i < scenario.victim_callers; ++i) {
      victim_load.emplace_back([&] {
        while (!stop_load.load()) {
          auto call = victim_client->Invoke(group, "echo", payload, Mode::kMajority,
                                            absl::Seconds(2), style);
          if (!call.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  using Clock = std::chrono::steady_clock;
  const auto before = std::chrono::milliseconds(options.quick ? 500 : 1000);
  const auto after = std::chrono::milliseconds(options.quick ? 1500 : 2500);
  // The stream runs on its own thread; the main thread sends the signal, so the sender is not
  // blocked in a call when its time comes.
  std::vector<Clock::time_point> completions;
  std::atomic<bool> stop{false};
  std::thread stream([&] {
    while (!stop.load()) {
      auto call = client->Invoke(group, "echo", payload, Mode::kMajority, absl::Seconds(2),
                                     style);
      Clock::time_point done = Clock::now();
      if (call.ok() && call->replies.size() >= call->wanted) {
        completions.push_back(done);
      } else {
        ++result.failed;
        if (result.first_error.empty()) {
          result.first_error = call.ok() ? absl::StrCat(call->replies.size(), " of ", call->wanted, " replies")
                                         : call.status().ToString();
        }
      }
    }
  });
  Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(before);
  Clock::time_point signalled = Clock::now();
  daemons.Signal(1, scenario.signal);
  std::this_thread::sleep_for(after);
  stop.store(true);
  stream.join();
  stop_load.store(true);
  for (std::thread& caller : victim_load) caller.join();
  victim_client.reset();
  Clock::time_point previous = start;
  std::vector<double> gaps_before, gaps_after;
  for (Clock::time_point done : completions) {
    double gap = std::chrono::duration<double, std::milli>(done - previous).count();
    if (done <= signalled) {
      ++result.ok_before;
      result.baseline_gap_ms = std::max(result.baseline_gap_ms, gap);
      gaps_before.push_back(gap);
    } else {
      ++result.ok_after;
      result.stall_ms = std::max(result.stall_ms, gap);
      gaps_after.push_back(gap);
    }
    previous = done;
  }
  result.p50_gap_before_ms = Percentile(&gaps_before, 50);
  result.p50_gap_after_ms = Percentile(&gaps_after, 50);
  if (result.baseline_gap_ms >= result.suspect_timeout_ms) {
    // Seen once in session 6 (sequencer-kill: 54 ms before the signal, 3 ms after it).
    result.note = absl::StrCat(
        "a gap of ", static_cast<int>(result.baseline_gap_ms + 0.5),
        " ms before the signal (a suspicion timeout or more): a false suspicion may have moved "
        "n1's role (coordinator, sequencer, request manager) to another member before the "
        "signal, and then this stall does not measure the loss of that role");
  }
  if (result.ok_after == 0) {
    // Nothing completed after the signal: the stall is at least the rest of the window.
    result.stall_ms = std::chrono::duration<double, std::milli>(Clock::now() - previous).count();
    result.note = "no call completed after the signal within the window";
  }
  replicas.clear();
  daemons.KillAll();
  return result;
}

// Wait-for-all across an exclusion: sequential wait-for-all calls (15 s deadline) from n2 while
// n1 is killed -9; the call in flight then waits for the exclusion timeout (10 s by default) to
// remove n1, calls made while n1 is suspected fail fast and are retried every 20 ms, and the first
// call that succeeds has every reply of the new view.
ExclusionResult RunExclusion(const Options& options, const std::string& cohortd, const std::string& dir) {
  const int n = 3;
  const std::string group = "bench";
  ExclusionResult result;
  FailoverCluster cluster;
  result.note = StartFailoverCluster(cohortd, absl::StrCat(dir, "/exclusion"), n, "consensus", 2,
                                     Style::kClosed, "bench-exclusion", &cluster);
  if (!result.note.empty()) return result;
  Daemons& daemons = *cluster.daemons;
  std::vector<std::unique_ptr<EchoReplica>>& replicas = cluster.replicas;
  Client* client = cluster.client.get();
  using Clock = std::chrono::steady_clock;
  std::string payload(options.payload, 'x');
  std::atomic<bool> killed{false};
  Clock::time_point killed_at;
  std::atomic<bool> stop{false};
  std::thread stream([&] {
    while (!stop.load()) {
      Clock::time_point start = Clock::now();
      auto call = client->Invoke(group, "echo", payload, Mode::kAll, absl::Seconds(15),
                                     Style::kClosed);
      Clock::time_point done = Clock::now();
      bool ok = call.ok() && call->replies.size() >= call->wanted;
      if (ok && !killed.load()) {
        ++result.ok_before;
      } else if (ok) {
        // Also the call in flight at the kill: it waits for the exclusion.
        result.waited_ms = std::max(
            result.waited_ms, std::chrono::duration<double, std::milli>(done - start).count());
        // Counted against the view without n1 (a call n1 answered before it died is not).
        if (result.resumed_ms < 0 && call->wanted < static_cast<uint32_t>(n)) {
          result.resumed_ms = std::chrono::duration<double, std::milli>(done - killed_at).count();
          result.resumed_replies = call->replies.size();
          result.resumed_wanted = call->wanted;
          stop.store(true);
        }
      } else {
        ++result.failed_fast;
        if (result.first_error.empty()) {
          result.first_error = call.ok() ? absl::StrCat(call->replies.size(), " of ", call->wanted, " replies")
                                         : call.status().ToString();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(options.quick ? 500 : 1000));
  killed_at = Clock::now();
  killed.store(true);
  daemons.Signal(1, SIGKILL);
  Clock::time_point limit = killed_at + std::chrono::seconds(20);
  while (!stop.load() && Clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop.store(true);
  stream.join();
  result.measured = result.ok_before > 0;
  if (result.resumed_ms < 0) result.note = "no wait-for-all call succeeded within 20 s of the kill";
  replicas.clear();
  daemons.KillAll();
  return result;
}

void MeasureFailover(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report) {
  const FailoverScenario scenarios[] = {
      {"coordinator-kill", "consensus", "closed", SIGKILL, /*victim_callers=*/3},
      {"sequencer-kill", "sequencer", "closed", SIGKILL},
      {"coordinator-kill-silent", "consensus", "closed", SIGKILL, /*victim_callers=*/3, /*silent=*/true},
      {"sequencer-kill-silent", "sequencer", "closed", SIGKILL, 0, /*silent=*/true},
      {"request-manager-kill", "consensus", "open", SIGKILL},
      {"request-manager-kill", "sequencer", "open", SIGKILL},
      {"coordinator-freeze", "consensus", "closed", SIGSTOP, /*victim_callers=*/3},
      {"request-manager-freeze", "consensus", "open", SIGSTOP},
      {"request-manager-freeze", "sequencer", "open", SIGSTOP},
      {"orderer-kill", "consensus", "closed-out", SIGKILL},
      {"orderer-freeze", "sequencer", "closed-out", SIGSTOP},
  };
  for (const FailoverScenario& scenario : scenarios) {
    Progress(absl::StrCat("failover: ", scenario.name, " (", scenario.ordering, ", ", scenario.style, ")"));
    FailoverResult result = RunFailover(options, cohortd, dir, scenario);
    // The coordinator of consensus rotates to the member with the most messages in the last
    // decision (consensus/consensus_order.h), and n1's own callers only make that likely. Where
    // only the suspicion timeout can find n1 (a freeze, a silent kill), a stall under half of it
    // means n1 did not coordinate the instance in flight, so the scenario did not happen: it
    // runs again (at most 3 times), and the note keeps what the earlier attempts measured. The
    // longest stall is kept, never a shorter one. (A kill the survivors are told of stalls a few
    // ms whether n1 coordinated or not.)
    std::string stalls = absl::StrCat(static_cast<int>(result.stall_ms + 0.5));
    const bool timeout_only = scenario.signal == SIGSTOP || scenario.silent;
    for (int attempt = 2; scenario.victim_callers > 0 && timeout_only && attempt <= 3 &&
                          result.ok_after > 0 && result.stall_ms < result.suspect_timeout_ms / 2;
         ++attempt) {
      Progress(absl::StrCat("failover: ", scenario.name, " again: n1 did not coordinate (stall ",
                            static_cast<int>(result.stall_ms + 0.5), " ms)"));
      FailoverResult again = RunFailover(options, cohortd, dir, scenario);
      absl::StrAppend(&stalls, ", ", static_cast<int>(again.stall_ms + 0.5));
      if (again.stall_ms > result.stall_ms) result = std::move(again);
    }
    if (stalls.find(',') != std::string::npos) {
      result.note = absl::StrCat(result.note, result.note.empty() ? "" : "; ", "attempts' stalls ",
                                 stalls, " ms (one under half the suspicion timeout: n1 did not "
                                 "coordinate the instance in flight); the longest is reported");
    }
    report->failovers.push_back(std::move(result));
  }
  Progress("failover: wait-for-all across the exclusion of a killed member (~11 s)");
  report->exclusion = RunExclusion(options, cohortd, dir);
}

// ---- netlab -------------------------------------------------------------------------------------

constexpr char kNetlabPrefix[] = "cbench";  // a lab of its own, beside the tests' "cohort" lab
constexpr char kNetlabNet[] = "10.79.0";

// A servant process for a daemon in a netlab host (--role echo-servant): echoes until killed.
int RunEchoServant(const std::string& address, const std::string& group) {
  EchoReplica replica;
  absl::Status started = absl::UnavailableError("not started");
  for (int attempt = 0; attempt < 100 && !started.ok(); ++attempt) {
    started = replica.Start(address, group, 0);
    if (!started.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!started.ok()) {
    std::cerr << "echo-servant: " << started << "\n";
    return 1;
  }
  return replica.servant->Wait().ok() ? 0 : 1;
}

int RunNetlabCommand(const Options& options, std::vector<std::string> args) {
  args.insert(args.begin(), options.netlab);
  return WaitChild(Spawn(args, ""), absl::Seconds(120));
}

// --netlab: sets up the lab (node I in host hI, links of the daemon hosts delayed), runs this
// bench again inside one more host with --netlab-inside, and takes the lab down afterwards.
int RunInNetlab(const Options& options, int argc, char** argv) {
  if (geteuid() != 0) {
    std::cerr << "cohort-bench: --netlab needs root (network namespaces); run it as root\n";
    return 2;
  }
  if (access(options.netlab.c_str(), X_OK) != 0) {
    std::cerr << "cohort-bench: --netlab: no netlab script at " << options.netlab
              << " (--netlab-script PATH)\n";
    return 2;
  }
  setenv("NETLAB_PREFIX", kNetlabPrefix, 1);
  setenv("NETLAB_NET", kNetlabNet, 1);
  int max_n = *std::max_element(options.sizes.begin(), options.sizes.end());
  int bench_host = max_n + 2;  // daemons in h1..h(max_n + 1)
  Progress(absl::StrCat("netlab: ", bench_host, " hosts (", kNetlabNet, ".x), delay ",
                        options.netlab_delay_ms, " ms each way on h1..h", max_n + 1));
  if (RunNetlabCommand(options, {"up", std::to_string(bench_host)}) != 0) {
    std::cerr << "cohort-bench: netlab up failed\n";
    RunNetlabCommand(options, {"down", "--kill"});
    return 1;
  }
  int code = 0;
  for (int host = 1; host <= max_n + 1 && options.netlab_delay_ms > 0 && code == 0; ++host) {
    code = RunNetlabCommand(options, {"delay", absl::StrCat("h", host),
                                      std::to_string(options.netlab_delay_ms)});
  }
  if (code == 0) {
    std::vector<std::string> inner = {options.netlab, "exec", absl::StrCat("h", bench_host),
                                      SelfExe()};
    for (int i = 1; i < argc; ++i) inner.push_back(argv[i]);
    inner.push_back("--netlab-inside");
    code = WaitChild(Spawn(inner, ""), absl::Hours(3));
  } else {
    std::cerr << "cohort-bench: netlab delay failed\n";
  }
  RunNetlabCommand(options, {"down", "--kill"});
  return code;
}

int Main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as cohortd does
  if (argc == 5 && std::string(argv[1]) == "--role") {
    int port = 0;
    if (!absl::SimpleAtoi(argv[4], &port)) return 2;
    if (std::string(argv[2]) == "echo-server") return RunGrpcEchoServer(port);
    if (std::string(argv[2]) == "tcp-server") return RunTcpEchoServer(port);
    return 2;
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "tls-server") {
    int port = 0;
    if (!absl::SimpleAtoi(argv[4], &port)) return 2;
    return RunTlsEchoServer(port, argv[6]);
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "echo-servant") {
    return RunEchoServant(argv[4], argv[6]);
  }
  if (argc == 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "app-member") {
    return RunAppMember(argv[4], argv[6]);
  }
  Options options;
  if (int code = ParseOptions(argc, argv, &options); code != 0) return code < 0 ? 0 : code;
  InstallChildCleanup();
  if (options.netlab_delay_ms >= 0 && !options.netlab_inside) return RunInNetlab(options, argc, argv);

  Report report;
  absl::Time begin = absl::Now();
  report.started_at = absl::FormatTime(absl::RFC3339_sec, begin, absl::UTCTimeZone());
  std::vector<std::string> args(argv, argv + argc);
  report.command_line = absl::StrJoin(args, " ");
  report.quick = options.quick;
  report.payload_bytes = options.payload;
  report.sizes = options.sizes;
  report.callers = options.callers;
  report.seq_calls = options.seq_calls;
  report.seq_time_s = options.seq_ms / 1000.0;
  report.window_s = options.window_ms / 1000.0;

  std::string cohortd;
  if (!options.skip.count("groups") || !options.skip.count("embedded") ||
      !options.skip.count("failover") || !options.skip.count("memory")) {
    cohortd = FindCohortd(options.cohortd);
    if (cohortd.empty()) {
      std::cerr << "cohort-bench: cannot find cohortd; build //tools:cohortd or pass --cohortd\n";
      return 2;
    }
  }
  std::string dir = MakeTempDir();
  if (dir.empty()) {
    std::cerr << "cohort-bench: cannot create a temporary directory\n";
    return 1;
  }
  if (options.tls) {
    std::string make_ca = FindTool("make-test-ca");
    std::string ca_dir = dir + "/tls";
    if (make_ca.empty() || std::system((make_ca + " " + ca_dir + " >/dev/null").c_str()) != 0) {
      std::cerr << "cohort-bench: --tls: tools/make-test-ca failed\n";
      return 1;
    }
    g_tls_ca = ca_dir + "/ca.pem";
    SetDaemonTlsYaml(TestCaTlsYaml(ca_dir));
    for (const char* part : {"embedded", "apps", "memory"}) options.skip.insert(part);
  }
  if (!options.skip.count("floors")) MeasureFloors(options, &report);
  if (!options.skip.count("floors") && !options.netlab_inside && options.netlab_delay_ms < 0) {
    StartPairingEcho(options);
  }
  std::optional<NetlabPlacement> placement;
  if (options.netlab_inside) {
    placement = NetlabPlacement{options.netlab, kNetlabNet};
    report.netlab_delay_ms = options.netlab_delay_ms;
    for (const char* part : {"embedded", "apps", "failover", "memory", "etcd", "jgroups"}) {
      options.skip.insert(part);
    }
  }
  if (!options.skip.count("groups")) {
    MeasureGroups(options, cohortd, dir, placement ? &*placement : nullptr, &report);
  }
  if (!options.skip.count("embedded")) MeasureEmbedded(options, cohortd, dir, &report);
  if (!options.skip.count("apps")) MeasureApps(options, dir, &report);
  if (!options.skip.count("etcd")) {
    Progress("etcd: 3 members, sequential and 64-client puts");
    std::string etcd_logs = dir + "/etcd";
    std::filesystem::create_directories(etcd_logs);
    report.etcd = MeasureEtcd(options.etcd_dir, etcd_logs, options.payload, options.quick);
    if (!report.etcd.measured) Progress("etcd " + report.etcd.note);
  } else {
    report.etcd.note = "skipped (--skip etcd)";
  }
  if (!options.skip.count("jgroups")) {
    Progress("JGroups: 3 members + a driver, SEQUENCER, wait-for-first and wait-for-all");
    std::string jgroups_logs = dir + "/jgroups";
    std::filesystem::create_directories(jgroups_logs);
    report.jgroups =
        MeasureJGroups(options.jgroups_dir, jgroups_logs, options.payload, options.quick);
    if (!report.jgroups.measured) Progress("JGroups " + report.jgroups.note);
  } else {
    report.jgroups.note = "skipped (--skip jgroups)";
  }
  if (!options.skip.count("failover")) MeasureFailover(options, cohortd, dir, &report);
  if (!options.skip.count("memory")) {
    Progress(absl::StrCat("memory: ", options.memory_nsos, " idle NSOs, ", options.memory_groups,
                          " groups"));
    report.memory = MeasureMemory(cohortd, dir, options.memory_nsos, options.memory_groups);
  }
  StopPairingEcho();
  if (!options.skip.count("floors")) MeasureFloors(options, &report, /*again=*/true);
  KillAllChildren();
  report.total_seconds = absl::ToDoubleSeconds(absl::Now() - begin);

  PrintReport(report, std::cout);
  int code = 0;
  if (!options.json.empty()) {
    std::string error;
    if (WriteJson(report, options.json, &error)) {
      std::cout << "json: " << options.json << "\n";
    } else {
      std::cerr << "cohort-bench: " << error << "\n";
      code = 1;
    }
  }
  if (!options.plot.empty()) {
    std::filesystem::create_directories(options.plot);
    std::cout << WritePlots(report, options.plot) << "\n";
  }
  if (options.keep) {
    std::cout << "daemon configs and logs kept in " << dir << "\n";
  } else {
    RemoveTree(dir);
  }
  return code;
}

}  // namespace
}  // namespace cohort::bench

int main(int argc, char** argv) { return cohort::bench::Main(argc, argv); }
