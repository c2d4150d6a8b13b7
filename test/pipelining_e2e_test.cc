// Client pipelining (issue 7): every invocation of a cohort::Client travels on one InvokeStream to
// its daemon, many in flight at once, results matched by call number.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
)";

// Starts the cluster and a counter replica on each of its three daemons.
void StartCounters(test::Cluster* cluster,
                   std::vector<std::unique_ptr<test::CounterReplica>>* replicas) {
  REQUIRE(cluster->Start());
  for (int i = 1; i <= 3; ++i) {
    replicas->push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas->back()->Start(cluster->ClientAddress(i), "counter").ok());
  }
}

}  // namespace

TEST_CASE("pipelining: many callers share one client; a broken stream fails its calls", "[e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  // Both ways to the daemon: its local fast path (Unix socket) and the gRPC InvokeStream.
  ConnectOptions options;
  options.client_name = "pipelined";
  options.local = GENERATE(true, false);
  auto client = Client::Connect(cluster.ClientAddress(2), options);
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == (options.local ? "local" : "grpc"));
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));

  // 32 callers x 10 increments in flight together on the client's one stream: each gets its
  // own result (every value 1..320 exactly once from each replica: the results were not mixed up
  // between calls, and every replica executed the same order).
  constexpr int kThreads = 32;
  constexpr int kCalls = 10;
  absl::Mutex mu;
  std::map<std::string, std::multiset<std::string>> values;  // by member
  std::atomic<int> failures{0};
  std::string first_failure;
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto result = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
        if (!result.ok() || result->replies.size() != 3) {
          failures++;
          absl::MutexLock lock(&mu);
          if (first_failure.empty()) {
            first_failure = result.ok() ? absl::StrCat(result->replies.size(), " replies")
                                        : result.status().ToString();
          }
          continue;
        }
        absl::MutexLock lock(&mu);
        for (const Reply& reply : result->replies) values[reply.member].insert(reply.payload);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  INFO("first failure: " << first_failure);
  INFO((failures.load() == 0 ? "" : cluster.LogTails(40)));
  REQUIRE(failures.load() == 0);
  std::multiset<std::string> expected;
  for (int v = 1; v <= kThreads * kCalls; ++v) expected.insert(std::to_string(v));
  REQUIRE(values.size() == 3);
  for (const auto& [member, seen] : values) {
    INFO("member " << member);
    CHECK(seen == expected);
  }

  // The client's daemon dies: the call on the stream fails UNAVAILABLE, it does not wait out its
  // deadline; once the daemon is back, the next call opens a new stream (and learns that its NSO
  // is gone with the old daemon).
  cluster.Kill(2);
  auto broken = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(30));
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().code() == absl::StatusCode::kUnavailable);
  REQUIRE(cluster.StartNode(2));
  absl::Status last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto again = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(2));
    last = again.status();
    if (last.code() != absl::StatusCode::kUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(last.code() == absl::StatusCode::kNotFound);  // "unknown NSO": a new daemon answered
  replicas.clear();
}

}  // namespace cohort

namespace cohort {

TEST_CASE("pipelining: a frozen daemon cannot hold a caller; the stream starts afresh after it",
          "[e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  // Both ways to the daemon: its local fast path (Unix socket) and the gRPC InvokeStream.
  ConnectOptions options;
  options.client_name = "frozen-daemon";
  options.local = GENERATE(true, false);
  auto client = Client::Connect(cluster.ClientAddress(2), options);
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == (options.local ? "local" : "grpc"));
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));
  REQUIRE((*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(5)).ok());

  // The client's own daemon stops (SIGSTOP): nothing answers, not even the deadline. The call
  // ends by its deadline plus the stub's 2 s of slack, not never.
  cluster.Pause(2);
  auto frozen = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Milliseconds(200));
  REQUIRE_FALSE(frozen.ok());
  CHECK(frozen.status().code() == absl::StatusCode::kDeadlineExceeded);
  cluster.Resume(2);
  // The stream was reset; the next calls go on a new one, to the same NSO.
  absl::Status last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto again = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(2));
    last = again.status();
    if (last.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(last.ok());
  replicas.clear();
}

}  // namespace cohort
