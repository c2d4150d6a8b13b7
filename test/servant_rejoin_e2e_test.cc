// Servant::RejoinAfterDaemonRestart on real daemons, over the local fast path and gRPC: a servant
// whose daemon is killed -9 and restarted registers again by itself and gets the group's state
// (no new servant, no call lost); after every daemon restarted at once the replicas start over
// alike from their Start states; Stop ends a servant still trying to register again, and
// `give_up_after` ends it on its own.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

using test::Eventually;

// Counter replicas on daemons 1..3 (the rejoining ones as `rejoin` says), over `path`.
std::vector<std::unique_ptr<test::CounterReplica>> StartReplicas(const test::Cluster& cluster,
                                                                 const std::string& path,
                                                                 std::set<int> rejoin) {
  auto replicas = test::StartCounterReplicas(
      cluster, 3, "counter", [&](int i, test::CounterReplica* replica) {
        replica->rejoin = rejoin.count(i) > 0;
        replica->connect.local = path == "local";
      });
  REQUIRE(replicas.ok());
  for (const auto& replica : *replicas) CHECK(replica->servant->via() == path);
  return *std::move(replicas);
}

// Every replica answers a wait-for-all "get" with `value`.
bool AllAnswer(Client* client, const std::string& value) {
  auto all = client->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(2));
  if (!all.ok() || all->replies.size() != 3) return false;
  for (const auto& reply : all->replies) {
    if (reply.payload != value) return false;
  }
  return true;
}

TEST_CASE("a servant outlives its daemon's restart: it registers again and gets the group's "
          "state", "[servant][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  test::Cluster cluster{{3, kGroups, "", "info"}};  // (info: the view changes are counted)
  REQUIRE(cluster.Start());
  auto replicas = StartReplicas(cluster, path, {3});
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  REQUIRE((*client)->Invoke("counter", "add", "5", Mode::kAll).ok());

  cluster.Kill(3);
  // While n3 is down the others go on (majority): n3's replica must get these by state transfer.
  CHECK(Eventually([&] {
    return (*client)->Invoke("counter", "add", "2", Mode::kMajority, absl::Seconds(2)).ok();
  }, 20));
  REQUIRE(cluster.StartNode(3));
  // The same Servant object serves again: every replica answers 7, n3's after its state came.
  CHECK(Eventually([&] { return AllAnswer(client->get(), "7"); }, 60));
  CHECK(replicas[2]->servant->rejoins() == 1);
  CHECK_FALSE(replicas[2]->servant->Ended());
  CHECK(replicas[2]->state_installs.load() >= 1);
  CHECK(replicas[2]->servant->via() == path);
  // One view change re-added n3: a member that noticed the restart after another member's
  // re-add was installed used to propose a second one (and a second state transfer).
  const std::string log = test::ReadText(cluster.LogPath(1));
  size_t readds = 0;
  for (size_t at = log.find("(removed [3], added [3])"); at != std::string::npos;
       at = log.find("(removed [3], added [3])", at + 1)) {
    ++readds;
  }
  CHECK(readds == 1);
  // And goes on serving in the group's order.
  auto added = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(5));
  REQUIRE(added.ok());
  REQUIRE(added->replies.size() == 3);
  for (const auto& reply : added->replies) CHECK(reply.payload == "8");
  // A replica without RejoinAfterDaemonRestart ends with its daemon, as before.
  cluster.Kill(2);
  absl::Status why;
  CHECK(Eventually([&] { return replicas[1]->servant->Ended(&why); }, 10));
  CHECK(why.code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("after every daemon restarted at once the rejoining replicas start over alike",
          "[servant][e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  REQUIRE(cluster.Start());
  auto replicas = StartReplicas(cluster, "local", {1, 2, 3});
  {
    auto client = Client::Connect(cluster.ClientAddress(1));
    REQUIRE(client.ok());
    REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
    REQUIRE((*client)->Invoke("counter", "add", "5", Mode::kAll).ok());
  }
  for (int i = 1; i <= 3; ++i) cluster.Kill(i);
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  // A fresh start of the group: no replica keeps a state the others may not have; each is reset
  // to what it had at Start (0), as new servants would be.
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  CHECK(Eventually([&] { return AllAnswer(client->get(), "0"); }, 60));
  for (const auto& replica : replicas) CHECK(replica->servant->rejoins() == 1);
  CHECK(Eventually([&] {
    auto added = (*client)->Invoke("counter", "add", "3", Mode::kAll, absl::Seconds(2));
    return added.ok() && added->replies.size() == 3;
  }, 20));
  CHECK(AllAnswer(client->get(), "3"));
}

TEST_CASE("a servant trying to register again ends on Stop, and on its own after give_up_after",
          "[servant][e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  REQUIRE(cluster.Start());
  auto replicas = StartReplicas(cluster, "local", {2, 3});
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));

  replicas[2]->servant->Stop();  // a servant stopped by its application does not come back
  absl::Status why;
  REQUIRE(Eventually([&] { return replicas[2]->servant->Ended(&why); }, 10));
  CHECK(why.code() == absl::StatusCode::kCancelled);
  CHECK(replicas[2]->servant->rejoins() == 0);

  cluster.Kill(2);  // and stays down
  absl::SleepFor(absl::Seconds(1));  // several attempts have failed by now
  CHECK_FALSE(replicas[1]->servant->Ended());
  const auto stopping = std::chrono::steady_clock::now();
  replicas[1]->servant->Stop();
  CHECK(replicas[1]->servant->Wait().code() == absl::StatusCode::kCancelled);
  // An attempt to attach waits at most 1 s for the daemon (it cannot be cancelled).
  CHECK(std::chrono::steady_clock::now() - stopping < std::chrono::seconds(4));

  // give_up_after: a servant of n1 whose daemon does not come back ends by itself.
  auto servant = Servant::Create(cluster.ClientAddress(1), "counter", "giving-up");
  REQUIRE(servant.ok());
  (*servant)->Serve("get", [](const std::string&) -> absl::StatusOr<std::string> { return "0"; });
  (*servant)->RejoinAfterDaemonRestart(absl::Seconds(1));
  REQUIRE((*servant)->Start().ok());
  cluster.Kill(1);
  CHECK(Eventually([&] { return (*servant)->Ended(&why); }, 15));
  INFO(why.ToString());
  // The last attempt's error: the daemon is gone (UNAVAILABLE) or attaching timed out.
  CHECK((why.code() == absl::StatusCode::kUnavailable ||
         why.code() == absl::StatusCode::kDeadlineExceeded));
  CHECK_THAT(std::string(why.message()), Catch::Matchers::Contains("gave up registering again"));
}

}  // namespace
}  // namespace cohort
