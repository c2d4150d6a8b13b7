// Groups created at run time (dynamic_groups, nso/group_directory.h) on real daemons: every
// daemon starts a created group and its servants serve it; a name is taken once, also when two
// daemons create it at the same moment; bad requests are named; a daemon restarted gets the
// definitions back by the system group's state transfer; without a majority CreateGroup fails
// rather than hangs; dynamic_groups.create says who may create. DeleteGroup stops a created group
// on every daemon (pending calls end, servants are told) and frees its name for a new group that
// starts from a fresh state, also on a daemon that was down meanwhile.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;
using test::Eventually;

const char kGroups[] = "groups:\n  - {name: g, members: [n1, n2, n3]}\n";

std::unique_ptr<Client> Connect(const test::Cluster& cluster, int index) {
  auto client = Client::Connect(cluster.ClientAddress(index));
  INFO("n" << index << ": " << client.status().ToString() << " running "
            << cluster.Running(index));
  REQUIRE(client.ok());
  return *std::move(client);
}

// Three daemons with group g, `dynamic` (their dynamic_groups section) and a short exclusion.
test::ClusterOptions ThreeDaemons(const std::string& dynamic) {
  return {3, kGroups, dynamic + "failure_detector: {exclude_timeout_ms: 1500}\n", "info"};
}

std::vector<std::unique_ptr<Client>> ConnectAll(const test::Cluster& cluster) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 1; i <= cluster.size(); ++i) clients.push_back(Connect(cluster, i));
  return clients;
}

TEST_CASE("CreateGroup: every daemon starts the group and its servants serve it; a name is taken "
          "once; bad requests are named; a restarted daemon gets the definitions back",
          "[dynamic][e2e]") {
  test::Cluster cluster(ThreeDaemons("dynamic_groups: {create: [\"*\"]}\n"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(cluster);
  CHECK(clients[0]->GroupDetails("dyn").status().code() == absl::StatusCode::kNotFound);

  GroupSpec spec{"dyn", {"n1", "n2", "n3"}, "sequencer", "event", "closed", "all"};
  REQUIRE(clients[0]->CreateGroup(spec).ok());
  CHECK(clients[0]->GroupDetails("dyn").ok());  // at once on the creating daemon
  for (auto& client : clients) {
    CHECK(Eventually([&] { return client->GroupDetails("dyn").ok(); }, 5));
  }
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "dyn").ok());
  }
  REQUIRE(test::WaitAllReply(clients[1].get(), "dyn", 3));
  auto added = clients[1]->Invoke("dyn", "add", "5", Mode::kAll);
  REQUIRE(added.ok());
  REQUIRE(added->replies.size() == 3);
  for (const auto& reply : added->replies) CHECK(reply.payload == "5");
  CHECK(test::ReadText(cluster.LogPath(2)).find("(created by CreateGroup)") != std::string::npos);

  // Taken once: again from another daemon (even with other keys), or a group of the YAML.
  GroupSpec other = spec;
  other.ordering = "consensus";
  absl::Status again = clients[2]->CreateGroup(other);
  CHECK(again.code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(again.message()), Contains("\"dyn\" already exists"));
  CHECK(clients[0]->CreateGroup({"g", {"n1"}}).code() == absl::StatusCode::kAlreadyExists);

  // Bad requests name what is wrong, and create nothing.
  absl::Status unknown = clients[0]->CreateGroup({"bad1", {"n1", "n9"}});
  CHECK(unknown.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(unknown.message()), Contains("\"n9\" is not a peer name"));
  absl::Status paxos = clients[0]->CreateGroup({"bad2", {"n1"}, "paxos"});
  CHECK(paxos.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(paxos.message()), Contains("ordering"));
  absl::Status reserved = clients[0]->CreateGroup({"cohort.mine", {"n1"}});
  CHECK(reserved.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(reserved.message()), Contains("the daemons' own"));
  CHECK(clients[0]->CreateGroup({"", {"n1"}}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(clients[0]->GroupDetails("bad1").status().code() == absl::StatusCode::kNotFound);
  // Applications cannot reach the directory itself.
  CHECK(clients[0]->Invoke("cohort.system", "define", "{name: x, members: [n1]}", Mode::kAll)
            .status()
            .code() == absl::StatusCode::kPermissionDenied);

  // Two daemons create one name at the same moment: exactly one succeeds.
  auto first = std::async(std::launch::async, [&] {
    return clients[0]->CreateGroup({"race", {"n1", "n2", "n3"}, "consensus"});
  });
  auto second = std::async(std::launch::async, [&] {
    return clients[1]->CreateGroup({"race", {"n1", "n2"}, "sequencer"});
  });
  absl::Status a = first.get(), b = second.get();
  CHECK(a.ok() != b.ok());
  CHECK((a.ok() ? b : a).code() == absl::StatusCode::kAlreadyExists);
  for (auto& client : clients) {
    CHECK(Eventually([&] {
      auto view = client->GroupDetails("race");
      return view.ok() && view->members.size() == (a.ok() ? 3u : 2u);
    }, 5));
  }

  // n3 restarts: the definitions come back with the system group's state, then dyn's state.
  replicas[2].reset();
  clients[2].reset();  // its channel to the old process goes with it
  cluster.Kill(3);
  REQUIRE(cluster.StartNode(3));
  clients[2] = Connect(cluster, 3);
  REQUIRE(Eventually([&] { return clients[2]->GroupDetails("dyn").ok(); }, 15));
  CHECK(clients[2]->GroupDetails("race").ok());
  replicas[2] = std::make_unique<test::CounterReplica>();
  REQUIRE(Eventually([&] { return replicas[2]->Start(cluster.ClientAddress(3), "dyn").ok(); }, 5));
  REQUIRE(test::WaitAllReply(clients[0].get(), "dyn", 3));
  auto after = clients[0]->Invoke("dyn", "add", "1", Mode::kAll);
  REQUIRE(after.ok());
  REQUIRE(after->replies.size() == 3);
  for (const auto& reply : after->replies) CHECK(reply.payload == "6");
  // It knew it restarted (its incarnation_file, test/cluster.cc), and started the created groups
  // it was given as older than itself (Node::AddGroups `existed`).
  const std::string log = test::ReadText(cluster.LogPath(3));
  CHECK_THAT(log, Contains("restarted: this start is incarnation"));
  CHECK_THAT(log, Contains("group dyn: view 1 with 3 members"));
  CHECK_THAT(log, Contains("(created by CreateGroup; from the directory's state)"));
}

TEST_CASE("creating and deleting many groups is quiet: the daemons that start a group after "
          "its first member drop what it sent meanwhile without a warning",
          "[dynamic][e2e]") {
  test::Cluster cluster(ThreeDaemons("dynamic_groups: {create: [\"*\"]}\n"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(cluster);
  // Event-driven groups announce themselves as they start, lively ones send time-silence
  // messages at once: a daemon that delivers the definition a moment later drops them.
  constexpr int kGroups = 40;
  for (int i = 0; i < kGroups; ++i) {
    GroupSpec spec{absl::StrCat("many", i), {"n1", "n2", "n3"}, "consensus",
                   i % 2 == 0 ? "event" : "lively"};
    REQUIRE(clients[i % 3]->CreateGroup(spec).ok());
  }
  for (auto& client : clients) {
    CHECK(Eventually([&] { return client->GroupDetails(absl::StrCat("many", kGroups - 1)).ok(); },
                     5));
  }
  for (int i = 0; i < kGroups; ++i) REQUIRE(clients[i % 3]->DeleteGroup(absl::StrCat("many", i)).ok());
  for (auto& client : clients) {
    CHECK(Eventually([&] {
      return client->GroupDetails(absl::StrCat("many", kGroups - 1)).status().code() ==
             absl::StatusCode::kNotFound;
    }, 5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int noted = 0;
  for (int i = 1; i <= 3; ++i) {
    for (absl::string_view line : absl::StrSplit(test::ReadText(cluster.LogPath(i)), '\n')) {
      if (!absl::StrContains(line, "for unknown group")) continue;
      ++noted;
      INFO(line);
      CHECK_FALSE(absl::StrContains(line, " warning "));
    }
  }
  INFO("envelopes for groups not started yet, or deleted already, noted at info: " << noted);
  CHECK(noted > 0);  // the race this is about happened
}

TEST_CASE("DeleteGroup: every daemon stops the group, its pending calls end and its servants "
          "are told; the name may be created again as a new group, also where a daemon was down",
          "[dynamic][e2e]") {
  test::Cluster cluster(ThreeDaemons("dynamic_groups: {create: [\"*\"]}\n"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(cluster);
  REQUIRE(clients[0]->CreateGroup({"d", {"n1", "n2", "n3"}, "consensus"}).ok());
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(Eventually([&] { return clients[i - 1]->GroupDetails("d").ok(); }, 5));
    replicas.push_back(std::make_unique<test::CounterReplica>());
    // One servant over gRPC (ApiService::Serve), two over the local fast path.
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "d", /*local=*/i != 1).ok());
  }
  REQUIRE(test::WaitAllReply(clients[1].get(), "d", 3));
  auto added = clients[1]->Invoke("d", "add", "5", Mode::kAll);
  REQUIRE(added.ok());
  for (const auto& reply : added->replies) CHECK(reply.payload == "5");

  // A call in flight when the group goes (n1's replica is slow: the deletion comes well before
  // its answer, even on a loaded machine): it ends with NOT_FOUND.
  replicas[0]->slow_ms = 8000;
  auto pending = std::async(std::launch::async, [&] {
    return clients[1]->Invoke("d", "add", "1", Mode::kAll, absl::Seconds(20));
  });
  REQUIRE(Eventually([&] { return replicas[0]->executions.load() == 2; }, 5));
  REQUIRE(clients[2]->DeleteGroup("d").ok());
  CHECK(clients[2]->GroupDetails("d").status().code() == absl::StatusCode::kNotFound);
  auto ended = pending.get();
  CHECK(ended.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(ended.status().message()), Contains("\"d\" was deleted"));
  for (int i = 0; i < 3; ++i) {
    INFO("n" << i + 1);
    absl::Status why;
    CHECK(Eventually([&] { return replicas[i]->servant->Ended(&why); }, 20));
    CHECK(why.code() == absl::StatusCode::kNotFound);
    CHECK(Eventually([&] {
      return clients[i]->GroupDetails("d").status().code() == absl::StatusCode::kNotFound;
    }, 5));
    CHECK(clients[i]->Invoke("d", "add", "1", Mode::kAll).status().code() ==
          absl::StatusCode::kNotFound);
  }
  CHECK(clients[0]->DeleteGroup("d").code() == absl::StatusCode::kNotFound);
  absl::Status yaml = clients[0]->DeleteGroup("g");
  CHECK(yaml.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(yaml.message()), Contains("daemons' YAML"));
  CHECK(clients[0]->DeleteGroup("cohort.system").code() == absl::StatusCode::kPermissionDenied);

  // n3 is down while the name is created again: it gets the new group by the system group's
  // state transfer. The new group starts from 0 at every replica.
  replicas.clear();
  clients[2].reset();
  cluster.Kill(3);
  REQUIRE(clients[0]->CreateGroup({"d", {"n1", "n2", "n3"}, "sequencer"}).ok());
  REQUIRE(cluster.StartNode(3));
  clients[2] = Connect(cluster, 3);
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(Eventually([&] { return clients[i - 1]->GroupDetails("d").ok(); }, 15));
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(Eventually([&] { return replicas.back()->Start(cluster.ClientAddress(i), "d").ok(); },
                       5));
  }
  REQUIRE(test::WaitAllReply(clients[0].get(), "d", 3));
  auto fresh = clients[0]->Invoke("d", "add", "1", Mode::kAll);
  REQUIRE(fresh.ok());
  REQUIRE(fresh->replies.size() == 3);
  for (const auto& reply : fresh->replies) CHECK(reply.payload == "1");
  CHECK_THAT(test::ReadText(cluster.LogPath(1)),
             Contains("incarnation 0 stopped: was deleted (DeleteGroup)"));

  // cohortctl delete-group.
  const std::string ctl = test::Runfile("tools/cohortctl") + " --address " +
                          cluster.ClientAddress(2) + " delete-group ";
  std::string out;
  CHECK(test::RunCapture(ctl + "d", &out) == 0);
  CHECK_THAT(out, Contains("group d deleted"));
  CHECK(test::RunCapture(ctl + "d", &out) == 1);
  CHECK_THAT(out, Contains("NOT_FOUND"));
}

TEST_CASE("dynamic_groups.state_file: created groups survive a restart of every daemon; a "
          "majority's files outvote a stale one; a damaged file is refused",
          "[dynamic][e2e]") {
  test::Cluster cluster(ThreeDaemons(
      "dynamic_groups: {create: [\"*\"], state_file: \"{dir}/{node}.groups\"}\n"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Client>> clients = ConnectAll(cluster);
  // Right after a start the daemons restore from their files (none yet): creations wait for it.
  REQUIRE(Eventually([&] { return clients[0]->CreateGroup({"kept", {"n1", "n2", "n3"}}).ok(); },
                     15));
  REQUIRE(clients[1]->CreateGroup({"again", {"n1", "n2", "n3"}}).ok());
  REQUIRE(clients[1]->DeleteGroup("again").ok());
  REQUIRE(clients[1]->CreateGroup({"again", {"n1", "n2", "n3"}}).ok());  // incarnation 1
  // n3 goes down; "late" is made by n1 and n2 alone: n3's file is stale.
  clients[2].reset();
  cluster.Kill(3);
  REQUIRE(clients[0]->CreateGroup({"late", {"n1", "n2", "n3"}}).ok());
  clients.clear();
  cluster.Kill(1);
  cluster.Kill(2);

  // Every daemon was down. n3 (stale) and n1 come back: a majority, whose newest file has "late".
  REQUIRE(cluster.StartNode(3));
  REQUIRE(cluster.StartNode(1));
  auto n1 = Connect(cluster, 1);
  auto n3 = Connect(cluster, 3);
  for (Client* client : {n1.get(), n3.get()}) {
    for (const char* name : {"kept", "again", "late"}) {
      INFO(name);
      CHECK(Eventually([&] { return client->GroupDetails(name).ok(); }, 15));
    }
  }
  CHECK_THAT(test::ReadText(cluster.LogPath(3)), Contains("group directory restored from"));
  // The restored groups are served as before.
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i : {1, 3}) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(Eventually([&] { return replicas.back()->Start(cluster.ClientAddress(i), "late").ok(); },
                       5));
  }
  auto added = n1->Invoke("late", "add", "2", Mode::kMajority, absl::Seconds(10));
  REQUIRE(added.ok());
  // Creations and deletions work again, and the name's next incarnation was kept: "again" is
  // deleted and made once more (its third incarnation).
  REQUIRE(Eventually([&] { return n3->CreateGroup({"after", {"n1", "n2", "n3"}}).ok(); }, 10));
  REQUIRE(n1->DeleteGroup("again").ok());
  REQUIRE(n1->CreateGroup({"again", {"n1", "n2", "n3"}}).ok());
  CHECK_THAT(test::ReadText(cluster.LogPath(1)), Contains("incarnation 1 stopped"));
  // n2 comes back last: the running daemons give it the directory.
  REQUIRE(cluster.StartNode(2));
  auto n2 = Connect(cluster, 2);
  for (const char* name : {"kept", "again", "late", "after"}) {
    INFO(name);
    CHECK(Eventually([&] { return n2->GroupDetails(name).ok(); }, 15));
  }

  // A damaged file: the daemon refuses to start, naming it.
  n2.reset();
  cluster.Kill(2);
  const std::string config = cluster.ConfigPath(2);
  const std::string file = config.substr(0, config.rfind('/')) + "/n2.groups";
  std::ofstream(file, std::ios::trunc) << "not a directory";
  CHECK_FALSE(cluster.StartNode(2));
  CHECK_THAT(test::ReadText(cluster.LogPath(2)), Contains("is not a group directory written by"));
}

TEST_CASE("CreateGroup without a majority of the daemons fails with UNAVAILABLE, not a hang; "
          "dynamic_groups.create says who may create; without the section it is refused",
          "[dynamic][e2e]") {
  SECTION("no majority") {
    test::Cluster cluster({3, kGroups, "dynamic_groups: {}\n", "info"});
    REQUIRE(cluster.Start());
    auto client = Connect(cluster, 1);
    cluster.Kill(2);
    cluster.Kill(3);
    auto start = std::chrono::steady_clock::now();
    absl::Status alone = client->CreateGroup({"lonely", {"n1"}});
    CHECK_FALSE(alone.ok());
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    CHECK(client->GroupDetails("lonely").status().code() == absl::StatusCode::kNotFound);
  }
  SECTION("who may create") {
    test::Cluster cluster({1, "groups:\n  - {name: g, members: [n1]}\n",
                           "dynamic_groups: {create: [ops]}\n"
                           "auth:\n  tokens:\n    - {name: ops, token: t-ops}\n"
                           "    - {name: app, token: t-app}\n",
                           "info"});
    REQUIRE(cluster.Start());
    ConnectOptions app;
    app.token = "t-app";
    ConnectOptions ops;
    ops.token = "t-ops";
    auto as_app = Client::Connect(cluster.ClientAddress(1), app);
    auto as_ops = Client::Connect(cluster.ClientAddress(1), ops);
    REQUIRE(as_app.ok());
    REQUIRE(as_ops.ok());
    absl::Status denied = (*as_app)->CreateGroup({"h", {"n1"}});
    CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(denied.message()), Contains("\"app\" may not create groups"));
    CHECK((*as_ops)->CreateGroup({"h", {"n1"}}).ok());
    CHECK((*as_app)->GroupDetails("h").ok());
    // cohortctl create-group, with the keys of a groups[] entry.
    const std::string ctl = test::Runfile("tools/cohortctl") + " --address " +
                            cluster.ClientAddress(1) + " --token t-ops create-group ";
    std::string out;
    CHECK(test::RunCapture(ctl + "h2 n1 ordering=sequencer liveness=event", &out) == 0);
    CHECK_THAT(out, Contains("group h2 created on [n1]"));
    auto h2 = (*as_app)->GroupDetails("h2");
    CHECK(h2.ok());
    CHECK(test::RunCapture(ctl + "h3 n1 colour=red", &out) == 2);
    // A created group's acl (join: anyone, invoke and admin: ops) applies like a YAML group's.
    GroupSpec locked{"locked", {"n1"}};
    locked.acl = GroupSpec::Acl{{"*"}, {"ops"}, {"ops"}};
    REQUIRE((*as_ops)->CreateGroup(locked).ok());
    auto served = Servant::Create(cluster.ClientAddress(1), "locked", app);
    REQUIRE(served.ok());
    (*served)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
    REQUIRE((*served)->Start().ok());
    CHECK((*as_ops)->Invoke("locked", "echo", "x", Mode::kAll).ok());
    absl::Status refused = (*as_app)->Invoke("locked", "echo", "x", Mode::kAll).status();
    CHECK(refused.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(refused.message()), Contains("\"app\" may not invoke group \"locked\""));
    CHECK(test::RunCapture(ctl + "locked2 n1 invoke=ops,app2", &out) == 0);
    CHECK(test::RunCapture(ctl + "h2 n1", &out) == 1);
    CHECK_THAT(out, Contains("ALREADY_EXISTS"));
    // Deleting needs dynamic_groups.create, and the group's acl.admin when it has one.
    absl::Status not_creator = (*as_app)->DeleteGroup("h");
    CHECK(not_creator.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(not_creator.message()), Contains("\"app\" may not create groups"));
    CHECK((*as_app)->GroupDetails("h").ok());
    CHECK(test::RunCapture(ctl + "mine n1 admin=app2", &out) == 0);
    absl::Status not_admin = (*as_ops)->DeleteGroup("mine");
    CHECK(not_admin.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(not_admin.message()), Contains("may not admin group \"mine\""));
    CHECK((*as_ops)->DeleteGroup("locked").ok());  // ops is its admin
    absl::Status why;
    CHECK(Eventually([&] { return (*served)->Ended(&why); }, 10));
    CHECK(why.code() == absl::StatusCode::kNotFound);
    CHECK((*as_ops)->DeleteGroup("h").ok());  // no acl
    CHECK((*as_app)->GroupDetails("h").status().code() == absl::StatusCode::kNotFound);
  }
  SECTION("off") {
    test::Cluster cluster({1, "groups:\n  - {name: g, members: [n1]}\n", "", "info"});
    REQUIRE(cluster.Start());
    absl::Status off = Connect(cluster, 1)->CreateGroup({"h", {"n1"}});
    CHECK(off.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(off.message()), Contains("no dynamic_groups section"));
  }
}

}  // namespace
}  // namespace cohort
