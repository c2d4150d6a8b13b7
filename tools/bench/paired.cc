#include "tools/bench/paired.h"

#include <sys/types.h>

#include <algorithm>
#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/bench/floors.h"
#include "tools/bench/measure.h"
#include "tools/bench/process.h"

namespace cohort::bench {
namespace {

// A gRPC echo server kept for the whole run, so that each target row's p50 can be divided by an
// echo p50 measured seconds, not minutes, away (on this VM the echo's p50 drifts 10-20% within a
// run: the ratios to the mean of its start and end move with it).
struct PairingEcho {
  pid_t pid = -1;
  std::shared_ptr<grpc::Channel> channel;
};
PairingEcho g_pairing_echo;

}  // namespace

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

bool IsTargetRow(int n, const std::string& style, Mode mode) {
  if (n != 3) return false;
  if (mode == Mode::kFirst) return style == "open" || style == "embed" || style == "app-open";
  if (mode == Mode::kAll) return style == "closed" || style == "embed" || style == "app-closed";
  return false;
}

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

}  // namespace cohort::bench
