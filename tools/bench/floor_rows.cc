#include "tools/bench/floor_rows.h"

#include <sys/types.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/bench/floors.h"
#include "tools/bench/measure.h"
#include "tools/bench/process.h"
#include "tools/bench/tls_floor.h"
#include "tools/bench/workload.h"

namespace cohort::bench {

void MeasureFloors(const Options& options, Report* report, bool again) {
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

}  // namespace cohort::bench
