// kv-nemesis's small helpers (tools/kv_nemesis_util.h).
#include "tools/kv_nemesis_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/subprocess.h"

namespace cohort::kv_nemesis {
namespace {

const Clock::time_point g_start = Clock::now();

}  // namespace

using cohort::subprocess::Spawn;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - g_start).count();
}
int64_t NowMs() { return NowNs() / 1000000; }
void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::string ReadFrom(const std::string& path, size_t offset) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return offset < all.size() ? all.substr(offset) : "";
}

size_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

int RunCommand(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t pid = Spawn(argv, log_path);
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string IpCommand() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "ip";
}

}  // namespace cohort::kv_nemesis
