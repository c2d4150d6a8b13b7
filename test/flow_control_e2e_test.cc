// Flow control from the slowest servant (nso/group_flow.h) through real daemons: a client floods
// one-way calls of 16 KiB (80 MiB in all) at a group whose slowest servant takes 1 ms a call, on
// each path a servant reaches its node by: the local fast path, gRPC (other languages), and an
// embedded node's in-process queue. The nodes make the group's new requests wait while that
// servant is behind: the client is slowed by backpressure instead, no member leaves the view,
// and every replica applies every call once, in the order sent. With
// limits.servant_backlog_bytes: 0 (flow control off) the group never holds (this test fails), and
// a servant on the local fast path is cut off at 64 MiB unread and its daemon leaves the group.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

constexpr int kCalls = 5000;
constexpr size_t kPayloadBytes = 16 * 1024;
// The floods keep both cores busy, and tests run two at a time: a daemon may hear nothing from
// the others for over a second, and a call is then refused as unmeetable (fail_fast_after_ms,
// tested by fail_fast_sim_test and stub_e2e_test; here it failed about 1 full suite in 10).
// Flow control is what is tested: that refusal waits 10 s here.
const char kLimits[] =
    "limits: {servant_backlog_bytes: 1048576}\n"
    "failure_detector: {suspect_timeout_ms: 150, fail_fast_after_ms: 10000}\n";

// A replica of an append-only log: "put" appends its payload's number (the text before ':'),
// `slow_ms` a call; "count" answers how many it holds.
struct LogReplica {
  std::unique_ptr<Servant> servant;
  int slow_ms = 0;
  mutable absl::Mutex mu;
  std::vector<int> entries ABSL_GUARDED_BY(mu);
  bool in_order ABSL_GUARDED_BY(mu) = true;  // entry i is i

  ~LogReplica() { servant.reset(); }  // its delivery thread uses the members above

  absl::Status Start(absl::StatusOr<std::unique_ptr<Servant>> created) {
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    servant->Serve("put", [this](const std::string& payload) -> absl::StatusOr<std::string> {
      if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      int number = -1;
      if (!absl::SimpleAtoi(payload.substr(0, payload.find(':')), &number)) {
        return absl::InvalidArgumentError("no number");
      }
      absl::MutexLock lock(&mu);
      in_order = in_order && number == static_cast<int>(entries.size());
      entries.push_back(number);
      return std::string();
    });
    servant->Serve("count", [this](const std::string&) -> absl::StatusOr<std::string> {
      absl::MutexLock lock(&mu);
      return absl::StrCat(entries.size());
    });
    return servant->Start();
  }
  // A servant of the daemon at `address`, on the local fast path or gRPC.
  absl::Status Start(const std::string& address, bool local) {
    ConnectOptions options;
    options.client_name = "log";
    options.local = local;
    return Start(Servant::Create(address, "log", options));
  }
  size_t size() const {
    absl::MutexLock lock(&mu);
    return entries.size();
  }
  bool ordered() const {
    absl::MutexLock lock(&mu);
    return in_order;
  }
};

double Metric(test::Cluster& cluster, int node, const std::string& series) {
  return test::MetricValue(test::HttpGet(cluster.MetricsPort(node), "/metrics"), series);
}

// Floods the log group with kCalls one-way calls from a client of n1 that waits for room, while
// watching whether n1 holds the group's requests; then checks that every replica applied every
// call in order and that no daemon changed the view. `daemons`: n1..daemons are cohortd.
void FloodAndCheck(test::Cluster& cluster, int daemons,
                   const std::vector<std::unique_ptr<LogReplica>>& replicas) {
  ConnectOptions connect;
  connect.backpressure_wait = absl::Seconds(60);
  auto client = Client::Connect(cluster.ClientAddress(1), connect);
  REQUIRE(client.ok());
  REQUIRE(test::Eventually([&] {
    auto all = (*client)->Invoke("log", "count", "", Mode::kAll, absl::Seconds(2));
    return all.ok() && all->replies.size() == replicas.size();
  }, 20));

  std::atomic<bool> flooding{true};
  std::atomic<bool> seen_holding{false};
  std::thread watcher([&] {
    while (flooding && !seen_holding) {
      if (Metric(cluster, 1, "cohort_group_flow_holding{group=\"log\"}") == 1) seen_holding = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const std::string pad(kPayloadBytes, 'x');
  int sent = 0;
  absl::Status failed;
  for (int i = 0; i < kCalls; ++i) {
    absl::Status status = (*client)->Send("log", "put", absl::StrCat(i, ":", pad));
    if (!status.ok()) {
      failed = status;
      break;
    }
    ++sent;
  }
  flooding = false;
  watcher.join();
  INFO("first failure: " << failed.ToString());
  CHECK(sent == kCalls);
  CHECK(seen_holding);  // the group held n1's requests for the slow servant
  const bool applied = test::Eventually([&] {
    for (const auto& replica : replicas) {
      if (replica->size() < static_cast<size_t>(sent)) return false;
    }
    return true;
  }, 60);
  std::string sizes;
  for (const auto& replica : replicas) absl::StrAppend(&sizes, replica->size(), " ");
  INFO("applied: " << sizes << "\n" << cluster.LogTails(20));
  CHECK(applied);
  for (const auto& replica : replicas) {
    CHECK(replica->size() == static_cast<size_t>(sent));
    CHECK(replica->ordered());
  }
  for (int node = 1; node <= daemons; ++node) {
    INFO("node " << node);
    CHECK(Metric(cluster, node, "cohort_view_changes_total{group=\"log\"}") == 0);
    CHECK_THAT(test::ReadText(cluster.LogPath(node)), !Contains("does not read what it is sent"));
  }
  // Once the slow servant caught up nothing waits.
  CHECK(test::Eventually([&] {
    return Metric(cluster, 1, "cohort_group_flow_holding{group=\"log\"}") == 0 &&
           Metric(cluster, 1, "cohort_group_flow_held_requests{group=\"log\"}") == 0;
  }, 10));
}

}  // namespace

TEST_CASE("a servant slower than its group slows the callers instead of being cut off: the "
          "local fast path and gRPC",
          "[flow][e2e]") {
  // The local fast path with both orders; gRPC with one (the node's rules are the same).
  const auto [ordering, path] = GENERATE(table<std::string, std::string>(
      {{"consensus", "local"}, {"sequencer", "local"}, {"consensus", "grpc"}}));
  INFO("ordering " << ordering << ", servants' path " << path);
  test::ClusterOptions options;
  options.groups_yaml = absl::StrCat("groups:\n  - {name: log, members: [n1, n2, n3], ordering: ",
                                     ordering, "}\n");
  options.extra_yaml = kLimits;
  options.metrics = true;
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<LogReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<LogReplica>());
    replicas.back()->slow_ms = i == 3 ? 1 : 0;
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), path == "local").ok());
  }
  FloodAndCheck(cluster, 3, replicas);
  CHECK(Metric(cluster, 3, "cohort_group_servants_behind_total{group=\"log\"}") >= 1);
}

TEST_CASE("a slow servant of an embedded node holds the group too", "[flow][e2e]") {
  // n1..n3 are cohortd processes; n4 is this test process, whose servant is the slow one.
  test::ClusterOptions options;
  options.size = 4;
  options.groups_yaml = "groups:\n  - {name: log, members: [n1, n2, n3, n4]}\n";
  options.extra_yaml = kLimits;
  options.metrics = true;
  test::Cluster cluster(options);
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(4));
  REQUIRE(node.ok());
  std::vector<std::unique_ptr<LogReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<LogReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), /*local=*/true).ok());
  }
  replicas.push_back(std::make_unique<LogReplica>());
  replicas.back()->slow_ms = 1;
  REQUIRE(replicas.back()->Start((*node)->CreateServant("log", "embedded-log")).ok());
  FloodAndCheck(cluster, 3, replicas);
  replicas.clear();  // the servants before their node
}

}  // namespace cohort
