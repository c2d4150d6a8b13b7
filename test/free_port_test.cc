// subprocess::FreePort: ports free on 127.0.0.1, never the same twice in a process, and claimed
// across processes while the claimer lives (tests side by side picked the same port at random
// and a daemon failed to start: "Address already in use", session 38).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <vector>

#include "tools/subprocess.h"

namespace cohort {
namespace {

constexpr int kPorts = 300;

bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return bound;
}

// kPorts ports picked by a child process, which stays alive (its claims held) until `release`
// is written to.
std::vector<int> PickedByChild(int* release, pid_t* child) {
  int ports_pipe[2];
  int release_pipe[2];
  REQUIRE(pipe(ports_pipe) == 0);
  REQUIRE(pipe(release_pipe) == 0);
  *child = fork();
  REQUIRE(*child >= 0);
  if (*child == 0) {
    close(ports_pipe[0]);
    close(release_pipe[1]);
    for (int i = 0; i < kPorts; ++i) {
      const int port = subprocess::FreePort();
      if (write(ports_pipe[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
    }
    close(ports_pipe[1]);
    char byte;
    (void)!read(release_pipe[0], &byte, 1);  // until the parent is done (or gone)
    _exit(0);
  }
  close(ports_pipe[1]);
  close(release_pipe[0]);
  std::vector<int> ports;
  int port = 0;
  while (read(ports_pipe[0], &port, sizeof(port)) == sizeof(port)) ports.push_back(port);
  close(ports_pipe[0]);
  *release = release_pipe[1];
  return ports;
}

}  // namespace

TEST_CASE("FreePort gives free ports, each once in a process and once among live processes",
          "[ports]") {
  std::set<int> mine;
  for (int i = 0; i < kPorts; ++i) {
    const int port = subprocess::FreePort();
    REQUIRE(port > 0);
    CHECK(Bindable(port));
    CHECK(mine.insert(port).second);  // never twice here
  }
  int release = -1;
  pid_t child = 0;
  const std::vector<int> theirs = PickedByChild(&release, &child);
  REQUIRE(theirs.size() == static_cast<size_t>(kPorts));
  int shared = 0;
  for (int port : theirs) shared += mine.count(port);
  CHECK(shared == 0);  // a live process's ports are not given to another
  CHECK(subprocess::PortClaimed(theirs.front()));
  // The claims end with the child, leaving nothing behind.
  close(release);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int port : theirs) CHECK_FALSE(subprocess::PortClaimed(port));
}

}  // namespace cohort
