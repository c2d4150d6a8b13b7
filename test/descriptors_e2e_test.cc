// A daemon and its open-file limit: it raises its soft limit to the hard one as it starts (the
// usual 1,024 would refuse clients long before memory runs out), and out of descriptors it waits
// rather than spins: the raw TCP peer transport's accepts pause for 100 ms at a time, as the local
// fast path's did, and the metrics server's thread sleeps. Until session 52 the protocol thread
// (and the metrics thread) took a core each for as long as a connection waited to be accepted.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "invocation/client.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"
#include "tools/subprocess.h"

namespace cohort {
namespace {

// "Max open files" of process `pid`: soft and hard.
std::pair<std::string, std::string> OpenFilesLimit(pid_t pid) {
  std::istringstream in(test::ReadText("/proc/" + std::to_string(pid) + "/limits"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(std::string("Max open files").size()));
    std::string soft, hard;
    fields >> soft >> hard;
    return {soft, hard};
  }
  return {"", ""};
}

// CPU time (user + system) of process `pid` so far, in clock ticks.
long CpuTicks(pid_t pid) {
  const std::string text = test::ReadText("/proc/" + std::to_string(pid) + "/stat");
  const size_t after_name = text.rfind(')');
  if (after_name == std::string::npos) return -1;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  long utime = 0, stime = 0;
  // Fields from the 3rd (state): utime and stime are the 14th and 15th.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

}  // namespace

TEST_CASE("a daemon raises its open-file limit, waits out of descriptors rather than spin, and "
          "serves again once they are free",
          "[e2e]") {
  test::ClusterOptions options;
  options.size = 2;
  options.groups_yaml = "groups:\n  - {name: g, members: [n1, n2]}\n";
  options.metrics = true;
  options.launcher = {"/usr/bin/prlimit", "--nofile=64:128"};
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  const pid_t n2 = cluster.Pid(2);
  REQUIRE(n2 > 0);
  CHECK(OpenFilesLimit(n2) == std::make_pair(std::string("128"), std::string("128")));
  CHECK_THAT(test::ReadText(cluster.LogPath(2)), Catch::Contains("open files limited to 128"));

  // Connections to n2's peer port that say nothing, until n2 has no descriptor left for them
  // (they wait in its backlog), then one to its metrics port.
  const std::string peer_address = cluster.PeerAddress(2);
  const int peer_port = std::stoi(peer_address.substr(peer_address.rfind(':') + 1));
  std::vector<int> silent;
  for (int i = 0; i < 150; ++i) {
    const int fd = subprocess::ConnectLoopback(peer_port);
    if (fd >= 0) silent.push_back(fd);
  }
  REQUIRE(silent.size() >= 130);
  const int metrics = subprocess::ConnectLoopback(cluster.MetricsPort(2));
  REQUIRE(metrics >= 0);
  // Out of descriptors for 2 s (silent connections are closed after 5 s): n2 waits. (A
  // spinning thread takes ~100 ticks a second.)
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  const long before = CpuTicks(n2);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const long used = CpuTicks(n2) - before;
  INFO("n2 used " << used << " ticks of CPU in 2 s (" << ticks_per_second << " a second)");
  CHECK(used >= 0);
  CHECK(used < ticks_per_second * 2 * 4 / 10);  // under 40% of one core
  CHECK_THAT(test::ReadText(cluster.LogPath(2)), Catch::Contains("pausing accepts"));

  // Descriptors free again: n2 serves its clients and its group.
  for (int fd : silent) close(fd);
  close(metrics);
  auto client = Client::Connect(cluster.ClientAddress(2), "after");
  REQUIRE(client.ok());
  CHECK(test::Eventually(
      [&] {
        auto view = (*client)->GroupDetails("g");
        if (!view.ok() || view->members.size() != 2) return false;
        for (const auto& member : view->members) {
          if (member.suspected) return false;
        }
        return true;
      },
      20));
  CHECK(cluster.Running(2));
}

}  // namespace cohort
