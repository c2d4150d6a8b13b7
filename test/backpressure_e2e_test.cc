// A client whose daemon refuses it for backpressure (limits.max_unordered_requests requests not
// yet ordered; invocation/backpressure.h) waits for room and sends again, for at most
// ConnectOptions::backpressure_wait (a call: at most its deadline), instead of failing: as a
// producer blocks on a full buffer; an asynchronous call likewise, without blocking its caller.
// Three daemons; two of them frozen (SIGSTOP) so that the
// group orders nothing until they go on.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "invocation/backpressure.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";
// A small backlog; one-way calls are not refused UNAVAILABLE while the others are frozen.
const char kLimits[] =
    "limits: {max_unordered_requests: 16}\nfailure_detector: {fail_fast_after_ms: 8000}\n";
constexpr int kBacklog = 16;

absl::StatusOr<std::unique_ptr<Client>> ConnectWith(const std::string& address, bool local,
                                                    absl::Duration wait) {
  ConnectOptions options;
  options.local = local;
  options.backpressure_wait = wait;
  return Client::Connect(address, options);
}

// The counter group on three daemons with a small backlog; clients of n1 by `path` ("local":
// the local fast path, else gRPC).
struct SmallBacklogCluster {
  explicit SmallBacklogCluster(const std::string& path)
      : setup(kGroups, kLimits, "warn", ConnectOptions{}), local(path == "local") {}
  absl::StatusOr<std::unique_ptr<Client>> Connect(absl::Duration wait) {
    return ConnectWith(setup.cluster.ClientAddress(1), local, wait);
  }
  test::CounterCluster setup;
  const bool local;
};

// Freezes n2 and n3: n1 orders nothing alone (no majority), so what its clients send piles up.
void FreezeOthers(test::Cluster& cluster) {
  cluster.Pause(2);
  cluster.Pause(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the signals have landed
}

void ThawOthers(test::Cluster& cluster) {
  cluster.Resume(2);
  cluster.Resume(3);
}

// Fills `client`'s backlog at its daemon: kBacklog one-way "add 1", each accepted at once (no
// wait for room: the client's backlog was empty).
void FillBacklog(Client* client) {
  for (int i = 0; i < kBacklog; ++i) {
    const absl::Time before = absl::Now();
    REQUIRE(client->Send("counter", "add", "1").ok());
    REQUIRE(absl::Now() - before < absl::Seconds(1));  // a wait for room would last 5 s
  }
}

// Everything n1's clients sent is ordered: its backlog (every client's) is empty. A freeze
// after the group ordered again must start from there: a one-way call accepted after a thaw is
// not yet ordered when the call after it has its majority of replies (session 37's failure:
// one request of `waits` still counted made its next fill wait 5 s for room, past the default
// deadline, after which its daemon stops counting requests, short_wait's too).
bool BacklogEmpty(test::Cluster& cluster) {
  return test::Eventually([&] {
    return test::MetricValue(test::HttpGet(cluster.MetricsPort(1), "/metrics"),
                              "cohort_unordered_requests") == 0;
  }, 10);
}

// Every replica of the counter soon holds `accepted`: each accepted add applied once, no refused
// one.
void CheckAppliedEverywhere(Client* client, int accepted) {
  const std::string expected = std::to_string(accepted);
  std::string last;
  const bool applied = test::Eventually([&] {
    auto all = client->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    last = "";
    if (!all.ok() || all->replies.size() != 3) return false;
    for (const Reply& reply : all->replies) {
      last += reply.payload + " ";
      if (reply.payload != expected) return false;
    }
    return true;
  }, 15);
  INFO("the last replies: " << last);
  CHECK(applied);
}

// A wait for room that ran out: the refusal, saying so, after about the wait (at least
// `at_least`).
void CheckWaitedOut(const absl::Status& status, absl::Duration waited, absl::Duration at_least) {
  CHECK(status.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(status.message()), Contains("ms for room"));
  CHECK(waited >= at_least);
  CHECK(waited < absl::Seconds(3));
}

}  // namespace

TEST_CASE("a client refused for backpressure waits for room (backpressure_wait), then fails",
          "[backpressure][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  SmallBacklogCluster small(path);
  REQUIRE(small.setup.counters.ok());
  test::Cluster& cluster = small.setup.cluster;
  const bool local = small.local;
  auto no_wait = small.Connect(absl::ZeroDuration());
  auto waits = small.Connect(absl::Seconds(5));
  auto short_wait = small.Connect(absl::Milliseconds(300));
  REQUIRE(no_wait.ok());
  REQUIRE(waits.ok());
  REQUIRE(short_wait.ok());
  CHECK(std::string((*waits)->via()) == (local ? "local" : "grpc"));

  FreezeOthers(cluster);
  // Without a wait: the request after a full backlog is refused at once, as a backlog refusal.
  FillBacklog(no_wait->get());
  absl::Time before = absl::Now();
  absl::Status refused = (*no_wait)->Send("counter", "add", "1");
  CHECK(absl::Now() - before < absl::Seconds(1));  // no wait (a wait would last 5 s)
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  CHECK(invocation::IsBacklog(refused));
  CHECK_THAT(std::string(refused.message()), Contains("limits.max_unordered_requests"));
  // The daemon's backlog is in its metrics: at least no_wait's 16 requests not yet ordered.
  CHECK(test::MetricValue(test::HttpGet(cluster.MetricsPort(1), "/metrics"),
                           "cohort_unordered_requests") >= kBacklog);

  // With a wait: a one-way call and a call block while the backlog is full, and go once the
  // group orders again; the call's deadline covers its wait. They block past the causal
  // barrier's release (1 s, a fifth of the default deadline): requests not yet ordered still
  // count (until the default deadline, 5 s).
  FillBacklog(waits->get());
  before = absl::Now();
  auto send = std::async(std::launch::async, [&] {
    return (*waits)->Send("counter", "add", "1");
  });
  auto call = std::async(std::launch::async, [&] {
    return (*waits)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(6));
  });
  CHECK(send.wait_for(std::chrono::milliseconds(1600)) == std::future_status::timeout);
  CHECK(call.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  ThawOthers(cluster);
  REQUIRE(send.wait_for(std::chrono::seconds(8)) == std::future_status::ready);
  REQUIRE(call.wait_for(std::chrono::seconds(8)) == std::future_status::ready);
  absl::Status sent = send.get();
  CHECK(sent.ok());
  INFO("send: " << sent.ToString());
  absl::StatusOr<GroupReplies> called = call.get();
  CHECK(called.ok());
  CHECK(absl::Now() - before >= absl::Milliseconds(1600));

  // A wait that runs out: RESOURCE_EXHAUSTED after about backpressure_wait, saying so; a call
  // waits at most its deadline, though backpressure_wait is longer.
  REQUIRE(BacklogEmpty(cluster));
  FreezeOthers(cluster);
  FillBacklog(short_wait->get());
  FillBacklog(waits->get());
  before = absl::Now();
  absl::Status gave_up = (*short_wait)->Send("counter", "add", "1");
  const absl::Duration waited = absl::Now() - before;
  before = absl::Now();
  absl::StatusOr<GroupReplies> late =
      (*waits)->Invoke("counter", "add", "1", Mode::kMajority, absl::Milliseconds(400));
  const absl::Duration late_waited = absl::Now() - before;
  ThawOthers(cluster);
  CheckWaitedOut(gave_up, waited, absl::Milliseconds(250));
  CheckWaitedOut(late.status(), late_waited, absl::Milliseconds(300));

  // Nothing accepted was lost, nothing refused was applied: every replica applied each accepted
  // add once. no_wait 16; waits 16, the blocked Send and call, 16 more; short_wait 16.
  CheckAppliedEverywhere(waits->get(), 4 * kBacklog + 2);
  // Everything ordered: the backlog is empty again.
  CHECK(BacklogEmpty(cluster));
}

TEST_CASE("an asynchronous call refused for backpressure is sent again after pauses, without "
          "blocking its caller, for at most backpressure_wait", "[backpressure][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  SmallBacklogCluster small(path);
  REQUIRE(small.setup.counters.ok());
  test::Cluster& cluster = small.setup.cluster;
  auto waits = small.Connect(absl::Seconds(5));
  auto short_wait = small.Connect(absl::Milliseconds(300));
  REQUIRE(waits.ok());
  REQUIRE(short_wait.ok());

  FreezeOthers(cluster);
  FillBacklog(waits->get());
  const absl::Time before = absl::Now();
  std::promise<absl::StatusOr<GroupReplies>> called;
  (*waits)->InvokeAsync("counter", "add", "1", Mode::kMajority,
                        [&](absl::StatusOr<GroupReplies> result) {
                          called.set_value(std::move(result));
                        },
                        absl::Seconds(6));
  CHECK(absl::Now() - before < absl::Milliseconds(500));  // the caller did not wait
  std::future<absl::StatusOr<GroupReplies>> result = called.get_future();
  // Without the wait the refusal came at once (RESOURCE_EXHAUSTED, backpressure).
  CHECK(result.wait_for(std::chrono::milliseconds(1600)) == std::future_status::timeout);
  ThawOthers(cluster);
  REQUIRE(result.wait_for(std::chrono::seconds(8)) == std::future_status::ready);
  absl::StatusOr<GroupReplies> got = result.get();
  INFO("call: " << got.status().ToString());
  CHECK(got.ok());

  // A wait that runs out: RESOURCE_EXHAUSTED after about backpressure_wait, saying so.
  REQUIRE(BacklogEmpty(cluster));
  FreezeOthers(cluster);
  FillBacklog(short_wait->get());
  const absl::Time refused_from = absl::Now();
  std::promise<absl::Time> gave_up_at;
  std::promise<absl::Status> gave_up;
  (*short_wait)->InvokeAsync("counter", "add", "1", Mode::kMajority,
                             [&](absl::StatusOr<GroupReplies> result) {
                               gave_up_at.set_value(absl::Now());
                               gave_up.set_value(result.status());
                             },
                             absl::Seconds(6));
  std::future<absl::Status> refusal = gave_up.get_future();
  REQUIRE(refusal.wait_for(std::chrono::seconds(4)) == std::future_status::ready);
  const absl::Duration waited = gave_up_at.get_future().get() - refused_from;
  ThawOthers(cluster);
  CheckWaitedOut(refusal.get(), waited, absl::Milliseconds(250));

  // Every accepted add applied once: waits 16 + the call, short_wait 16.
  CheckAppliedEverywhere(waits->get(), 2 * kBacklog + 1);
}

}  // namespace cohort
