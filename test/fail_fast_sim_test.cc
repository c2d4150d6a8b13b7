// Fail fast (RELIABILITY.md, "Fewer than half of a view fail at once"): where no majority of a
// group's view has been heard for failure_detector.fail_fast_after_ms, a new one-way call or
// multicast is refused at once, UNAVAILABLE naming why, as a call with replies is. Accepted, it
// would wait unordered until the partition heals. A node outside the group does not watch its
// members: its requests wait at the request manager, and new ones are refused once the oldest
// has waited half its deadline (the second case). Nodes on the simulated network.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "invocation/backpressure.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

absl::Status OneWay(nso::Node* node, uint64_t nso) {
  nso::InvokeOptions options;
  options.group = "g";
  options.method = "add";
  options.payload = "1";
  options.mode = invocation::Mode::kOneWay;
  options.mode_given = true;
  absl::Status status = absl::UnknownError("no answer");
  node->Invoke(nso, options, [&](nso::InvokeResult result) { status = result.status; });
  return status;
}

// n1..n4, group g on n1..n3 (each with a servant counting its one-way deliveries in
// `delivered`), every node's default deadline `deadline_ms`; runs until all have heard all.
void AddNodes(test::SimNodes* sim, nso::GroupConfig::Ordering ordering, int64_t deadline_ms,
              std::map<NodeId, int>* delivered) {
  for (NodeId id = 1; id <= 4; ++id) {
    nso::Config config = test::GroupOfThree(id, ordering);
    config.limits.default_deadline_ms = deadline_ms;
    nso::Node* node = sim->Add(config);
    if (id == 4) continue;
    uint64_t servant = *node->Attach("servant");
    REQUIRE(node->RegisterServant(servant, "g", [delivered, id](nso::ServantDelivery d) {
                  if (d.one_way) ++(*delivered)[id];
                }).ok());
  }
  sim->net.RunUntil(500);
}

}  // namespace

TEST_CASE("a member cut off from the majority refuses multicasts and one-way calls at once, and "
          "accepts them again once it hears the majority", "[invocation][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    test::SimNodes sim(/*seed=*/21);
    std::map<NodeId, int> delivered;  // multicasts and one-way calls per replica
    AddNodes(&sim, ordering, /*deadline_ms=*/5000, &delivered);
    nso::Node* n1 = sim.nodes[1].get();
    nso::Node* n4 = sim.nodes[4].get();  // hosts no member: its requests go to a manager
    uint64_t client = *n1->Attach("client");
    uint64_t outside = *n4->Attach("outside");
    REQUIRE(n1->Multicast(client, "g", "before").ok());
    REQUIRE(OneWay(n1, client).ok());
    REQUIRE(n4->Multicast(outside, "g", "from outside").ok());
    sim.net.RunUntil(sim.net.now_ms() + 200);

    // n2 and n3 stop (SIGSTOP): n1 is alone, its streams up. Within fail_fast_after_ms (1 s)
    // a request is still accepted (a live member is often that late on a loaded machine) ...
    sim.Freeze(2);
    sim.Freeze(3);
    sim.net.RunUntil(sim.net.now_ms() + 300);
    CHECK(n1->Multicast(client, "g", "early").ok());
    // ... past it, refused at once.
    sim.net.RunUntil(sim.net.now_ms() + 1200);
    absl::Status multicast = n1->Multicast(client, "g", "late");
    CHECK(multicast.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(multicast.message()), Catch::Contains("needs 2 of 3 members, 1 reachable"));
    absl::Status one_way = OneWay(n1, client);
    CHECK(one_way.code() == absl::StatusCode::kUnavailable);
    CHECK(one_way.message() == multicast.message());
    // Outside the group n4 does not watch the members (no failure detector of the group), so it
    // cannot tell: it accepts, and its request manager n1 holds the request until it is ordered.
    CHECK(n4->Multicast(outside, "g", "late from outside").ok());

    // Back: the accepted requests are delivered everywhere (the refused one nowhere), and new
    // ones are accepted again.
    sim.Thaw(2);
    sim.Thaw(3);
    sim.net.RunUntil(sim.net.now_ms() + 1000);
    for (NodeId id : {1, 2, 3}) {
      INFO("replica n" << id);
      CHECK(delivered[id] == 5);  // before, the one-way call, from outside, early, late from outside
    }
    CHECK(n1->Multicast(client, "g", "after").ok());
    CHECK(OneWay(n1, client).ok());
    CHECK(n4->Multicast(outside, "g", "after").ok());
    sim.net.RunUntil(sim.net.now_ms() + 500);
    for (NodeId id : {1, 2, 3}) {
      INFO("replica n" << id);
      CHECK(delivered[id] == 8);
    }
  }
}

}  // namespace cohort

namespace cohort {

TEST_CASE("from outside the group, one-way calls and multicasts are refused once the oldest still "
          "unordered has waited half its deadline, and accepted again once it is ordered",
          "[invocation][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    test::SimNodes sim(/*seed=*/22);
    std::map<NodeId, int> delivered;
    AddNodes(&sim, ordering, /*deadline_ms=*/2000, &delivered);
    nso::Node* n4 = sim.nodes[4].get();  // hosts no member
    uint64_t outside = *n4->Attach("outside");
    REQUIRE(n4->Multicast(outside, "g", "first").ok());
    sim.net.RunUntil(sim.net.now_ms() + 100);
    REQUIRE(n4->outside_unordered() == 0);  // ordered, and n4 told so

    // n4's request manager (n1) loses its majority: n4's requests wait there, unordered.
    sim.Freeze(2);
    sim.Freeze(3);
    REQUIRE(n4->Multicast(outside, "g", "waits").ok());
    sim.net.RunUntil(sim.net.now_ms() + 600);
    CHECK(n4->Multicast(outside, "g", "waits too").ok());  // the oldest waited 600 of 2000 ms
    sim.net.RunUntil(sim.net.now_ms() + 500);
    CHECK(n4->outside_unordered() == 2);
    absl::Status refused = n4->Multicast(outside, "g", "refused");  // 1100 of 2000 ms
    CHECK(refused.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(refused.message()),
               Catch::Contains("2 one-way call(s) or multicast(s) from this node not yet known "
                               "ordered, the oldest for 1100 ms, over half its deadline (2000 ms)"));
    CHECK_THAT(std::string(refused.message()), Catch::Contains("not ordering them"));
    CHECK(OneWay(n4, outside).code() == absl::StatusCode::kUnavailable);

    // The majority is back before the deadline: the accepted requests are ordered, none was
    // given up, and new ones are accepted again.
    sim.Thaw(2);
    sim.Thaw(3);
    sim.net.RunUntil(sim.net.now_ms() + 500);
    CHECK(n4->outside_unordered() == 0);
    CHECK(n4->outside_counters().given_up == 0);
    CHECK(n4->Multicast(outside, "g", "after").ok());
    CHECK(OneWay(n4, outside).ok());
    sim.net.RunUntil(sim.net.now_ms() + 500);
    for (NodeId id : {1, 2, 3}) {
      INFO("replica n" << id);
      CHECK(delivered[id] == 5);  // first, waits, waits too, after, the one-way call
    }
  }
}

}  // namespace cohort

namespace cohort {

TEST_CASE("from outside the group, a group that orders slowly (overload) refuses for backpressure, "
          "not UNAVAILABLE, and loses nothing it accepted", "[invocation][sim][backpressure]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    test::SimNodes sim(/*seed=*/23);
    std::map<NodeId, int> delivered;
    AddNodes(&sim, ordering, /*deadline_ms=*/1000, &delivered);
    nso::Node* n4 = sim.nodes[4].get();  // hosts no member
    uint64_t outside = *n4->Attach("outside");
    // Every message now takes 150 ms: a request from outside is reported ordered some 600 ms
    // after it was sent (to the manager, a proposal, an acknowledgement, the notice), more than
    // half its deadline, while notices keep coming.
    sim.net.SetDelay(150, 150);
    int accepted = 0, backlog = 0, unavailable = 0;
    std::string unexpected;
    for (int step = 0; step < 60; ++step) {
      absl::Status status = OneWay(n4, outside);
      if (status.ok()) {
        ++accepted;
      } else if (invocation::IsBacklog(status)) {
        ++backlog;
        if (backlog == 1) CHECK_THAT(std::string(status.message()), Catch::Contains("overload"));
      } else {
        ++unavailable;
        unexpected = status.ToString();
      }
      sim.net.RunUntil(sim.net.now_ms() + 50);
    }
    INFO("accepted " << accepted << ", backlog " << backlog << ", other " << unexpected);
    CHECK(backlog > 0);       // the slow group did push back
    CHECK(unavailable == 0);  // but was never taken for one that orders nothing
    CHECK(accepted > 10);
    sim.net.SetDelay(1, 1);
    sim.net.RunUntil(sim.net.now_ms() + 2000);
    CHECK(n4->outside_counters().given_up == 0);
    for (NodeId id : {1, 2, 3}) {
      INFO("replica n" << id);
      CHECK(delivered[id] == accepted);
    }
  }
}

}  // namespace cohort

namespace cohort {

TEST_CASE("from outside the group, a node whose stream to its request manager is down is refused "
          "UNAVAILABLE, not for backpressure, and loses nothing once the partition heals",
          "[invocation][sim]") {
  // cohort-sim --stack --leaves --streams-break --calls-per-step 4, seed 210293: a node cut off
  // alone was refused "the group orders them slower than they come (overload ...)", as a call of
  // its had been reported ordered within fail_fast_after_ms; the client would have waited for
  // room that no ordering would make.
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  test::SimNodes sim(/*seed=*/24, /*delay_max_ms=*/3, /*streams_break=*/true);
  std::map<NodeId, int> delivered;
  AddNodes(&sim, nso::GroupConfig::Ordering::kConsensus, /*deadline_ms=*/1500, &delivered);
  nso::Node* n4 = sim.nodes[4].get();  // hosts no member
  uint64_t outside = *n4->Attach("outside");
  REQUIRE(n4->Multicast(outside, "g", "first").ok());
  sim.net.RunUntil(sim.net.now_ms() + 100);
  REQUIRE(n4->outside_unordered() == 0);

  sim.net.Partition({{4}, {1, 2, 3}});
  REQUIRE(n4->Multicast(outside, "g", "cut off").ok());  // the oldest: accepted at once
  sim.net.RunUntil(sim.net.now_ms() + 800);  // over half its deadline, within fail_fast_after_ms
  absl::Status refused = n4->Multicast(outside, "g", "refused");
  CHECK(refused.code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(invocation::IsBacklog(refused));
  CHECK_THAT(std::string(refused.message()), Catch::Contains("the stream to its request manager"));
  CHECK_THAT(std::string(refused.message()), Catch::Contains("has been down for"));

  // Healed before its deadline: the accepted one is sent again at once and ordered.
  sim.net.Heal();
  sim.net.RunUntil(sim.net.now_ms() + 400);
  CHECK(n4->outside_unordered() == 0);
  CHECK(n4->outside_counters().given_up == 0);
  for (NodeId id : {1, 2, 3}) {
    INFO("replica n" << id);
    CHECK(delivered[id] == 2);  // first, cut off
  }
}

}  // namespace cohort
