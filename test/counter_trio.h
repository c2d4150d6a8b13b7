// Three nodes of group "g" (n1..n3, n4 outside) on the simulated network, each with a counter
// servant and a client: the cast of the node-level restart tests (restart_rejoin_sim_test,
// incarnation_file_sim_test).
#ifndef COHORT_TEST_COUNTER_TRIO_H_
#define COHORT_TEST_COUNTER_TRIO_H_

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "nso/group.h"
#include "nso/node.h"
#include "test/sim_nodes.h"

namespace cohort::test {

// Group "g" on SimNodes with a client at each node: its view and Group at a node, and counter
// "add"s waiting for every member (CounterTrio's, and durable_group_sim_test's own servants').
struct CountedGroupG {
  explicit CountedGroupG(uint64_t seed) : sim(seed, /*delay_max_ms=*/3) {}

  uint64_t View(nso::NodeId at) { return sim.nodes[at]->GroupDetails("g")->view_id; }

  // Group g at node `id`.
  const nso::Group& GroupAt(nso::NodeId id) {
    for (const nso::Group* group : sim.nodes[id]->groups()) {
      if (group->name() == "g") return *group;
    }
    FAIL("no group g at n" << id);
    throw;
  }

  // An "add" from `at` waiting for every member; the replies' values, or empty if it failed.
  std::vector<std::string> AddAll(nso::NodeId at) {
    std::vector<std::string> out;
    nso::InvokeResult result =
        sim.Call(at, client[at], CounterAdd("g", invocation::Mode::kAll, 2000));
    if (!result.status.ok()) return out;
    for (const auto& reply : result.replies) out.push_back(reply.payload);
    return out;
  }

  // AddAll from `at`, which must be answered by all three replicas alike; their value.
  std::string AddAllAgreed(nso::NodeId at) {
    std::vector<std::string> replies = AddAll(at);
    REQUIRE(replies.size() == 3);
    CHECK(replies[0] == replies[1]);
    CHECK(replies[1] == replies[2]);
    return replies[0];
  }

  SimNodes sim;
  std::map<nso::NodeId, uint64_t> client;
};

struct CounterTrio : CountedGroupG {
  CounterTrio(uint64_t seed, nso::GroupConfig::Ordering ordering)
      : CountedGroupG(seed), ordering(ordering) {}

  // Node `id` (process `incarnation`, 0: the node id) with a fresh servant and client.
  void Start(nso::NodeId id, uint64_t incarnation = 0) {
    sim.Add(GroupOfThree(id, ordering), incarnation);
    counters.value[id] = 0;
    counters.Serve(id, "g");
    client[id] = *sim.nodes[id]->Attach("client");
  }

  // The three nodes, and 100 ms for them to meet.
  void StartAll() {
    for (nso::NodeId id = 1; id <= 3; ++id) Start(id);
    sim.net.RunUntil(100);
  }

  // A node killed and back 20 ms later with a new process: a new Node, servant and client.
  void Restart(nso::NodeId id, uint64_t incarnation) {
    sim.net.Kill(id);
    sim.net.RunUntil(sim.net.now_ms() + 20);
    sim.net.Restart(id);
    Start(id, incarnation);
  }


  // Runs until every node is in view `view_id` or later with all three members and `joiner`'s
  // state is in, for at most 10 s of simulated time.
  bool SettleAfter(uint64_t view_id, nso::NodeId joiner) {
    for (int waited = 0; waited < 10000; waited += 10) {
      sim.net.RunUntil(sim.net.now_ms() + 10);
      bool settled = counters.state_installs[joiner] > 0;
      for (nso::NodeId id = 1; id <= 3 && settled; ++id) {
        settled = View(id) >= view_id && sim.nodes[id]->GroupDetails("g")->members.size() == 3;
      }
      if (settled) return true;
    }
    return false;
  }


  nso::GroupConfig::Ordering ordering;
  SimCounters counters{&sim};
};

}  // namespace cohort::test

#endif  // COHORT_TEST_COUNTER_TRIO_H_
