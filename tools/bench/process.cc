#include "tools/bench/process.h"
#include "tools/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/time/clock.h"

namespace cohort::bench {
namespace {

constexpr int kMaxChildren = 256;
// Async-signal-safe registry: a fixed array of pids (0 = free slot).
std::atomic<pid_t> g_children[kMaxChildren];

void Register(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }
}

void Unregister(pid_t pid) {
  for (auto& slot : g_children) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

void OnSignal(int signal) {
  for (auto& slot : g_children) {
    pid_t pid = slot.load();
    if (pid > 0) {
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
    }
  }
  _exit(128 + signal);
}

}  // namespace

void InstallChildCleanup() {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);
  std::atexit(KillAllChildren);
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid != 0) {
    Register(pid);
    return pid;
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  if (!log_path.empty()) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

void SignalChild(pid_t pid, int signal) {
  if (pid <= 0) return;
  if (signal == SIGKILL) return KillChild(pid);
  kill(pid, signal);
}

void KillChild(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGCONT);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  Unregister(pid);
}

int WaitChild(pid_t pid, absl::Duration timeout) {
  if (pid <= 0) return -1;
  absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      Unregister(pid);
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  KillChild(pid);
  return -1;
}

void KillAllChildren() {
  for (auto& slot : g_children) {
    pid_t pid = slot.load();
    if (pid > 0) KillChild(pid);
  }
}

int FreePort() { return subprocess::FreePort(); }

bool WaitForPort(int port, absl::Duration timeout) {
  return WaitForAddress("127.0.0.1", port, timeout);
}

bool WaitForAddress(const std::string& ipv4, int port, absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    inet_pton(AF_INET, ipv4.c_str(), &address.sin_addr);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string SelfExe() {
  char buffer[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0) return "";
  return std::string(buffer, length);
}

std::string FindCohortd(const std::string& flag) { return FindTool("cohortd", flag); }

std::string FindTool(const std::string& name, const std::string& flag) {
  std::vector<std::string> candidates;
  if (!flag.empty()) {
    candidates.push_back(flag);
  } else {
    std::string self = SelfExe();
    candidates.push_back(self + ".runfiles/cohort/tools/" + name);
    if (const char* dir = std::getenv("RUNFILES_DIR")) {
      candidates.push_back(std::string(dir) + "/cohort/tools/" + name);
    }
    candidates.push_back("tools/" + name);  // `bazel run` starts in the runfiles tree
    candidates.push_back(std::filesystem::path(self).parent_path().parent_path() / name);
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) {
      return std::filesystem::absolute(candidate).string();
    }
  }
  return "";
}

std::string MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cohort-bench.XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) return "";
  return buffer.data();
}

void RemoveTree(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace cohort::bench
