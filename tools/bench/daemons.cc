#include "tools/bench/daemons.h"

#include <signal.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/bench/process.h"

namespace cohort::bench {
namespace {
std::string g_tls_yaml = "tls: {insecure: true}\n";  // loopback benchmark: plaintext by default
}  // namespace

void SetDaemonTlsYaml(std::string yaml) { g_tls_yaml = std::move(yaml); }

Daemons::Daemons(std::string cohortd, std::string dir, int total, std::string groups_yaml,
                 const NetlabPlacement* placement)
    : cohortd_(std::move(cohortd)), dir_(std::move(dir)), total_(total) {
  if (placement != nullptr) placement_ = *placement;
  for (int i = 0; i < total_; ++i) {
    // In a netlab host every node has the host to itself: fixed ports.
    peer_ports_.push_back(placement_ ? 7101 : FreePort());
    client_ports_.push_back(placement_ ? 7201 : FreePort());
    pids_.push_back(0);
  }
  std::ostringstream peers;
  peers << "peers:\n";
  for (int i = 0; i < total_; ++i) {
    peers << "  - {name: n" << i + 1 << ", id: " << i + 1 << ", address: " << Host(i + 1) << ":"
          << peer_ports_[i] << "}\n";
  }
  // Every timeout and optimisation stays at cohortd's defaults: the bench measures, not tunes.
  for (int i = 0; i < total_; ++i) {
    std::ofstream out(ConfigPath(i + 1));
    out << "node: n" << i + 1 << "\n"
        << "cluster: bench\n"
        << "log_level: warn\n"
        << g_tls_yaml
        << "listen:\n  peer: " << Host(i + 1) << ":" << peer_ports_[i] << "\n  client: "
        << Host(i + 1) << ":" << client_ports_[i] << "\n"
        << peers.str() << groups_yaml << "\n";
  }
}

Daemons::~Daemons() { KillAll(); }

std::string Daemons::ConfigPath(int index) const { return absl::StrCat(dir_, "/n", index, ".yaml"); }
std::string Daemons::LogPath(int index) const { return absl::StrCat(dir_, "/n", index, ".log"); }
std::string Daemons::Host(int index) const {
  return placement_ ? absl::StrCat(placement_->net, ".", index) : std::string("127.0.0.1");
}

std::string Daemons::ClientAddress(int index) const {
  return absl::StrCat(Host(index), ":", client_ports_[index - 1]);
}

pid_t Daemons::SpawnBeside(int index, const std::vector<std::string>& argv,
                           const std::string& log) {
  if (!placement_) return Spawn(argv, log);
  std::vector<std::string> in_host = {placement_->netlab, "exec", absl::StrCat("h", index)};
  in_host.insert(in_host.end(), argv.begin(), argv.end());
  return Spawn(in_host, log);
}

bool Daemons::Start(std::string* error, int in_process) {
  return StartWith(error, {in_process}, [this](int i) -> std::vector<std::string> {
    return {cohortd_, "--config", ConfigPath(i)};
  });
}

bool Daemons::StartWith(std::string* error, const std::set<int>& in_process,
                        const Command& command) {
  for (int i = 1; i <= total_; ++i) {
    if (in_process.count(i)) continue;
    std::vector<std::string> argv = command(i);
    pids_[i - 1] = SpawnBeside(i, argv, LogPath(i));
    if (pids_[i - 1] <= 0) {
      *error = absl::StrCat("cannot start ", argv.front());
      return false;
    }
  }
  for (int i = 1; i <= total_; ++i) {
    if (in_process.count(i)) continue;
    if (!WaitForAddress(Host(i), client_ports_[i - 1], absl::Seconds(10))) {
      *error = absl::StrCat("node n", i, " did not open its client port within 10 s; see ",
                            LogPath(i));
      return false;
    }
  }
  return true;
}

void Daemons::Signal(int index, int signal) {
  pid_t& pid = pids_[index - 1];
  if (pid <= 0) return;
  SignalChild(pid, signal);
  if (signal == SIGKILL) pid = 0;
}

void Daemons::KillAll() {
  for (int i = 1; i <= total_; ++i) Signal(i, SIGKILL);
}

}  // namespace cohort::bench
