// Durable groups on real daemons (README "Durable groups"): counter servants keep their state on
// disk (Servant::KeepStateIn); every daemon is killed -9 and started again, and the group resumes
// from the state kept, whether the servants died too (new ones read the files) or outlived their
// daemons (RejoinAfterDaemonRestart). Without durable the same restart starts the group afresh.
// And KeepStateIn's errors.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/kept_state.h"
#include "invocation/servant.h"
#include "proto/api.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using test::Eventually;

const char kDurable[] =
    "groups:\n  - {name: counter, members: [n1, n2, n3], durable: true}\n";
const char kPlain[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

std::string KeptPath(const test::Cluster& cluster, int i) {
  return absl::StrCat(cluster.dir(), "/s", i, ".kept");
}

std::vector<std::unique_ptr<test::CounterReplica>> StartKeeping(const test::Cluster& cluster,
                                                                bool rejoin) {
  auto replicas = test::StartCounterReplicas(
      cluster, 3, "counter", [&](int i, test::CounterReplica* replica) {
        replica->kept_path = KeptPath(cluster, i);
        replica->rejoin = rejoin;
      });
  REQUIRE(replicas.ok());
  return *std::move(replicas);
}

// Once every replica answers a "get" (idempotent, retried), an "add" waiting for all three; the
// replies.
std::vector<std::string> AddAll(const test::Cluster& cluster, const std::string& delta) {
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  auto added = (*client)->Invoke("counter", "add", delta, Mode::kAll, absl::Seconds(10));
  REQUIRE(added.ok());
  std::vector<std::string> values;
  for (const auto& reply : added->replies) values.push_back(reply.payload);
  return values;
}

// Each servant ends with its daemon (killed).
void AwaitEnded(const std::vector<std::unique_ptr<test::CounterReplica>>& replicas) {
  for (const auto& replica : replicas) {
    CHECK(Eventually([&] { return replica->servant->Ended(); }, 10));
  }
}

// Five calls, then every daemon killed -9 and started again.
void FiveThenKillAll(test::Cluster& cluster) {
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  REQUIRE((*client)->Invoke("counter", "add", "5", Mode::kAll).ok());
  for (int i = 1; i <= 3; ++i) cluster.Kill(i);
}

}  // namespace

TEST_CASE("durable group: every daemon and servant killed and started again resumes from the "
          "state the servants kept", "[durable][e2e]") {
  test::Cluster cluster{{3, kDurable, "", "info"}};
  REQUIRE(cluster.Start());
  {
    auto replicas = StartKeeping(cluster, /*rejoin=*/false);
    FiveThenKillAll(cluster);
    AwaitEnded(replicas);
  }  // the servants go with their daemons
  for (int i = 1; i <= 3; ++i) {
    auto kept = invocation::ReadKeptState(KeptPath(cluster, i), "counter");
    REQUIRE(kept.ok());
    REQUIRE(kept->has_value());
    CHECK((*kept)->state == "5");
    // With the state, what its calls answered: "add 5" answered "5".
    api::KeptCalls calls;
    REQUIRE(calls.ParseFromString((*kept)->calls));
    bool add_kept = false;
    for (const auto& call : calls.calls()) add_kept |= !call.call().empty() && call.payload() == "5";
    CHECK(add_kept);
  }
  REQUIRE(cluster.StartNode(1));
  {  // n1 alone: restarted, it waits to resume (cohortctl groups says so)
    std::string out;
    REQUIRE(test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                                 cluster.ClientAddress(1) + " groups", &out) == 0);
    CHECK_THAT(out, Catch::Matchers::Contains("resuming"));
  }
  for (int i = 2; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto replicas = StartKeeping(cluster, /*rejoin=*/false);
  CHECK(AddAll(cluster, "1") == std::vector<std::string>{"6", "6", "6"});
  int refounders = 0;
  for (int i = 1; i <= 3; ++i) {
    const std::string log = test::ReadText(cluster.LogPath(i));
    if (log.find("re-founded in view") != std::string::npos) {
      ++refounders;
      CHECK_THAT(log, Catch::Matchers::Contains("took back the state kept at position"));
    }
    auto kept = invocation::ReadKeptState(KeptPath(cluster, i), "counter");
    REQUIRE(kept.ok());
    CHECK((*kept)->state == "6");  // each replica kept the call made after the restart
  }
  CHECK(refounders == 1);
  // cohortctl groups says the group is durable, and no longer resuming.
  std::string out;
  REQUIRE(test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                               cluster.ClientAddress(2) + " groups", &out) == 0);
  CHECK_THAT(out, Catch::Matchers::Contains("DURABLE"));
  CHECK_THAT(out, Catch::Matchers::Contains(" yes       "));  // the DURABLE column
  CHECK_THAT(out, !Catch::Matchers::Contains("resuming"));
  INFO(cluster.LogTails(30));
}

TEST_CASE("durable group: servants that outlive their daemons give the kept state back when "
          "every daemon restarted", "[durable][e2e]") {
  test::Cluster cluster{{3, kDurable, "", "warn"}};
  REQUIRE(cluster.Start());
  auto replicas = StartKeeping(cluster, /*rejoin=*/true);
  FiveThenKillAll(cluster);
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  CHECK(AddAll(cluster, "2") == std::vector<std::string>{"7", "7", "7"});
  for (const auto& replica : replicas) CHECK(replica->servant->rejoins() == 1);
}

TEST_CASE("without durable, the same restart starts the group afresh (the kept files are "
          "overwritten)", "[durable][e2e]") {
  test::Cluster cluster{{3, kPlain, "", "warn"}};
  REQUIRE(cluster.Start());
  { auto replicas = StartKeeping(cluster, false); FiveThenKillAll(cluster); }
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto replicas = StartKeeping(cluster, false);
  CHECK(AddAll(cluster, "1") == std::vector<std::string>{"1", "1", "1"});
}

TEST_CASE("KeepStateIn: a file that is not this group's kept state, or a servant without state "
          "hooks, is refused at Start, naming why", "[durable][e2e]") {
  test::Cluster cluster{{1, "groups:\n  - {name: counter, members: [n1], durable: true}\n", "",
                         "warn"}};
  REQUIRE(cluster.Start());
  const std::string path = KeptPath(cluster, 1);
  std::ofstream(path) << "not a kept state\n";
  test::CounterReplica replica;
  replica.kept_path = path;
  absl::Status started = replica.Start(cluster.ClientAddress(1), "counter");
  REQUIRE_FALSE(started.ok());
  CHECK(started.code() == absl::StatusCode::kDataLoss);
  CHECK(started.message().find(path) != std::string::npos);
  CHECK(test::ReadText(path) == "not a kept state\n");  // left as it was
  REQUIRE(invocation::WriteKeptState(path, "orders", {3, "9"}).ok());
  started = replica.Start(cluster.ClientAddress(1), "counter");
  REQUIRE_FALSE(started.ok());
  CHECK(started.message().find("not \"counter\"") != std::string::npos);

  auto bare = Servant::Create(cluster.ClientAddress(1), "counter", "bare");
  REQUIRE(bare.ok());
  (*bare)->KeepStateIn(absl::StrCat(cluster.dir(), "/bare.kept"));
  absl::Status bare_started = (*bare)->Start();
  REQUIRE_FALSE(bare_started.ok());
  CHECK(bare_started.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(bare_started.message().find("needs OnGetState and OnSetState") != std::string::npos);
}

TEST_CASE("durable group: a group of one restarted resumes from its servant's kept state",
          "[durable][e2e]") {
  test::Cluster cluster{{1, "groups:\n  - {name: counter, members: [n1], durable: true}\n", "",
                         "warn"}};
  REQUIRE(cluster.Start());
  auto make = [&] {
    auto replica = std::make_unique<test::CounterReplica>();
    replica->kept_path = KeptPath(cluster, 1);
    REQUIRE(replica->Start(cluster.ClientAddress(1), "counter").ok());
    return replica;
  };
  {
    auto replica = make();
    auto client = Client::Connect(cluster.ClientAddress(1));
    REQUIRE(client.ok());
    REQUIRE((*client)->Invoke("counter", "add", "4", Mode::kAll).ok());
    cluster.Kill(1);
  }
  REQUIRE(cluster.StartNode(1));
  auto replica = make();
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  std::string value;
  CHECK(Eventually([&] {
    auto added = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(3));
    if (!added.ok() || added->replies.size() != 1) return false;
    value = added->replies[0].payload;
    return true;
  }, 30));
  CHECK(value == "5");
  // Re-founded in a view of its own above the one it had (view ids only grow).
  auto view = (*client)->GroupDetails("counter");
  REQUIRE(view.ok());
  CHECK(view->view_id == 2);
}

TEST_CASE("durable group: view ids only grow across a power cut, and the servants get the "
          "re-founded view after the kept state", "[durable][views][e2e]") {
  test::Cluster cluster{{3, kDurable, "failure_detector: {exclude_timeout_ms: 1000}\n", "info"}};
  REQUIRE(cluster.Start());
  auto start = [&] {
    return test::StartCounterReplicas(cluster, 3, "counter", [&](int i, test::CounterReplica* r) {
      r->kept_path = KeptPath(cluster, i);
      r->record_views = true;
    });
  };
  uint64_t before = 0;
  {
    auto replicas = start();
    REQUIRE(replicas.ok());
    // n3 excluded and re-added: views 2 and 3.
    cluster.Kill(3);
    auto client = Client::Connect(cluster.ClientAddress(1));
    REQUIRE(client.ok());
    CHECK(Eventually([&] {
      auto view = (*client)->GroupDetails("counter");
      return view.ok() && view->members.size() == 2;
    }, 30));
    (*replicas)[2]->servant.reset();
    REQUIRE(cluster.StartNode(3));
    auto fresh = std::make_unique<test::CounterReplica>();
    fresh->kept_path = KeptPath(cluster, 3);
    REQUIRE(fresh->Start(cluster.ClientAddress(3), "counter").ok());
    CHECK(AddAll(cluster, "5") == std::vector<std::string>{"5", "5", "5"});
    auto view = (*client)->GroupDetails("counter");
    REQUIRE(view.ok());
    before = view->view_id;
    CHECK(before >= 3);
    // Each servant kept the latest view with its state.
    for (int i = 1; i <= 3; ++i) {
      auto kept = invocation::ReadKeptState(KeptPath(cluster, i), "counter");
      REQUIRE(kept.ok());
      REQUIRE(kept->has_value());
      CHECK((*kept)->view == before);
    }
    for (int i = 1; i <= 3; ++i) cluster.Kill(i);
  }
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto replicas = start();
  REQUIRE(replicas.ok());
  CHECK(AddAll(cluster, "1") == std::vector<std::string>{"6", "6", "6"});
  auto client = Client::Connect(cluster.ClientAddress(2));
  REQUIRE(client.ok());
  auto view = (*client)->GroupDetails("counter");
  REQUIRE(view.ok());
  CHECK(view->view_id > before);
  for (const auto& replica : *replicas) {
    std::vector<test::CounterReplica::SeenView> views = replica->Views();
    INFO(cluster.LogTails(10));
    REQUIRE(!views.empty());
    CHECK(views.back().view.view_id == view->view_id);
    CHECK(views.back().view.members.size() == 3);
    CHECK(views.back().value == 5);  // after the kept state (taken back, or transferred)
  }
}

TEST_CASE("durable group: a power cut that took one machine's disk; its replacement starts with "
          "--replacing and nothing kept, and the group resumes from the others' kept state",
          "[durable][e2e]") {
  test::Cluster cluster{{3, kDurable, "", "info"}};
  REQUIRE(cluster.Start());
  {
    auto replicas = StartKeeping(cluster, /*rejoin=*/false);
    FiveThenKillAll(cluster);
    AwaitEnded(replicas);
  }
  // n3's disk is gone: its incarnation file and its servant's kept state.
  REQUIRE(std::remove(absl::StrCat(cluster.dir(), "/n3.incarnation").c_str()) == 0);
  REQUIRE(std::remove(KeptPath(cluster, 3).c_str()) == 0);
  REQUIRE(cluster.StartNode(1));
  REQUIRE(cluster.StartNode(2));
  REQUIRE(cluster.StartNode(3, {"--replacing"}));
  auto replicas = StartKeeping(cluster, /*rejoin=*/false);
  CHECK(AddAll(cluster, "1") == std::vector<std::string>{"6", "6", "6"});
  auto kept = invocation::ReadKeptState(KeptPath(cluster, 3), "counter");
  REQUIRE(kept.ok());
  REQUIRE(kept->has_value());
  CHECK((*kept)->state == "6");  // the replacement got the state, and keeps it
  std::string refounders;
  for (int i = 1; i <= 3; ++i) {
    if (test::ReadText(cluster.LogPath(i)).find("re-founded in view") != std::string::npos) {
      refounders += absl::StrCat("n", i);
    }
  }
  CHECK(refounders == "n1");  // n1 and n2 kept the same position: the lowest id
}

TEST_CASE("durable group created at run time (CreateGroup durable): every daemon restarted, it "
          "resumes from the state kept; refused by a daemon without incarnation_file",
          "[durable][dynamic][e2e]") {
  test::Cluster cluster{{3, kPlain,
                         "dynamic_groups: {create: [\"*\"], state_file: \"{dir}/{node}.groups\"}\n",
                         "info"}};
  REQUIRE(cluster.Start());
  auto keeping = [&] {
    auto replicas = test::StartCounterReplicas(
        cluster, 3, "dur", [&](int i, test::CounterReplica* replica) {
          replica->kept_path = absl::StrCat(cluster.dir(), "/dur", i, ".kept");
        });
    return replicas;
  };
  {
    auto client = Client::Connect(cluster.ClientAddress(1));
    REQUIRE(client.ok());
    GroupSpec spec{"dur", {"n1", "n2", "n3"}};
    spec.durable = true;
    // Right after a start the daemons restore their directories (none yet): creations wait.
    REQUIRE(Eventually([&] { return (*client)->CreateGroup(spec).ok(); }, 15));
    // The other daemons start the group as they deliver its definition.
    absl::StatusOr<std::vector<std::unique_ptr<test::CounterReplica>>> replicas;
    REQUIRE(Eventually([&] { return (replicas = keeping()).ok(); }, 10));
    REQUIRE(test::WaitAllReply(client->get(), "dur", 3));
    REQUIRE((*client)->Invoke("dur", "add", "5", Mode::kAll).ok());
    std::string out;
    REQUIRE(test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                                 cluster.ClientAddress(2) + " groups", &out) == 0);
    CHECK_THAT(out, Catch::Matchers::Matches("(.|\n)*dur .* yes (.|\n)*"));
    for (int i = 1; i <= 3; ++i) cluster.Kill(i);
    AwaitEnded(*replicas);
  }
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  // The group comes back from the directories' files, then resumes from the servants' files.
  absl::StatusOr<std::vector<std::unique_ptr<test::CounterReplica>>> replicas;
  REQUIRE(Eventually([&] { return (replicas = keeping()).ok(); }, 20));
  auto client = Client::Connect(cluster.ClientAddress(3));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "dur", 3));
  auto added = (*client)->Invoke("dur", "add", "1", Mode::kAll, absl::Seconds(10));
  REQUIRE(added.ok());
  std::vector<std::string> values;
  for (const auto& reply : added->replies) values.push_back(reply.payload);
  CHECK(values == std::vector<std::string>{"6", "6", "6"});
  int refounders = 0;
  for (int i = 1; i <= 3; ++i) {
    const std::string log = test::ReadText(cluster.LogPath(i));
    if (log.find("group dur: re-founded in view") != std::string::npos) ++refounders;
  }
  CHECK(refounders == 1);

  // A daemon without incarnation_file cannot promise it: refused, named; and cohortctl's key.
  test::ClusterOptions without{1, "groups:\n  - {name: counter, members: [n1]}\n",
                               "dynamic_groups: {create: [\"*\"]}\n", "warn"};
  without.incarnation_files = false;
  test::Cluster alone(without);
  const bool started = alone.Start();
  INFO(test::ReadText(alone.LogPath(1)));
  REQUIRE(started);
  auto lone = Client::Connect(alone.ClientAddress(1));
  REQUIRE(lone.ok());
  GroupSpec spec{"dur", {"n1"}};
  spec.durable = true;
  absl::Status refused;
  REQUIRE(Eventually([&] {
    refused = (*lone)->CreateGroup(spec);
    return refused.code() != absl::StatusCode::kUnavailable;  // the directory restores first
  }, 15));
  CHECK(refused.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(refused.message()), Catch::Matchers::Contains("needs incarnation_file"));
  std::string out;
  CHECK(test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                             alone.ClientAddress(1) + " create-group d2 n1 durable=yes", &out) != 0);
  CHECK_THAT(out, Catch::Matchers::Contains("durable must be true or false"));
}

TEST_CASE("durable group: a replica answers only once the state it answers from is on disk, "
          "also when it keeps several deliveries with one write", "[durable][e2e]") {
  test::Cluster cluster{{3, kDurable, "", "warn"}};
  REQUIRE(cluster.Start());
  auto replicas = StartKeeping(cluster, /*rejoin=*/false);
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  std::atomic<int> checked{0}, behind{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int call = 0; call < 50; ++call) {
        auto added = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
        if (!added.ok()) continue;
        for (const auto& reply : added->replies) {
          int64_t answered = 0, kept = 0;
          auto file = invocation::ReadKeptState(KeptPath(cluster, reply.node), "counter");
          if (!absl::SimpleAtoi(reply.payload, &answered) || !file.ok() || !file->has_value() ||
              !absl::SimpleAtoi((*file)->state, &kept) || kept < answered) {
            behind++;
          }
          checked++;
        }
      }
    });
  }
  for (auto& caller : callers) caller.join();
  CHECK(checked.load() == 600);
  CHECK(behind.load() == 0);
}

}  // namespace cohort
