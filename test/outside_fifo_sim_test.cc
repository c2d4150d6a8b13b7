// FIFO per client across routes from outside a group: a client whose daemon is not a member sends
// one-way calls and multicasts through a request manager, open calls through it as managed
// calls, and closed calls to every member (one of them orders, the others stand by). Whatever
// the route, and when the request manager crashes as the requests leave (they are then sent
// again through the next member, and the members standing by take the closed calls over), every
// replica delivers the client's requests in the order the client issued them. Real Nodes over
// the simulated network, which also reorders the messages of one link.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

enum class Route { kOneWay, kMulticast, kClosed, kOpen };

struct Outcome {
  std::map<NodeId, std::vector<int>> delivered;  // per replica: the requests' numbers, in order
  int answered = 0;                              // calls with replies that succeeded
  int calls = 0;                                 // calls with replies issued
  nso::OutsideCounters counters;                 // n4's
  uint64_t held = 0;                             // requests the members held for the FIFO
  uint64_t gave_up = 0;                          // ... and ordered without their predecessor
};

Outcome Run(nso::GroupConfig::Ordering ordering, bool crash_manager, uint64_t seed) {
  test::SimNodes sim(seed, /*delay_max_ms=*/3, /*streams_break=*/true);
  Outcome out;
  for (NodeId id = 1; id <= 4; ++id) {
    nso::Config config = test::GroupOfThree(id, ordering);
    config.groups[0].exclude_timeout_ms = 2000;
    config.limits.default_deadline_ms = 20000;
    nso::Node* node = sim.Add(config);
    if (id == 4) continue;
    uint64_t servant_nso = *node->Attach("servant");
    auto servant = std::make_shared<uint64_t>(0);
    *servant = *node->RegisterServant(
        servant_nso, "g", [&sim, &out, node, id, servant](nso::ServantDelivery d) {
          if (!d.method.empty() && d.method[0] == '$') return;  // a state transfer's
          int number = 0;
          if (absl::SimpleAtoi(d.payload, &number)) out.delivered[id].push_back(number);
          if (d.one_way) return;
          sim.net.After(0, [node, servant, delivery = d.delivery] {
            node->Answer(*servant, delivery, absl::OkStatus(), "ok");
          });
        });
  }
  sim.net.RunUntil(500);
  nso::Node* caller = sim.nodes[4].get();
  const uint64_t client = *caller->Attach("client");
  const Route routes[] = {Route::kOneWay, Route::kClosed, Route::kMulticast, Route::kOpen,
                          Route::kClosed, Route::kOneWay, Route::kOpen,      Route::kMulticast};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 8; ++i) {
      const int number = round * 8 + i;
      const Route route = routes[(i + round) % 8];
      if (route == Route::kMulticast) {
        REQUIRE(caller->Multicast(client, "g", absl::StrCat(number)).ok());
        continue;
      }
      nso::InvokeOptions call;
      call.group = "g";
      call.method = "add";
      call.payload = absl::StrCat(number);
      call.mode_given = true;
      call.mode = route == Route::kOneWay ? invocation::Mode::kOneWay
                  : route == Route::kOpen ? invocation::Mode::kFirst
                                          : invocation::Mode::kMajority;
      call.style = route == Route::kOpen ? nso::GroupConfig::Style::kOpen
                                         : nso::GroupConfig::Style::kClosed;
      call.deadline_ms = 20000;
      if (route != Route::kOneWay) ++out.calls;
      caller->Invoke(client, std::move(call), [&out](nso::InvokeResult result) {
        if (result.status.ok() && !result.replies.empty()) ++out.answered;
      });
    }
    // The first round leaves all at once; with `crash_manager`, n1 (the request manager and
    // orderer of this client's requests) dies before any of them reaches it.
    if (round == 0 && crash_manager) sim.net.Crash(1);
    sim.net.RunUntil(sim.net.now_ms() + 20);
  }
  sim.net.RunUntil(sim.net.now_ms() + 25000);
  out.counters = caller->outside_counters();
  for (NodeId id = 1; id <= 3; ++id) {
    out.held += sim.nodes[id]->outside_counters().fifo_held;
    out.gave_up += sim.nodes[id]->outside_counters().fifo_gave_up;
  }
  return out;
}

TEST_CASE("requests from outside keep their client's order across routes, through a crash of "
          "the request manager", "[invocation][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering :
       {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    for (bool crash : {false, true}) {
      uint64_t held = 0;
      uint64_t resent = 0;
      for (uint64_t seed = 1; seed <= 12; ++seed) {
        INFO("ordering " << static_cast<int>(ordering) << " crash " << crash << " seed " << seed);
        Outcome out = Run(ordering, crash, seed);
        CHECK(out.answered == out.calls);
        std::vector<int> all(24);
        for (int i = 0; i < 24; ++i) all[i] = i;
        for (NodeId id = crash ? 2 : 1; id <= 3; ++id) {
          INFO("replica n" << id);
          CHECK(out.delivered[id] == all);  // each once, in the order issued
        }
        CHECK(out.gave_up == 0);
        held += out.held;
        resent += out.counters.resent;
      }
      // The routes did part: members held requests for their predecessors, and after the crash
      // n4 sent its one-way requests again through another member.
      CHECK(held > 0);
      if (crash) CHECK(resent > 0);
    }
  }
}

}  // namespace
}  // namespace cohort
