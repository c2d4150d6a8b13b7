// Embedded mode (issue 7; 003 section 3): an application runs its own node in-process, a member of
// a group with three real cohortd daemons; its Client and Servant are the stub library's classes.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3, n4]
    ordering: consensus
)";

// The same counter as test::CounterReplica, served by the embedded node's Servant.
struct EmbeddedCounter {
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> value{0};

  absl::Status Start(EmbeddedNode* node) {
    auto created = node->CreateServant("counter", "embedded-counter");
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    servant->Serve("add", [this](const std::string& payload) -> absl::StatusOr<std::string> {
      int64_t delta = 0;
      if (!absl::SimpleAtoi(payload, &delta)) return absl::InvalidArgumentError("not a number");
      return absl::StrCat(value += delta);
    });
    servant->Serve("get", [this](const std::string&) -> absl::StatusOr<std::string> {
      return absl::StrCat(value.load());
    });
    return servant->Start();
  }
};

std::set<std::string> Members(const GroupReplies& replies) {
  std::set<std::string> members;
  for (const Reply& reply : replies.replies) members.insert(reply.member);
  return members;
}

}  // namespace

TEST_CASE("embedded node: a member of a group with three daemons invokes and serves", "[e2e]") {
  // n1..n3 are cohortd processes; n4 is this test process (its YAML is written by the helper).
  test::Cluster cluster{{4, kGroups, "", "warn"}};
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(4));
  REQUIRE(node.ok());
  REQUIRE((*node)->node_name() == "n4");

  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  EmbeddedCounter local;
  REQUIRE(local.Start(node->get()).ok());

  auto client = (*node)->Connect("embedded-app");
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));
  auto view = (*client)->GroupDetails("counter");
  REQUIRE(view.ok());
  CHECK(view->members.size() == 4);

  SECTION("the embedded client's wait-for-all call is answered by all four replicas") {
    auto result = (*client)->Invoke("counter", "add", "5", Mode::kAll, absl::Seconds(5));
    REQUIRE(result.ok());
    CHECK(result->wanted == 4);
    CHECK(Members(*result) == std::set<std::string>{"n1", "n2", "n3", "n4"});
    for (const Reply& reply : result->replies) {
      CHECK(reply.status.ok());
      CHECK(reply.payload == "5");
    }
    // A client of a daemon reaches the embedded servant too, in the same total order.
    auto remote = Client::Connect(cluster.ClientAddress(1), "remote-app");
    REQUIRE(remote.ok());
    auto second = (*remote)->Invoke("counter", "add", "2", Mode::kAll, absl::Seconds(5));
    REQUIRE(second.ok());
    CHECK(Members(*second).count("n4") == 1);
    for (const Reply& reply : second->replies) CHECK(reply.payload == "7");
    CHECK(local.value.load() == 7);
  }

  SECTION("concurrent calls from the embedded client keep one total order at every replica") {
    constexpr int kThreads = 8;
    constexpr int kCalls = 15;
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kThreads; ++t) {
      callers.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          auto result = (*client)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(5));
          if (!result.ok() || result->replies.size() < result->wanted) failures++;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    CHECK(failures.load() == 0);
    auto all = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    REQUIRE(all->replies.size() == 4);
    for (const Reply& reply : all->replies) CHECK(reply.payload == absl::StrCat(kThreads * kCalls));
  }

  SECTION("errors are the daemon mode's: unknown group, one-way and multicast accepted") {
    auto unknown = (*client)->Invoke("nope", "add", "1", Mode::kAll, absl::Seconds(1));
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
    CHECK((*client)->Send("counter", "add", "1").ok());
    CHECK((*client)->Multicast("counter", "hello").ok());
  }

  client->reset();
  local.servant.reset();
  replicas.clear();
  (*node)->Shutdown();
}
}  // namespace cohort
