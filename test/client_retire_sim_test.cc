// A departed client's replies leave its groups' reply caches (Node::RetireClient,
// Request.retire_client). Every member keeps a client's latest replies so that a copy of a call
// delivered twice is answered, not executed again; before session 54 nothing removed a client
// that detached, and 1,000 short-lived clients (one call each) grew each of three daemons by
// 290-490 KB. Real Nodes over the simulated network (sim time), both orders: a client at a
// member and one outside the group call (closed, open, multicast) and detach; every member
// forgets both, and nothing reaches the servants for it. A client that detaches with a request
// not yet ordered keeps its replies (its request may still be ordered after a retirement).
#include <catch2/catch.hpp>

#include <string>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;
using Ordering = nso::GroupConfig::Ordering;

TEST_CASE("a departed client's replies leave every member's reply cache; nothing of it reaches "
          "the servants", "[nso][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  const Ordering ordering = GENERATE(Ordering::kConsensus, Ordering::kSequencer);
  test::SimNodes sim(11);
  for (NodeId id = 1; id <= 4; ++id) sim.Add(test::GroupOfThree(id, ordering));
  test::SimCounters counters{&sim};
  for (NodeId id = 1; id <= 3; ++id) counters.Serve(id, "g");
  sim.net.RunUntil(200);

  int64_t executed = 0;
  for (NodeId at : {1u, 4u}) {
    const uint64_t client = *sim.nodes[at]->Attach("short-lived", /*expires_when_idle=*/true);
    for (int k = 0; k < 3; ++k) {
      REQUIRE(sim.Call(at, client, test::CounterAdd("g", invocation::Mode::kAll, 3000)).status.ok());
      ++executed;
    }
    nso::InvokeOptions open = test::CounterAdd("g", invocation::Mode::kFirst, 3000);
    open.style = nso::GroupConfig::Style::kOpen;
    REQUIRE(sim.Call(at, client, open).status.ok());
    ++executed;
    REQUIRE(sim.nodes[at]->Multicast(client, "g", "m").ok());
    ++executed;
    sim.net.RunUntil(sim.net.now_ms() + 300);  // the multicast is ordered
    for (NodeId id = 1; id <= 3; ++id) CHECK(sim.nodes[id]->reply_cache_clients("g") == 1);
    REQUIRE(sim.nodes[at]->Detach(client).ok());
    CHECK(sim.nodes[at]->clients_retired() == 1);
    sim.net.RunUntil(sim.net.now_ms() + 300);
    for (NodeId id = 1; id <= 3; ++id) {
      INFO("member " << id << ", the client at node " << at);
      CHECK(sim.nodes[id]->reply_cache_clients("g") == 0);
      CHECK(sim.nodes[id]->retired_client_ranges("g") == (at == 1 ? 1u : 2u));
      CHECK(counters.value[id] == executed);  // the retirement is not a delivery
    }
  }

  // Detached with a multicast not yet ordered: its replies stay.
  const uint64_t hasty = *sim.nodes[4]->Attach("hasty", true);
  REQUIRE(sim.nodes[4]->Multicast(hasty, "g", "last").ok());
  ++executed;
  REQUIRE(sim.nodes[4]->Detach(hasty).ok());
  CHECK(sim.nodes[4]->clients_not_retired() == 1);
  sim.net.RunUntil(sim.net.now_ms() + 300);
  for (NodeId id = 1; id <= 3; ++id) {
    CHECK(sim.nodes[id]->reply_cache_clients("g") == 1);
    CHECK(counters.value[id] == executed);
  }

  // The group goes on: a new client's call is answered alike by every replica.
  const uint64_t next = *sim.nodes[2]->Attach("next", true);
  nso::InvokeResult all = sim.Call(2, next, test::CounterAdd("g", invocation::Mode::kAll, 3000));
  REQUIRE(all.status.ok());
  REQUIRE(all.replies.size() == 3);
  for (const auto& reply : all.replies) CHECK(reply.payload == absl::StrCat(executed + 1));
}

}  // namespace
}  // namespace cohort
