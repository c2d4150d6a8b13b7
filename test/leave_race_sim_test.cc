// LeaveGroup while a join request is on its way (seen in peers_reload_e2e_test): n4 attaches a
// servant, so it asks to join group g, and is told to leave before the members have added it.
// The join request still gets it added; with the state installed it leaves again, so the group
// ends without it. Before, it stayed a member for good although it had been told to leave.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;
using test::InView;

// Nodes n1..`nodes` (n4 outside group g), counters served at n1..n3, run until 300 ms.
struct Started {
  Started(uint64_t seed, NodeId nodes) : sim(seed), counters(&sim) {
    for (NodeId id = 1; id <= nodes; ++id) {
      sim.Add(test::GroupOfThree(id, nso::GroupConfig::Ordering::kConsensus));
    }
    for (NodeId id = 1; id <= 3; ++id) counters.Serve(id, "g");
    sim.net.RunUntil(300);
  }
  test::SimNodes sim;
  test::SimCounters counters;
};

TEST_CASE("a node told to leave while its join request is on its way leaves once added",
          "[membership][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    INFO("seed " << seed);
    Started started(seed, 4);
    test::SimNodes& sim = started.sim;
    test::SimCounters& counters = started.counters;
    counters.Serve(4, "g");  // n4 asks to join at once
    REQUIRE(sim.nodes[4]->LeaveGroup("g").ok());  // not a member yet: nothing to propose
    bool added = false;
    for (int waited = 0; waited < 5000; waited += 5) {
      sim.net.RunUntil(sim.net.now_ms() + 5);
      if (InView(sim.nodes[1].get(), 4)) added = true;
    }
    // The request in flight was honoured (the race happened), and n4 left again.
    CHECK(added);
    for (NodeId id = 1; id <= 3; ++id) {
      INFO("n" << id);
      CHECK_FALSE(InView(sim.nodes[id].get(), 4));
      CHECK(InView(sim.nodes[id].get(), id));
    }
    CHECK(counters.state_installs[4] == 1);
  }
}

TEST_CASE("a leave whose view change is overtaken by another is proposed again until it applies",
          "[membership][sim]") {
  // LeaveGroup proposes the view without this node from the current view; a join agreed first
  // makes that proposal stale (membership::ApplyChange). Before, the node then stayed a member.
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  int overtaken = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    for (uint64_t offset_ms = 0; offset_ms <= 6; ++offset_ms) {
      INFO("seed " << seed << " offset " << offset_ms);
      Started started(seed, 4);
      test::SimNodes& sim = started.sim;
      test::SimCounters& counters = started.counters;
      counters.Serve(4, "g");  // n4 asks to join at once
      sim.net.RunUntil(sim.net.now_ms() + offset_ms);
      const uint64_t view_before = sim.nodes[1]->GroupDetails("g")->view_id;
      REQUIRE(sim.nodes[1]->LeaveGroup("g").ok());
      // A later view with both n1 and n4: the join was agreed while the leave was pending.
      bool both = false;
      for (int step = 0; step < 50; ++step) {
        sim.net.RunUntil(sim.net.now_ms() + 1);
        both = both || (InView(sim.nodes[2].get(), 1) && InView(sim.nodes[2].get(), 4) &&
                        sim.nodes[2]->GroupDetails("g")->view_id > view_before);
      }
      overtaken += both;
      sim.net.RunUntil(sim.net.now_ms() + 5000);
      for (NodeId id = 2; id <= 4; ++id) {
        INFO("n" << id);
        CHECK_FALSE(InView(sim.nodes[id].get(), 1));
        CHECK(InView(sim.nodes[id].get(), 4));
      }
      CHECK_FALSE(InView(sim.nodes[1].get(), 1));
    }
  }
  CHECK(overtaken > 0);  // the race this case is about happened
}

TEST_CASE("a leave refused for want of a majority changes nothing: the node stays after the heal",
          "[membership][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  Started started(3, 3);
  test::SimNodes& sim = started.sim;
  sim.net.Partition({{1}, {2, 3}});
  sim.net.RunUntil(sim.net.now_ms() + 200);  // n1 suspects both others
  absl::Status refused = sim.nodes[1]->LeaveGroup("g");
  CHECK(refused.code() == absl::StatusCode::kUnavailable);
  sim.net.Heal();
  sim.net.RunUntil(sim.net.now_ms() + 5000);
  for (NodeId id = 1; id <= 3; ++id) {
    INFO("n" << id);
    CHECK(InView(sim.nodes[id].get(), 1));  // a refused leave is not carried out later
  }
}

}  // namespace
}  // namespace cohort
