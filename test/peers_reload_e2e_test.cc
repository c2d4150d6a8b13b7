// A changed peers list applied by SIGHUP, without restarting the cluster (raw TCP and gRPC peer
// transports): a daemon added to every file is dialed and joins a group; a daemon moved to
// another address is found there; a daemon removed is forgotten; a removal that a running group
// still needs leaves the peers for a restart (logged).
#include <catch2/catch.hpp>

#include <signal.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;
using test::Eventually;
using test::ReadText;

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string LogOf(const test::Cluster& cluster, int index) {
  return ReadText(cluster.LogPath(index));
}

// Whether `text` shows up in the log of daemon `index` (after its first `since` bytes) within 20 s.
bool LogHas(const test::Cluster& cluster, int index, const std::string& text, size_t since = 0) {
  return Eventually([&] {
    const std::string log = LogOf(cluster, index);
    return log.size() > since && log.find(text, since) != std::string::npos;
  }, 20);
}

// Every file's text with `from` replaced by `to`.
void Rewrite(const test::Cluster& cluster, const std::vector<int>& nodes, const std::string& from,
             const std::string& to) {
  for (int i : nodes) {
    const std::string text = ReadText(cluster.ConfigPath(i));
    REQUIRE(text.find(from) != std::string::npos);
    WriteText(cluster.ConfigPath(i), absl::StrReplaceAll(text, {{from, to}}));
  }
}

TEST_CASE("SIGHUP applies a changed peers list: added, moved, removed", "[ops][e2e]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  test::Cluster cluster({4, "groups:\n  - {name: counter, members: [n1, n2, n3]}\n",
                         "peer_transport: " + transport + "\n", "info"});
  const std::string n4_line =
      "  - {name: n4, id: 4, address: " + cluster.PeerAddress(4) + "}\n";
  // n1..n3 run without n4 among their peers.
  Rewrite(cluster, {1, 2, 3}, n4_line, "");
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto replicas = test::StartCounterReplicas(cluster, 3);
  REQUIRE(replicas.ok());
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  REQUIRE((*client)->Invoke("counter", "add", "5", Mode::kAll).ok());

  SECTION("added: dialed, and it joins a group") {
    REQUIRE(cluster.StartNode(4));  // its file has every peer
    const std::string n3_line = "  - {name: n3, id: 3, address: " + cluster.PeerAddress(3) + "}\n";
    Rewrite(cluster, {1, 2, 3}, n3_line, n3_line + n4_line);
    for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
    for (int i = 1; i <= 3; ++i) {
      INFO("n" << i << "\n" << cluster.LogTails(20));
      CHECK(LogHas(cluster, i, "reload: peers added n4 (id 4) at " + cluster.PeerAddress(4)));
      CHECK(LogHas(cluster, i, "connected to node 4"));
    }
    // cohortctl status lists it.
    std::string out;
    CHECK(Eventually([&] {
      return test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                                  cluster.ClientAddress(1) + " status", &out) == 0 &&
             out.find("peer: n4 (id 4) " + cluster.PeerAddress(4) + " connected") !=
                 std::string::npos;
    }, 20));
    CHECK_THAT(out, Contains("peer: n2 (id 2) " + cluster.PeerAddress(2) + " connected"));
    // A servant on n4 makes its daemon join the group; it starts from the members' state.
    auto fourth = std::make_unique<test::CounterReplica>();
    REQUIRE(fourth->Start(cluster.ClientAddress(4), "counter").ok());
    CHECK(Eventually([&] { return fourth->value.load() == 5; }, 20));
    REQUIRE(test::WaitAllReply(client->get(), "counter", 4));

    // Moved: n4 stops and comes back at another address; the others are told by SIGHUP.
    fourth.reset();
    cluster.Kill(4);
    const std::string moved = "127.0.0.1:" + std::to_string(test::FreePort());
    Rewrite(cluster, {1, 2, 3, 4}, cluster.PeerAddress(4), moved);
    for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
    for (int i = 1; i <= 3; ++i) {
      INFO("n" << i);
      CHECK(LogHas(cluster, i, "reload: peers moved n4 to " + moved));
    }
    const size_t before_restart = LogOf(cluster, 1).size();
    REQUIRE(cluster.StartNode(4));
    fourth = std::make_unique<test::CounterReplica>();
    REQUIRE(fourth->Start(cluster.ClientAddress(4), "counter").ok());
    CHECK(LogHas(cluster, 1, "connected to node 4", before_restart));
    CHECK(Eventually([&] { return fourth->value.load() == 5; }, 30));
    CHECK(test::WaitAllReply(client->get(), "counter", 4));

    // Removed: n4 leaves the group and stops; the others forget it.
    {
      auto at4 = Client::Connect(cluster.ClientAddress(4));
      REQUIRE(at4.ok());
      REQUIRE((*at4)->LeaveGroup("counter").ok());
    }
    REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
    fourth.reset();
    cluster.Stop(4);
    const std::string moved_line = "  - {name: n4, id: 4, address: " + moved + "}\n";
    Rewrite(cluster, {1, 2, 3}, moved_line, "");
    for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
    for (int i = 1; i <= 3; ++i) {
      INFO("n" << i);
      CHECK(LogHas(cluster, i, "reload: peers removed n4"));
      CHECK(LogHas(cluster, i, "node 4 removed from the peers"));
    }
    REQUIRE(test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                                 cluster.ClientAddress(1) + " status", &out) == 0);
    CHECK(out.find("peer: n4") == std::string::npos);
    auto all = (*client)->Invoke("counter", "add", "1", Mode::kAll);
    REQUIRE(all.ok());
    CHECK(all->replies.size() == 3);
  }

  SECTION("a peer a running group still names stays until a restart") {
    // n1's file drops n3 from the peers and from counter's members: counter keeps running with
    // n3 (a group's members change at a restart), so n3 stays a peer.
    const std::string n3_line = "  - {name: n3, id: 3, address: " + cluster.PeerAddress(3) + "}\n";
    Rewrite(cluster, {1}, n3_line, "");
    Rewrite(cluster, {1}, "members: [n1, n2, n3]", "members: [n1, n2]");
    cluster.Signal(1, SIGHUP);
    CHECK(LogHas(cluster, 1, "peers (n3 is still a member of group counter)"));
    CHECK(LogHas(cluster, 1, "are not applied until a restart"));
    CHECK(test::WaitAllReply(client->get(), "counter", 3));
  }
}

}  // namespace
}  // namespace cohort
