#include "tools/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>

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

// The abstract Unix socket "cohort-port-<port>" (sun_path[0] = 0: no file) that claims `port`;
// returns the address's length.
socklen_t ClaimAddress(int port, sockaddr_un* address) {
  *address = sockaddr_un{};
  address->sun_family = AF_UNIX;
  const std::string name = "cohort-port-" + std::to_string(port);
  std::memcpy(address->sun_path + 1, name.data(), name.size());
  return offsetof(sockaddr_un, sun_path) + 1 + name.size();
}

// Claims `port` among the processes of this machine (its network namespace) for as long as this
// one lives: binds its ClaimAddress, which the kernel releases when the process ends (no file is
// left behind). False if another process (or this one) holds it. Concurrent tests pick ports at
// random from one range; the claim keeps two from taking the same port between one's check and
// its daemon's bind (backpressure_e2e_test saw "cannot listen on listen.peer ...: Address
// already in use" beside another test).
bool ClaimPort(int port) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return true;  // no claim possible: the bind check alone
  sockaddr_un address;
  const socklen_t length = ClaimAddress(port, &address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    close(fd);
    return false;
  }
  return true;  // fd stays open until the process ends: the claim
}

// A port free now on 127.0.0.1 and claimed (ClaimPort), below the ephemeral range when it leaves
// room: the kernel gives ports of that range to every outgoing connection of every process, so a
// daemon killed and started again on its port (lincheck, membership tests) could find it taken by
// a connection of a test running beside it ("cannot listen ... Address already in use", seen in
// lincheck_test). The kernel's own pick when that range is too small, or all tried were taken.
int PickPort() {
  static const int low = EphemeralLow();
  constexpr int kFirst = 10000;
  const bool below = low > kFirst + 1000;
  static std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> ports(kFirst, below ? low - 1 : kFirst);
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const int port = BindOnce(below && attempt < 1000 ? ports(rng) : 0);
    if (port != 0 && ClaimPort(port)) return port;
  }
  return BindOnce(0);
}

}  // namespace

bool PortClaimed(int port) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address;
  const socklen_t length = ClaimAddress(port, &address);
  const bool held = bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0;
  close(fd);
  return held;
}

int FreePort() {
  // A port is claimed once per machine (ClaimPort), so never given twice in this process either
  // (two daemons of one test on one port).
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return PickPort();
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
