// Group-to-group invocation on real daemons (003 section 4.3): every member of gx calls gy while
// processing the same request; gy executes the call once and every member of gx gets the reply.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: gx
    members: [n1, n2, n3]
  - name: gy
    members: [n4, n5, n6]
    ordering: sequencer
)";

struct Counter {  // a replica of gy
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> value{0};
  std::atomic<int> executions{0};
};

struct Relay {  // a replica of gx: forwards "relay N" to gy as "add N"
  std::unique_ptr<Servant> servant;
};

bool Ready(Client* client, const std::string& group, const std::string& method) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto result = client->Invoke(group, method, "0", Mode::kAll, absl::Seconds(2), Style::kOpen);
    if (result.ok() && result->replies.size() == 3) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// gy's replicas on n4..n6: "add N" adds N and answers the sum.
std::vector<std::unique_ptr<Counter>> StartCounters(test::Cluster& cluster) {
  std::vector<std::unique_ptr<Counter>> counters;
  for (int i = 4; i <= 6; ++i) {
    auto counter = std::make_unique<Counter>();
    auto created = Servant::Create(cluster.ClientAddress(i), "gy");
    REQUIRE(created.ok());
    counter->servant = std::move(*created);
    Counter* raw = counter.get();
    counter->servant->Serve("add", [raw](const std::string& payload) -> absl::StatusOr<std::string> {
      int64_t delta = 0;
      if (!absl::SimpleAtoi(payload, &delta)) return absl::InvalidArgumentError("not a number");
      raw->executions++;
      return absl::StrCat(raw->value += delta);
    });
    REQUIRE(counter->servant->Start().ok());
    counters.push_back(std::move(counter));
  }
  return counters;
}

// gx's replicas on n1..n3, serving `method` with what `make_handler` makes for each servant.
std::vector<std::unique_ptr<Relay>> StartRelays(
    test::Cluster& cluster, const std::string& method,
    const std::function<Servant::Handler(Servant*)>& make_handler) {
  std::vector<std::unique_ptr<Relay>> relays;
  for (int i = 1; i <= 3; ++i) {
    auto relay = std::make_unique<Relay>();
    auto created = Servant::Create(cluster.ClientAddress(i), "gx");
    REQUIRE(created.ok());
    relay->servant = std::move(*created);
    relay->servant->Serve(method, make_handler(relay->servant.get()));
    REQUIRE(relay->servant->Start().ok());
    relays.push_back(std::move(relay));
  }
  return relays;
}

// Every member of gx answered `result` with `payload`.
void CheckEveryReply(const absl::StatusOr<GroupReplies>& result, const std::string& payload) {
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->replies.size() == 3);
  for (const Reply& reply : result->replies) {
    INFO(reply.member << ": " << reply.status.ToString());
    CHECK(reply.status.ok());
    CHECK(reply.payload == payload);
  }
}

}  // namespace

TEST_CASE("003 s4.3: three callers in gx, one execution in gy, every gx member gets the reply",
          "[e2e][invocation]") {
  test::Cluster cluster({6, kGroups, "", "warn"});
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Counter>> counters = StartCounters(cluster);
  std::vector<std::unique_ptr<Relay>> relays =
      StartRelays(cluster, "relay", [](Servant* servant) -> Servant::Handler {
        return [servant](const std::string& payload) -> absl::StatusOr<std::string> {
          auto replies = servant->InvokeGroup("gy", "add", payload, Mode::kAll, absl::Seconds(10));
          if (!replies.ok()) return replies.status();
          if (replies->replies.size() != 3) return absl::InternalError("gy did not answer in full");
          return replies->replies[0].payload;
        };
      });
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  auto gy_client = Client::Connect(cluster.ClientAddress(4));
  REQUIRE(gy_client.ok());
  REQUIRE(Ready(gy_client->get(), "gy", "add"));
  // gx too: a call right after start-up could meet a member not yet heard from (failed fast
  // under load, "wait-for-all needs 3 of 3 members, 2 reachable").
  REQUIRE(Ready(client->get(), "gx", "relay"));
  for (const auto& counter : counters) counter->executions = 0;

  // "5" from each, not 5, 10, 15: gy executed the group's call once.
  CheckEveryReply((*client)->Invoke("gx", "relay", "5", Mode::kAll, absl::Seconds(20)), "5");
  CheckEveryReply((*client)->Invoke("gx", "relay", "2", Mode::kAll, absl::Seconds(20)), "7");
  for (const auto& counter : counters) {
    CHECK(counter->value.load() == 7);
    CHECK(counter->executions.load() == 2);  // once per gx request, at each gy replica
  }
}

TEST_CASE("a group-to-group call refused for backpressure waits for room, then goes",
          "[e2e][invocation][backpressure]") {
  // A backlog of 4 requests per client; one-way calls are not refused UNAVAILABLE while two of
  // gy's members are frozen.
  test::Cluster cluster({6, kGroups,
                         "limits: {max_unordered_requests: 4}\n"
                         "failure_detector: {fail_fast_after_ms: 8000}\n",
                         "warn"});
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Counter>> counters = StartCounters(cluster);
  constexpr int kFanOut = 10;  // one-way calls per "fan": over the backlog while gy orders nothing
  std::vector<std::unique_ptr<Relay>> relays =
      StartRelays(cluster, "fan", [](Servant* servant) -> Servant::Handler {
        return [servant](const std::string&) -> absl::StatusOr<std::string> {
          for (int i = 0; i < kFanOut; ++i) {
            absl::Status sent =
                servant->InvokeGroup("gy", "add", "1", Mode::kOneWay).status();
            if (!sent.ok()) return sent;
          }
          return std::string("sent");
        };
      });
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  auto gy_client = Client::Connect(cluster.ClientAddress(4));
  REQUIRE(gy_client.ok());
  REQUIRE(Ready(gy_client->get(), "gy", "add"));
  for (const auto& counter : counters) counter->executions = 0;
  const int64_t start_value = counters[0]->value.load();

  // gy orders nothing while n5 and n6 are frozen: each gx replica's one-way calls pile up at its
  // daemon, and the fifth is refused for backpressure. The handlers wait for room (without the
  // wait they answer RESOURCE_EXHAUSTED at once) and go on once gy orders again.
  cluster.Pause(5);
  cluster.Pause(6);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto fan = std::async(std::launch::async, [&] {
    return (*client)->Invoke("gx", "fan", "", Mode::kAll, absl::Seconds(20));
  });
  CHECK(fan.wait_for(std::chrono::milliseconds(1500)) == std::future_status::timeout);
  cluster.Resume(5);
  cluster.Resume(6);
  REQUIRE(fan.wait_for(std::chrono::seconds(15)) == std::future_status::ready);
  CheckEveryReply(fan.get(), "sent");
  // gy executed each of the group's calls once, at every replica: none lost, none doubled.
  CHECK(test::Eventually([&] {
    for (const auto& counter : counters) {
      if (counter->executions.load() != kFanOut) return false;
    }
    return true;
  }, 10));
  for (const auto& counter : counters) {
    CHECK(counter->executions.load() == kFanOut);
    CHECK(counter->value.load() == start_value + kFanOut);
  }
}

}  // namespace cohort
