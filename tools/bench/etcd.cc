#include "tools/bench/etcd.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tools/bench/process.h"

namespace cohort::bench {
namespace {

constexpr int kMembers = 3;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The number after `label` on its line of the benchmark tool's report ("Requests/sec:\t978.4",
// "50% in 0.0018 secs."), or 0.
double After(const std::string& report, const std::string& label) {
  size_t at = report.find(label);
  if (at == std::string::npos) return 0;
  std::string rest = report.substr(at + label.size());
  rest = std::string(absl::StripLeadingAsciiWhitespace(rest));
  double value = 0;
  std::string number = rest.substr(0, rest.find_first_of(" \t\n"));
  return absl::SimpleAtod(number, &value) ? value : 0;
}

// Runs the benchmark tool's put command; false with *error when it fails.
bool RunPut(const std::string& bin_dir, const std::string& endpoints, int clients, int total,
            int value_bytes, const std::string& log, EtcdRun* run, std::string* error) {
  std::filesystem::remove(log);
  pid_t pid = Spawn({bin_dir + "/etcd-benchmark", "--endpoints=" + endpoints,
                     absl::StrCat("--conns=", clients), absl::StrCat("--clients=", clients),
                     "put", "--key-size=8", absl::StrCat("--val-size=", value_bytes),
                     absl::StrCat("--total=", total), "--sequential-keys"},
                    log);
  int code = WaitChild(pid, absl::Seconds(120));
  std::string report = ReadFile(log);
  run->clients = clients;
  run->total = total;
  run->throughput = After(report, "Requests/sec:");
  run->p50_us = After(report, "50% in") * 1e6;
  run->p99_us = After(report, "99% in") * 1e6;
  if (code != 0 || run->throughput <= 0) {
    *error = absl::StrCat("etcd benchmark put (", clients, " clients) failed, exit ", code,
                          "; see ", log);
    return false;
  }
  return true;
}

}  // namespace

EtcdResult MeasureEtcd(const std::string& bin_dir, const std::string& log_dir, int value_bytes,
                       bool quick) {
  EtcdResult result;
  std::string etcd = bin_dir + "/etcd";
  std::string tool = bin_dir + "/etcd-benchmark";
  if (access(etcd.c_str(), X_OK) != 0 || access(tool.c_str(), X_OK) != 0) {
    result.note = absl::StrCat("not measured: no etcd in ", bin_dir,
                               " (tools/bench/etcd-build builds etcd and its benchmark tool from "
                               "the Go module proxy)");
    return result;
  }
  // Data on tmpfs, as the issue asks: the comparison is about the protocols, not the disk.
  std::string data = absl::StrCat("/dev/shm/cohort-bench-etcd-", getpid());
  std::filesystem::remove_all(data);
  std::filesystem::create_directories(data);
  std::vector<int> peer_ports, client_ports;
  std::vector<std::string> cluster, endpoints;
  for (int i = 1; i <= kMembers; ++i) {
    peer_ports.push_back(FreePort());
    client_ports.push_back(FreePort());
    cluster.push_back(absl::StrCat("e", i, "=http://127.0.0.1:", peer_ports.back()));
    endpoints.push_back(absl::StrCat("127.0.0.1:", client_ports.back()));
  }
  std::vector<pid_t> members;
  for (int i = 1; i <= kMembers; ++i) {
    std::string peer = absl::StrCat("http://127.0.0.1:", peer_ports[i - 1]);
    std::string client = absl::StrCat("http://127.0.0.1:", client_ports[i - 1]);
    members.push_back(Spawn({etcd, absl::StrCat("--name=e", i),
                             absl::StrCat("--data-dir=", data, "/e", i),
                             "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
                             "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
                             "--initial-cluster=" + absl::StrJoin(cluster, ","),
                             "--initial-cluster-state=new", "--initial-cluster-token=cohort-bench",
                             "--log-level=error"},
                            absl::StrCat(log_dir, "/e", i, ".log")));
  }
  auto stop = [&] {
    for (pid_t pid : members) KillChild(pid);
    std::filesystem::remove_all(data);
  };
  for (int port : client_ports) {
    if (!WaitForPort(port, absl::Seconds(20))) {
      result.note = "not measured: an etcd member did not open its client port within 20 s";
      stop();
      return result;
    }
  }
  std::string all = absl::StrJoin(endpoints, ",");
  std::string log = log_dir + "/benchmark.log";
  std::string error;
  // Until the cluster has a leader and takes writes (bounded).
  EtcdRun warmup;
  bool ready = false;
  for (int attempt = 0; attempt < 20 && !ready; ++attempt) {
    ready = RunPut(bin_dir, all, 1, 20, value_bytes, log, &warmup, &error);
    if (!ready) absl::SleepFor(absl::Milliseconds(250));
  }
  if (ready && RunPut(bin_dir, all, 1, quick ? 1000 : 3000, value_bytes, log, &result.sequential,
                      &error) &&
      RunPut(bin_dir, all, 64, quick ? 10000 : 30000, value_bytes, log, &result.concurrent,
             &error)) {
    result.measured = true;
  } else {
    result.note = "not measured: " + error;
  }
  result.version = "v3.6.8 (tools/bench/etcd/go.mod)";
  stop();
  return result;
}

}  // namespace cohort::bench
