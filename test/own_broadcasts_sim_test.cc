// A member's own requests not yet ordered when it leaves the view (RELIABILITY.md, "A member's
// broadcasts not delivered when it installs a view without itself"): none is lost.
// - Told to leave (LeaveGroup): what its clients send while the view without it is agreed waits,
//   and goes from outside once it is out; what they sent before is ordered ahead of the view
//   change (FIFO per origin, consensus/consensus_order.h).
// - Excluded while alive (a partition that heals just after the others' view change): the
//   requests stay, and are broadcast again when it rejoins (Group::InstallView).
// Each replica applies every call once.
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

const nso::GroupConfig::Ordering kOrderings[] = {nso::GroupConfig::Ordering::kConsensus,
                                                 nso::GroupConfig::Ordering::kSequencer};

// Group g of n1..n3 serving counters; `quick_exclusion`: test::WithQuickExclusion.
struct Three {
  Three(uint64_t seed, nso::GroupConfig::Ordering ordering, bool quick_exclusion)
      : sim(seed), counters(&sim) {
    for (NodeId id = 1; id <= 3; ++id) {
      nso::Config config = test::GroupOfThree(id, ordering);
      sim.Add(quick_exclusion ? test::WithQuickExclusion(config) : config);
      counters.Serve(id, "g");
    }
  }
  test::SimNodes sim;
  test::SimCounters counters;
};

}  // namespace

TEST_CASE("a member told to leave loses none of its clients' requests: those sent while the view "
          "without it is agreed go from outside once it is out", "[membership][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : kOrderings) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      INFO("ordering " << static_cast<int>(ordering) << " seed " << seed);
      Three three(seed, ordering, /*quick_exclusion=*/false);
      test::SimNodes& sim = three.sim;
      test::SimCounters& counters = three.counters;
      sim.net.RunUntil(300);
      nso::Node* n1 = sim.nodes[1].get();
      uint64_t client = *n1->Attach("client");
      int sent = 0, one_way_ok = 0, calls_ok = 0, calls_done = 0;
      auto send = [&](int count) {
        for (int i = 0; i < count; ++i) {
          ++sent;
          n1->Invoke(client, test::CounterAdd("g", invocation::Mode::kOneWay, 0),
                     [&](nso::InvokeResult result) { one_way_ok += result.status.ok(); });
          n1->Invoke(client, test::CounterAdd("g", invocation::Mode::kMajority, 0),
                     [&](nso::InvokeResult result) {
                       ++calls_done;
                       calls_ok += result.status.ok();
                     });
        }
      };
      send(3);
      REQUIRE(n1->LeaveGroup("g").ok());
      send(3);  // while the view change is agreed
      for (int step = 0; step < 10 && InView(n1, 1); ++step) {
        sim.net.RunUntil(sim.net.now_ms() + 1);
        send(1);
      }
      sim.net.RunUntil(sim.net.now_ms() + 6000);  // past the calls' deadline (5 s)
      for (NodeId id = 1; id <= 3; ++id) CHECK_FALSE(InView(sim.nodes[id].get(), 1));
      CHECK(one_way_ok == sent);
      CHECK(calls_done == sent);
      CHECK(calls_ok == sent);
      for (NodeId id : {2, 3}) {
        INFO("replica n" << id);
        CHECK(counters.value[id] == 2 * sent);  // each once
      }
      CHECK(n1->unordered_requests() == 0);
    }
  }
}

TEST_CASE("a live member excluded by the others broadcasts its requests not yet ordered again "
          "once it rejoins: none is lost", "[membership][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : kOrderings) {
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      INFO("ordering " << static_cast<int>(ordering) << " seed " << seed);
      Three three(seed, ordering, /*quick_exclusion=*/true);  // n1 accepts calls while cut off
      test::SimNodes& sim = three.sim;
      test::SimCounters& counters = three.counters;
      sim.net.RunUntil(500);
      nso::Node* n1 = sim.nodes[1].get();
      uint64_t client = *n1->Attach("client");
      sim.net.Partition({{1}, {2, 3}});
      int one_way_ok = 0;
      for (int i = 0; i < 3; ++i) {
        n1->Invoke(client, test::CounterAdd("g", invocation::Mode::kOneWay, 0),
                   [&](nso::InvokeResult result) { one_way_ok += result.status.ok(); });
      }
      REQUIRE(one_way_ok == 3);
      // Heal as soon as the others have left n1 out: their view change may still reach it.
      for (int waited = 0; waited < 5000 && InView(sim.nodes[2].get(), 1); waited += 1) {
        sim.net.RunUntil(sim.net.now_ms() + 1);
      }
      REQUIRE_FALSE(InView(sim.nodes[2].get(), 1));
      sim.net.Heal();
      sim.net.RunUntil(sim.net.now_ms() + 5000);
      CHECK(InView(n1, 1));
      for (NodeId id = 1; id <= 3; ++id) {
        INFO("replica n" << id);
        CHECK(counters.value[id] == 3);
      }
      CHECK(n1->unordered_requests() == 0);
    }
  }
}

}  // namespace cohort
