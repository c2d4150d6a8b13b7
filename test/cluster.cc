#include "test/cluster.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace cohort::test {

using subprocess::CanConnect;
using subprocess::Spawn;

std::string Runfile(const std::string& path) {
  const char* dir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (dir == nullptr) return path;
  return std::string(dir) + "/" + (workspace ? workspace : "cohort") + "/" + path;
}

int RunProcess(const std::vector<std::string>& argv, std::string* stderr_text) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string log = std::string(tmp ? tmp : "/tmp") + "/run_process." + std::to_string(getpid());
  unlink(log.c_str());
  pid_t pid = Spawn(argv, log);
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  *stderr_text = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Cluster::Cluster(ClusterOptions options) : options_(std::move(options)) {
  // COHORT_TEST_LOG_LEVEL: every daemon's log level, for a run kept to be read (e.g. "info").
  if (const char* level = std::getenv("COHORT_TEST_LOG_LEVEL"); level != nullptr && *level) {
    options_.log_level = level;
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  // One directory per cluster of the process: successive clusters of one test binary often get
  // the same address, and a directory named after it made a later cluster append to an earlier
  // one's logs.
  static std::atomic<int> clusters{0};
  dir_ = std::string(tmp ? tmp : "/tmp") + "/cluster." + std::to_string(getpid()) + "." +
         std::to_string(clusters.fetch_add(1));
  mkdir(dir_.c_str(), 0755);
  for (int i = 0; i < options_.size; ++i) {
    peer_ports_.push_back(FreePort());
    client_ports_.push_back(FreePort());
    metrics_ports_.push_back(options_.metrics ? FreePort() : 0);
    pids_.push_back(0);
  }
  std::ostringstream peers;
  peers << "peers:\n";
  for (int i = 0; i < options_.size; ++i) {
    peers << "  - {name: n" << i + 1 << ", id: " << i + 1 << ", address: 127.0.0.1:"
          << peer_ports_[i] << "}\n";
  }
  for (int i = 0; i < options_.size; ++i) {
    const std::string extra = absl::StrReplaceAll(
        options_.extra_yaml, {{"{node}", absl::StrCat("n", i + 1)}, {"{dir}", dir_}});
    std::ofstream out(ConfigPath(i + 1));
    out << "node: n" << i + 1 << "\n"
        << "log_level: " << options_.log_level << "\n"
        << "listen:\n  peer: 127.0.0.1:" << peer_ports_[i] << "\n  client: 127.0.0.1:"
        << client_ports_[i] << "\n"
        << (options_.listen_local.empty() ? std::string()
                                          : "  local: " + options_.listen_local + "\n")
        << peers.str() << extra << "\n" << options_.groups_yaml << "\n";
    // The loader requires a tls section: plaintext on purpose unless the test sets its own.
    if (options_.extra_yaml.find("tls:") == std::string::npos) out << "tls: {insecure: true}\n";
    // Tests run two at a time on a 2-core machine: a heartbeat can be late by more than the
    // 50 ms default, so test clusters suspect after 150 ms unless the test sets its own.
    if (options_.extra_yaml.find("failure_detector") == std::string::npos &&
        options_.groups_yaml.find("failure_detector") == std::string::npos) {
      out << "failure_detector: {suspect_timeout_ms: 150}\n";
    }
    if (options_.metrics) {
      out << "metrics: {listen: 127.0.0.1:" << metrics_ports_[i]
          << (options_.metrics_per_group ? "" : ", per_group: false") << "}\n";
    }
    // As in production (deploy/): a restarted daemon knows it is one.
    if (options_.incarnation_files &&
        options_.extra_yaml.find("incarnation_file") == std::string::npos) {
      out << "incarnation_file: " << dir_ << "/n" << i + 1 << ".incarnation\n";
    }
  }
}

Cluster::~Cluster() {
  for (int i = 1; i <= options_.size; ++i) Kill(i);
  // Run by hand (no TEST_TMPDIR, which Bazel removes), the directory goes too, unless
  // COHORT_KEEP_TEST_DIRS asks to keep its configs and logs to be read.
  const char* keep = std::getenv("COHORT_KEEP_TEST_DIRS");
  if (std::getenv("TEST_TMPDIR") == nullptr && (keep == nullptr || *keep == '\0')) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string Cluster::ConfigPath(int index) const {
  return dir_ + "/n" + std::to_string(index) + ".yaml";
}

std::string Cluster::ClientAddress(int index) const {
  return "127.0.0.1:" + std::to_string(client_ports_[index - 1]);
}

std::string Cluster::PeerAddress(int index) const {
  return "127.0.0.1:" + std::to_string(peer_ports_[index - 1]);
}

std::string Cluster::LogPath(int index) const { return dir_ + "/n" + std::to_string(index) + ".log"; }

std::string Cluster::LogTails(int lines) const {
  std::string all;
  for (int i = 1; i <= options_.size; ++i) {
    std::ifstream in(LogPath(i));
    std::vector<std::string> tail;
    for (std::string line; std::getline(in, line);) {
      tail.push_back(std::move(line));
      if (tail.size() > static_cast<size_t>(lines)) tail.erase(tail.begin());
    }
    all += "--- n" + std::to_string(i) + " (last " + std::to_string(tail.size()) + " lines)\n";
    for (const std::string& line : tail) all += line + "\n";
  }
  return all;
}

bool Cluster::StartNode(int index, const std::vector<std::string>& extra_args) {
  std::string log = LogPath(index);
  std::vector<std::string> argv = options_.launcher;
  for (const std::string& arg : {Runfile("tools/cohortd"), std::string("--config"), ConfigPath(index)}) {
    argv.push_back(arg);
  }
  argv.insert(argv.end(), options_.daemon_args.begin(), options_.daemon_args.end());
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // The log is appended to across restarts: only what this process writes counts. (A restart
  // refused after the client port was bound, e.g. for a damaged state file, once passed for
  // ready on the previous run's line.)
  std::error_code no_log;  // no log yet (a first start): read it from its start
  uintmax_t log_before = std::filesystem::file_size(log, no_log);
  if (no_log) log_before = 0;
  pids_[index - 1] = Spawn(argv, log);
  // Ready when this daemon (not some other process that took the port) says it serves.
  for (int attempt = 0; attempt < 400; ++attempt) {
    int status = 0;
    if (waitpid(pids_[index - 1], &status, WNOHANG) == pids_[index - 1]) {
      pids_[index - 1] = 0;
      return false;  // it exited: could not bind its ports, or a bad config
    }
    std::ifstream in(log);
    in.seekg(static_cast<std::streamoff>(log_before));
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().find(" ready: peers on ") != std::string::npos &&
        CanConnect(client_ports_[index - 1])) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

bool Cluster::Start() {
  for (int i = 1; i <= options_.size; ++i) {
    if (!StartNode(i)) return false;
  }
  return true;
}

void Cluster::Kill(int index) {
  pid_t& pid = pids_[index - 1];
  if (pid <= 0) return;
  kill(pid, SIGCONT);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  pid = 0;
}

void Cluster::Stop(int index) {
  pid_t& pid = pids_[index - 1];
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  pid = 0;
}

namespace {

// True once every thread of `pid` is stopped ('T' in /proc/PID/task/TID/stat). kill(SIGSTOP)
// returns before the signal has reached every thread: a call made right after it could still be
// served (pipelining_e2e_test saw a call to a "frozen" daemon succeed).
bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return true;  // gone: nothing runs
  bool stopped = true;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream stat(tasks + "/" + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // the thread ended
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) continue;
    const char state = line[paren + 2];
    if (state != 'T' && state != 't' && state != 'Z' && state != 'X') stopped = false;
  }
  closedir(dir);
  return stopped;
}

}  // namespace

void Cluster::Pause(int index) {
  const pid_t pid = pids_[index - 1];
  if (pid <= 0) return;
  kill(pid, SIGSTOP);
  for (int waited_ms = 0; waited_ms < 5000 && !AllThreadsStopped(pid); ++waited_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Cluster::Resume(int index) {
  if (pids_[index - 1] > 0) kill(pids_[index - 1], SIGCONT);
}

void Cluster::Signal(int index, int signal_number) {
  if (pids_[index - 1] > 0) kill(pids_[index - 1], signal_number);
}

bool Cluster::Running(int index) const { return pids_[index - 1] > 0; }

}  // namespace cohort::test
