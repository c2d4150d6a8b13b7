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

#include "absl/strings/str_cat.h"
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

// Daemon `index`'s line in the peers list test/cluster.cc writes, at `address`.
std::string PeerLine(int index, const std::string& address) {
  return "  - {name: n" + std::to_string(index) + ", id: " + std::to_string(index) +
         ", address: " + address + "}\n";
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
  const std::string n4_line = PeerLine(4, cluster.PeerAddress(4));
  // n1..n3 run without n4 among their peers.
  Rewrite(cluster, {1, 2, 3}, n4_line, "");
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto started = test::StartCounterGroup(cluster, 3);
  REQUIRE(started.ok());  // (its replicas serve until the end)
  auto& client = started->client;

  SECTION("added: dialed, and it joins a group") {
    REQUIRE(cluster.StartNode(4));  // its file has every peer
    const std::string n3_line = PeerLine(3, cluster.PeerAddress(3));
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
    // Daemons `from`..3 see counter with 3 members (n4 out) within 30 s.
    auto views_without_n4 = [&](int from) {
      for (int i = from; i <= 3; ++i) {
        auto at = Client::Connect(cluster.ClientAddress(i));
        REQUIRE(at.ok());
        std::string last;  // what the daemon said last, for the failure message
        bool left = Eventually([&] {
          auto view = (*at)->GroupDetails("counter");
          last = view.ok() ? absl::StrCat(view->members.size(), " members in view ", view->view_id)
                           : view.status().ToString();
          return view.ok() && view->members.size() == 3;
        }, 30);
        INFO("n" << i << ": " << last << "\n" << cluster.LogTails(30));
        CHECK(left);
      }
    };
    views_without_n4(2);  // (n1's view has it already: its call got 3 replies)
    fourth.reset();
    cluster.Stop(4);
    // A join request n4 sent just before LeaveGroup may have added it again for a moment (it
    // then leaves again by itself: RELIABILITY.md, session 27); stopped meanwhile, it stays in
    // the view until excluded. A peer still in a view is kept at a reload (tested below), so
    // the removal waits for views without it everywhere.
    views_without_n4(1);
    const std::string moved_line = PeerLine(4, moved);
    Rewrite(cluster, {1, 2, 3}, moved_line, "");
    for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
    for (int i = 1; i <= 3; ++i) {
      INFO("n" << i << "\n" << cluster.LogTails(40));
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
    const std::string n3_line = PeerLine(3, cluster.PeerAddress(3));
    Rewrite(cluster, {1}, n3_line, "");
    Rewrite(cluster, {1}, "members: [n1, n2, n3]", "members: [n1, n2]");
    cluster.Signal(1, SIGHUP);
    CHECK(LogHas(cluster, 1, "peers (n3 is still a member of group counter)"));
    CHECK(LogHas(cluster, 1, "are not applied until a restart"));
    CHECK(test::WaitAllReply(client->get(), "counter", 3));
  }
}

TEST_CASE("SIGHUP: a peer and the group that named it removed together", "[ops][e2e]") {
  test::Cluster cluster({2, "groups:\n  - {name: g, members: [n1]}\n  - {name: h, members: [n1, n2]}\n",
                         "", "info"});
  REQUIRE(cluster.StartNode(1));  // n2 never runs
  const std::string n2_line = PeerLine(2, cluster.PeerAddress(2));
  Rewrite(cluster, {1}, n2_line, "");
  Rewrite(cluster, {1}, "  - {name: h, members: [n1, n2]}\n", "");
  cluster.Signal(1, SIGHUP);
  CHECK(LogHas(cluster, 1, "reload: peers removed n2"));
  CHECK(LogHas(cluster, 1, "reload: stopped group(s) h"));
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  CHECK((*client)->GroupDetails("h").status().code() == absl::StatusCode::kNotFound);
  CHECK((*client)->GroupDetails("g").ok());
}

TEST_CASE("dynamic_groups: a peer added by SIGHUP joins the daemons' own group, gets the "
          "directory, and a group created with it as a member runs there",
          "[ops][e2e][dynamic]") {
  test::Cluster cluster({4, "groups:\n  - {name: counter, members: [n1, n2, n3]}\n",
                         "dynamic_groups: {create: [\"*\"]}\n", "info"});
  const std::string n3_line = PeerLine(3, cluster.PeerAddress(3));
  const std::string n4_line = PeerLine(4, cluster.PeerAddress(4));
  Rewrite(cluster, {1, 2, 3}, n4_line, "");
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  // A group made before n4 exists: n4 must learn it from the directory it is given.
  REQUIRE((*client)->CreateGroup(GroupSpec{"before", {"n1", "n2", "n3"}, "", "", "", ""}).ok());
  // n4 is unknown: a group naming it is refused.
  CHECK((*client)->CreateGroup(GroupSpec{"early", {"n2", "n4"}, "", "", "", ""}).code() ==
        absl::StatusCode::kInvalidArgument);

  Rewrite(cluster, {1, 2, 3}, n3_line, n3_line + n4_line);
  for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
  for (int i = 1; i <= 3; ++i) {
    INFO("n" << i << "\n" << cluster.LogTails(20));
    CHECK(LogHas(cluster, i, "reload: peers added n4"));
  }
  REQUIRE(cluster.StartNode(4));
  // Every daemon, n4 included, installs a view of the daemons' own group with n4 in it.
  for (int i = 1; i <= 4; ++i) {
    INFO("n" << i << "\n" << cluster.LogTails(30));
    CHECK(Eventually([&] {
      const std::string log = LogOf(cluster, i);
      // "view 2 installed: members [1,2,3,4]", or at n4 "joined view 2 (members [1,2,3,4])".
      for (size_t at = log.find("group cohort.system: "); at != std::string::npos;
           at = log.find("group cohort.system: ", at + 1)) {
        const size_t end = log.find('\n', at);
        const std::string line = log.substr(at, end - at);
        if (line.find("members [1,2,3,4]") != std::string::npos) return true;
      }
      return false;
    }, 30));
  }
  auto at4 = Client::Connect(cluster.ClientAddress(4));
  REQUIRE(at4.ok());
  CHECK(Eventually([&] { return (*at4)->GroupDetails("before").ok(); }, 20));
  // A group with n4 as a member, created from n1: it runs on n2, n3 and n4.
  REQUIRE((*client)->CreateGroup(GroupSpec{"grown", {"n2", "n3", "n4"}, "", "", "", ""}).ok());
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 2; i <= 4; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(Eventually([&] {
      return replicas.back()->Start(cluster.ClientAddress(i), "grown").ok();
    }, 20));
  }
  CHECK(test::WaitAllReply(client->get(), "grown", 3));

  // Removed: refused while a created group names n4; once it is deleted and n4 killed (a
  // stopped daemon would leave the group itself, draining), the reload takes n4 out of the
  // daemons' own group.
  Rewrite(cluster, {1}, n4_line, "");
  cluster.Signal(1, SIGHUP);
  CHECK(LogHas(cluster, 1, "peers (n4 is still a member of group grown)"));
  REQUIRE((*client)->DeleteGroup("grown").ok());
  replicas.clear();
  cluster.Kill(4);
  Rewrite(cluster, {2, 3}, n4_line, "");
  std::vector<size_t> before;
  for (int i = 1; i <= 3; ++i) before.push_back(LogOf(cluster, i).size());
  for (int i = 1; i <= 3; ++i) cluster.Signal(i, SIGHUP);
  for (int i = 1; i <= 3; ++i) {
    INFO("n" << i << "\n" << cluster.LogTails(20));
    CHECK(LogHas(cluster, i, "reload: peers removed n4", before[i - 1]));
    CHECK(LogHas(cluster, i, "installed: members [1,2,3]", before[i - 1]));
  }
  CHECK((*client)->CreateGroup(GroupSpec{"late", {"n2", "n4"}, "", "", "", ""}).code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort
