#include "tools/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <random>
#include <set>

namespace cohort::subprocess {

namespace {

// Binds `port` (0: one the kernel picks) on 127.0.0.1 and releases it: the port bound, or 0.
int BindOnce(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    socklen_t length = sizeof(address);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    bound = ntohs(address.sin_port);
  }
  close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), 0 if unknown.
int EphemeralLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  return (range >> low >> high) ? low : 0;
}

// A port free now on 127.0.0.1, below the ephemeral range when it leaves room: the kernel gives
// ports of that range to every outgoing connection of every process, so a daemon killed and
// started again on its port (lincheck, membership tests) could find it taken by a connection of
// a test running beside it ("cannot listen ... Address already in use", seen in lincheck_test).
// Below it, only another test's pick can take the port, at random among thousands.
int PickPort() {
  static const int low = EphemeralLow();
  constexpr int kFirst = 10000;
  if (low > kFirst + 1000) {
    static std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> ports(kFirst, low - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int port = BindOnce(ports(rng));
      if (port != 0) return port;
    }
  }
  return BindOnce(0);
}

}  // namespace

int FreePort() {
  // The kernel may hand the same released port out twice in a row: never give a port twice in
  // this process (two daemons of one test on one port).
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard<std::mutex> lock(mu);
  int port = PickPort();
  for (int attempt = 0; attempt < 100 && given.count(port); ++attempt) port = PickPort();
  given.insert(port);
  return port;
}

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool CanConnect(int port) {
  int fd = ConnectLoopback(port);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

bool CanConnect(const std::string& ipv4, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, ipv4.c_str(), &address.sin_addr) != 1) return false;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{1, 0};  // bounds connect(): a host behind a cut never answers
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return ok;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  if (!log_path.empty()) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace cohort::subprocess
