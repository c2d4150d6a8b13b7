// Flexible group invocation on real daemons (issue 5; 003 sections 2.1 and 4): every mode x
// {open, closed} x {consensus, sequencer}, callers inside and outside the server group, the
// request manager killed mid-call, and asynchronous forwarding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

using Replica = test::CounterReplica;
using test::WaitHealthy;

// n1..n3 host the groups; n4 hosts no member, so its clients call from outside the server group.
constexpr char kGroups[] = R"(groups:
  - name: cons
    members: [n1, n2, n3]
    ordering: consensus
  - name: seq
    members: [n1, n2, n3]
    ordering: sequencer
)";

struct Fixture {
  test::Cluster cluster{{4, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<Replica>> replicas;

  void Start(const std::string& group) {
    REQUIRE(cluster.Start());
    for (int i = 1; i <= 3; ++i) {
      replicas.push_back(std::make_unique<Replica>());
      absl::Status started = replicas.back()->Start(cluster.ClientAddress(i), group);
      INFO("replica " << i << ": " << started.ToString());
      REQUIRE(started.ok());
    }
    auto probe = Client::Connect(cluster.ClientAddress(1));
    REQUIRE(probe.ok());
    REQUIRE(WaitHealthy(probe->get(), group));
    // Let n4's streams to the members come up too.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  // A client of n4, which hosts no member: it calls from outside the server group.
  std::unique_ptr<Client> Outside(const std::string& name = "outside") {
    auto client = Client::Connect(cluster.ClientAddress(4), name);
    REQUIRE(client.ok());
    return *std::move(client);
  }
};

uint32_t Wanted(Mode mode) {
  switch (mode) {
    case Mode::kFirst: return 1;
    case Mode::kMajority: return 2;
    case Mode::kAll: return 3;
    default: return 0;
  }
}

}  // namespace

TEST_CASE("003 s2.1/4.1: every mode x open/closed x ordering, callers inside and outside",
          "[e2e][invocation]") {
  for (std::string group : {"cons", "seq"}) {
    DYNAMIC_SECTION("group " << group) {
      Fixture fixture;
      fixture.Start(group);
      auto inside = Client::Connect(fixture.cluster.ClientAddress(2), "inside");
      REQUIRE(inside.ok());
      std::unique_ptr<Client> outside = fixture.Outside();
      int64_t expected = 0;
      for (Client* client : {inside->get(), outside.get()}) {
        for (Style style : {Style::kClosed, Style::kOpen}) {
          for (Mode mode : {Mode::kFirst, Mode::kMajority, Mode::kAll}) {
            INFO("client " << (client == inside->get() ? "inside" : "outside") << ", "
                           << (style == Style::kOpen ? "open" : "closed") << ", "
                           << invocation::ModeName(mode));
            auto result = client->Invoke(group, "add", "1", mode, absl::Seconds(10), style);
            INFO(result.status().ToString());
            REQUIRE(result.ok());
            expected++;
            CHECK(result->wanted == Wanted(mode));
            CHECK(result->replies.size() >= Wanted(mode));
            for (const Reply& reply : result->replies) {
              CHECK(reply.status.ok());
              CHECK(reply.payload == absl::StrCat(expected));
            }
          }
          REQUIRE(client->Invoke(group, "add", "1", Mode::kOneWay, absl::Seconds(10), style).ok());
          expected++;
          // A one-way call returns once accepted, before it is ordered: a later call of the same
          // client is ordered after it (FIFO per sender), while another client's call need not
          // be. From outside the group, the one-way call goes through the request manager, an
          // open call too, and a closed call goes to every member but is ordered by that same
          // manager (the others stand by), so the get, in the same style, sees the add.
          auto synced = client->Invoke(group, "get", "", Mode::kAll, absl::Seconds(10), style);
          INFO("get after one-way: " << synced.status().ToString());
          REQUIRE(synced.ok());
          for (const Reply& reply : synced->replies) CHECK(reply.payload == absl::StrCat(expected));
        }
      }
      auto get = outside->Invoke(group, "get", "", Mode::kAll, absl::Seconds(10), Style::kOpen);
      REQUIRE(get.ok());
      REQUIRE(get->replies.size() == 3);
      for (const Reply& reply : get->replies) CHECK(reply.payload == absl::StrCat(expected));
      // Closed calls from outside reach every server (one orders each, the others stand by) and
      // open calls may be retried through another manager: the reply cache executes each once.
      for (const auto& replica : fixture.replicas) CHECK(replica->executions.load() == expected);  // "add" calls only
    }
  }
}

TEST_CASE("003 s4.2: asynchronous forwarding: wait-for-first through an open group is answered "
          "by the first replica, straight to the caller's node", "[e2e][invocation]") {
  for (std::string group : {"cons", "seq"}) {
    DYNAMIC_SECTION("group " << group) {
      Fixture fixture;
      fixture.Start(group);
      std::unique_ptr<Client> outside = fixture.Outside();
      auto result =
          outside->Invoke(group, "add", "7", Mode::kFirst, absl::Seconds(10), Style::kOpen);
      REQUIRE(result.ok());
      REQUIRE(result->replies.size() == 1);
      CHECK(result->replies[0].payload == "7");
      // The request manager's own replica (n1) is slow now: the call does not wait for it, a
      // replica that executed it first answers (the manager relays nothing).
      fixture.replicas[0]->slow_ms = 4000;
      const absl::Time start = absl::Now();
      auto second =
          outside->Invoke(group, "add", "1", Mode::kFirst, absl::Seconds(10), Style::kOpen);
      const absl::Duration took = absl::Now() - start;
      REQUIRE(second.ok());
      REQUIRE(second->replies.size() == 1);
      CHECK(second->replies[0].member != "n1");
      // Not by a retry through another manager either: n4 retries after 10 suspect timeouts
      // (1.5 s here); a replica's direct answer takes milliseconds (generous bound).
      CHECK(took < absl::Milliseconds(1200));
      CHECK(second->replies[0].payload == "8");
      fixture.replicas[0]->slow_ms = 0;
      auto get = outside->Invoke(group, "get", "", Mode::kAll, absl::Seconds(10), Style::kOpen);
      REQUIRE(get.ok());
      for (const Reply& reply : get->replies) CHECK(reply.payload == "8");  // all executed both
    }
  }
}

TEST_CASE("003 s4.1: a request manager killed mid-call: the retry returns the original result "
          "and the counter moved once", "[e2e][invocation]") {
  for (std::string group : {"cons", "seq"}) {
    DYNAMIC_SECTION("group " << group) {
      Fixture fixture;
      fixture.Start(group);
      std::unique_ptr<Client> outside = fixture.Outside();
      REQUIRE(outside->Invoke(group, "add", "10", Mode::kAll, absl::Seconds(10), Style::kOpen).ok());
      for (int i = 1; i < 3; ++i) fixture.replicas[i]->slow_ms = 600;  // n2, n3 answer late
      std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        fixture.cluster.Kill(1);  // n1: the request manager of the call below
      });
      auto result = outside->Invoke(group, "add", "5", Mode::kMajority, absl::Seconds(10),
                                       Style::kOpen);
      killer.join();
      INFO(result.status().ToString());
      REQUIRE(result.ok());
      REQUIRE(result->replies.size() >= 2);
      for (const Reply& reply : result->replies) CHECK(reply.payload == "15");
      for (int i = 1; i < 3; ++i) {
        fixture.replicas[i]->slow_ms = 0;
        CHECK(fixture.replicas[i]->value.load() == 15);      // moved once
        CHECK(fixture.replicas[i]->executions.load() == 2);  // executed once per call
      }
    }
  }
}

}  // namespace cohort

namespace cohort {

TEST_CASE("bad input: a deadline too short gets DEADLINE_EXCEEDED; the daemon keeps serving",
          "[e2e][invocation]") {
  Fixture fixture;
  fixture.Start("cons");
  auto client = Client::Connect(fixture.cluster.ClientAddress(2));
  REQUIRE(client.ok());
  for (const auto& replica : fixture.replicas) replica->slow_ms = 300;
  auto late = (*client)->Invoke("cons", "add", "1", Mode::kAll, absl::Milliseconds(50));
  CHECK(late.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK_THAT(std::string(late.status().message()), Catch::Contains("within 50 ms"));
  for (const auto& replica : fixture.replicas) replica->slow_ms = 0;
  auto next = (*client)->Invoke("cons", "add", "1", Mode::kAll, absl::Seconds(10));
  REQUIRE(next.ok());
  CHECK(next->replies.size() == 3);
}

}  // namespace cohort
