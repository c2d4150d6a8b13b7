// The client stub library against real cohortd processes started by the test (issue 2), and the
// coordinator-kill check on real daemons (issue 3).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

using test::CounterReplica;
using test::WaitHealthy;

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
  - name: seqcounter
    members: [n1, n2, n3]
    ordering: sequencer
)";

struct Fixture {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<CounterReplica>> replicas;

  void Start(const std::string& group) {
    REQUIRE(cluster.Start());
    for (int i = 1; i <= 3; ++i) {
      replicas.push_back(std::make_unique<CounterReplica>());
      REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), group).ok());
    }
  }
};

std::set<std::string> Members(const GroupReplies& replies) {
  std::set<std::string> members;
  for (const Reply& reply : replies.replies) members.insert(reply.member);
  return members;
}

}  // namespace

TEST_CASE("stub library: every mode against three real daemons", "[e2e]") {
  for (std::string group : {"counter", "seqcounter"}) {
    DYNAMIC_SECTION("group " << group) {
      Fixture fixture;
      fixture.Start(group);
      auto client = Client::Connect(fixture.cluster.ClientAddress(1), "test");
      REQUIRE(client.ok());
      REQUIRE(WaitHealthy(client->get(), group));

      auto view = (*client)->GroupDetails(group);
      REQUIRE(view.ok());
      CHECK(view->members.size() == 3);
      CHECK(view->view_id >= 1);

      auto all = (*client)->Invoke(group, "add", "5", Mode::kAll, absl::Seconds(10));
      INFO(all.status().ToString());
      REQUIRE(all.ok());
      CHECK(all->replies.size() == 3);
      CHECK(all->wanted == 3);
      CHECK(Members(*all) == std::set<std::string>{"n1", "n2", "n3"});
      for (const Reply& reply : all->replies) {
        CHECK(reply.status.ok());
        CHECK(reply.payload == "5");
      }

      auto first = (*client)->Invoke(group, "add", "10", Mode::kFirst, absl::Seconds(10));
      REQUIRE(first.ok());
      CHECK(first->replies.size() >= 1);
      CHECK(first->wanted == 1);
      CHECK(first->replies[0].payload == "15");

      auto majority = (*client)->Invoke(group, "add", "100", Mode::kMajority, absl::Seconds(10));
      REQUIRE(majority.ok());
      CHECK(majority->replies.size() >= 2);
      CHECK(majority->wanted == 2);
      for (const Reply& reply : majority->replies) CHECK(reply.payload == "115");

      REQUIRE((*client)->Send(group, "add", "1000").ok());
      // The one-way call is ordered before the next call from the same client (FIFO order).
      auto get = (*client)->Invoke(group, "get", "", Mode::kAll, absl::Seconds(10));
      REQUIRE(get.ok());
      REQUIRE(get->replies.size() == 3);
      for (const Reply& reply : get->replies) CHECK(reply.payload == "1115");
    }
  }
}

TEST_CASE("stub library: bad input gets a clear status and the daemon keeps serving", "[e2e]") {
  test::Cluster cluster({3, kGroups, "limits:\n  max_payload_bytes: 1024\n", "warn"});
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  auto client = Client::Connect(cluster.ClientAddress(2), "test");
  REQUIRE(client.ok());
  REQUIRE(WaitHealthy(client->get(), "counter"));

  auto unknown_group = (*client)->Invoke("nosuch", "add", "1", Mode::kAll);
  CHECK(unknown_group.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(unknown_group.status().message()), Catch::Contains("nosuch"));

  auto oversized = (*client)->Invoke("counter", "add", std::string(2048, 'x'), Mode::kAll);
  CHECK(oversized.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(oversized.status().message()), Catch::Contains("max_payload_bytes"));

  auto unknown_method = (*client)->Invoke("counter", "mul", "2", Mode::kAll, absl::Seconds(10));
  REQUIRE(unknown_method.ok());
  REQUIRE(unknown_method->replies.size() == 3);
  for (const Reply& reply : unknown_method->replies) {
    CHECK(reply.status.code() == absl::StatusCode::kUnimplemented);
    CHECK_THAT(std::string(reply.status.message()), Catch::Contains("mul"));
  }

  auto servant_error = (*client)->Invoke("counter", "add", "two", Mode::kFirst, absl::Seconds(10));
  REQUIRE(servant_error.ok());
  CHECK(servant_error->replies[0].status.code() == absl::StatusCode::kInvalidArgument);

  auto bad_servant = Servant::Create(cluster.ClientAddress(1), "nosuch");
  REQUIRE(bad_servant.ok());
  absl::Status registered = (*bad_servant)->Start();
  CHECK(registered.code() == absl::StatusCode::kNotFound);

  // A frozen member: wait-for-all cannot be met. Silent for less than
  // failure_detector.fail_fast_after_ms (1000 ms) the call waits (it ends at its deadline);
  // wait-for-majority still is met.
  cluster.Pause(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto all = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Milliseconds(500));
  CHECK((all.status().code() == absl::StatusCode::kUnavailable ||
         all.status().code() == absl::StatusCode::kDeadlineExceeded));
  auto majority = (*client)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(10));
  REQUIRE(majority.ok());
  CHECK(majority->replies.size() >= 2);
  // Silent for longer: refused at once (UNAVAILABLE naming why), not after its 10 s deadline.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  auto refused = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("2 reachable"));
  cluster.Resume(3);

  // The daemon still serves.
  auto get = (*client)->Invoke("counter", "get", "", Mode::kMajority, absl::Seconds(10));
  REQUIRE(get.ok());
}

TEST_CASE("real daemons: a coordinator killed mid-stream loses and reorders nothing",
          "[e2e][consensus]") {
  for (std::string group : {"counter", "seqcounter"}) {
    DYNAMIC_SECTION("group " << group) {
      Fixture fixture;
      fixture.Start(group);
      // n1 coordinates round 1 of every consensus instance (and is the first sequencer).
      auto client = Client::Connect(fixture.cluster.ClientAddress(2), "test");
      REQUIRE(client.ok());
      REQUIRE(WaitHealthy(client->get(), group));
      std::vector<int64_t> acknowledged;
      int calls = 0;
      for (; calls < 200; ++calls) {
        if (calls == 60) fixture.cluster.Kill(1);
        auto result = (*client)->Invoke(group, "add", "1", Mode::kMajority, absl::Seconds(10));
        if (!result.ok()) {
          // Not acknowledged: a call may fail while the coordinator is suspected or the view
          // changes (it fails fast, so wait a little before the next one; a loaded machine can
          // delay heartbeats past the 50 ms suspicion timeout).
          UNSCOPED_INFO("call " << calls << ": " << result.status().ToString());
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          continue;
        }
        REQUIRE(result->replies.size() >= 2);
        int64_t value = 0;
        REQUIRE(absl::SimpleAtoi(result->replies[0].payload, &value));
        for (const Reply& reply : result->replies) CHECK(reply.payload == result->replies[0].payload);
        acknowledged.push_back(value);
      }
      REQUIRE(acknowledged.size() >= 150);
      // Each acknowledged add saw a strictly larger total than the previous one: nothing lost,
      // nothing applied twice, the same order everywhere.
      for (size_t i = 1; i < acknowledged.size(); ++i) CHECK(acknowledged[i] > acknowledged[i - 1]);
      auto get = (*client)->Invoke(group, "get", "", Mode::kMajority, absl::Seconds(10));
      REQUIRE(get.ok());
      for (const Reply& reply : get->replies) {
        CHECK(reply.payload == absl::StrCat(acknowledged.back()));
      }
      CHECK(fixture.replicas[1]->value.load() == fixture.replicas[2]->value.load());
    }
  }
}

}  // namespace cohort
