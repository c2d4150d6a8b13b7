// limits.nso_idle_ms: an NSO attached over the API that goes unused is detached, so that clients
// that went away do not pile up until limits.max_nsos refuses every new one; an NSO in use, one
// with a servant, and the runtime's own (an embedded node's) are kept. Real Nodes over the
// simulated network (sim time).
#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

TEST_CASE("an API client's NSO unused for limits.nso_idle_ms is detached; busy ones are kept",
          "[nso][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  test::SimNodes sim(7);
  for (NodeId id = 1; id <= 3; ++id) {
    nso::Config config = test::GroupOfThree(id, nso::GroupConfig::Ordering::kConsensus);
    config.limits.nso_idle_ms = 5000;
    sim.Add(config);
  }
  nso::Node* node = sim.nodes[1].get();
  const uint64_t idle = *node->Attach("gone-away", /*expires_when_idle=*/true);
  const uint64_t used = *node->Attach("busy", true);
  const uint64_t serving = *node->Attach("servant", true);
  const uint64_t own = *node->Attach("embedded");  // the runtime's and an embedded node's
  REQUIRE(node->RegisterServant(serving, "g", [](nso::ServantDelivery) {}).ok());
  // `used` multicasts every second; the others do nothing.
  for (uint64_t t = 1000; t <= 12000; t += 1000) {
    sim.net.RunUntil(t);
    REQUIRE(node->Multicast(used, "g", "tick").ok());
  }
  sim.net.RunUntil(13000);
  CHECK_FALSE(node->attached(idle));
  CHECK(node->attached(used));
  CHECK(node->attached(serving));
  CHECK(node->attached(own));
  CHECK(node->nsos_detached_idle() == 1);
  CHECK(node->attached_nsos() == 3);
  // The client that went away comes back: NOT_FOUND "unknown NSO" (the stub library then
  // attaches again by itself).
  absl::Status back = node->Multicast(idle, "g", "late");
  CHECK(back.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(back.message()).find("unknown NSO") != std::string::npos);
  // 0: never.
  test::SimNodes forever(8);
  nso::Config config = test::GroupOfThree(1, nso::GroupConfig::Ordering::kConsensus);
  config.limits.nso_idle_ms = 0;
  nso::Node* keeper = forever.Add(config);
  const uint64_t kept = *keeper->Attach("kept", true);
  forever.net.RunUntil(60000);
  CHECK(keeper->attached(kept));
}

}  // namespace
}  // namespace cohort
