#include "tools/bench/netlab.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/bench/group_calls.h"
#include "tools/bench/measure.h"
#include "tools/bench/process.h"

namespace cohort::bench {
namespace {

int RunNetlabCommand(const Options& options, std::vector<std::string> args) {
  args.insert(args.begin(), options.netlab);
  return WaitChild(Spawn(args, ""), absl::Seconds(120));
}

}  // namespace

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

}  // namespace cohort::bench
