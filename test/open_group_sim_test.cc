// Open-group wait-for-first through the request manager (003 section 4.2), on the simulated
// network: with optimisation 3 (n <= 3) every replica answers the caller's node directly, since a
// participant decides on accepting the proposal, before the manager; without it the manager
// alone answers, as 003's asynchronous forwarding describes.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

nso::Config MakeConfig(NodeId id, nso::GroupConfig::Ordering ordering, bool optimisation_3) {
  nso::Config config = test::GroupOfThree(id, ordering);
  config.groups[0].style = nso::GroupConfig::Style::kOpen;
  config.consensus.optimisation_3 = optimisation_3;
  return config;
}

struct Answers {
  std::map<uint32_t, int> repliers;  // who answered each of 20 wait-for-first calls
  int direct = 0;    // replica replies received at n4
  int managed = 0;   // request-manager replies received at n4
};

Answers Run(nso::GroupConfig::Ordering ordering, bool optimisation_3) {
  test::SimNodes sim(5);
  nso::SimNetwork& net = sim.net;
  Answers answers;
  sim.tap = [&](NodeId to, const wire::Envelope& envelope) {
    if (to == 4 && envelope.has_reply() && !envelope.reply().ordered_notice()) ++answers.direct;
    if (to == 4 && envelope.has_managed_reply()) ++answers.managed;
  };
  for (NodeId id = 1; id <= 4; ++id) {
    nso::Node* node = sim.Add(MakeConfig(id, ordering, optimisation_3));
    if (id == 4) continue;
    uint64_t servant_nso = *node->Attach("servant");
    auto servant = std::make_shared<uint64_t>(0);
    *servant = *node->RegisterServant(servant_nso, "g", [&, node, id, servant](nso::ServantDelivery d) {
      net.After(0, [node, id, servant, number = d.delivery] {
        node->Answer(*servant, number, absl::OkStatus(), absl::StrCat("n", id));
      });
    });
  }
  net.RunUntil(500);
  uint64_t client = *sim.nodes[4]->Attach("client");
  for (int i = 0; i < 20; ++i) {
    nso::InvokeOptions call;
    call.group = "g";
    call.method = "get";
    call.mode = invocation::Mode::kFirst;
    call.mode_given = true;
    call.deadline_ms = 2000;
    nso::InvokeResult result = sim.Call(4, client, call, /*step_ms=*/5);
    INFO(result.status.ToString());
    REQUIRE(result.status.ok());
    REQUIRE(result.replies.size() == 1);
    CHECK(result.replies[0].payload == absl::StrCat("n", result.replies[0].node));
    ++answers.repliers[result.replies[0].node];
  }
  net.RunUntil(net.now_ms() + 100);  // late answers arrive
  return answers;
}

}  // namespace

TEST_CASE("open wait-for-first: replicas answer directly with optimisation 3, the manager alone "
          "without it", "[invocation][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    Answers direct = Run(ordering, /*optimisation_3=*/true);
    CHECK(direct.repliers[2] + direct.repliers[3] > 0);  // a participant, before the manager
    CHECK(direct.managed == 0);
    CHECK(direct.direct >= 20);
    Answers managed = Run(ordering, /*optimisation_3=*/false);
    CHECK(managed.repliers[1] == 20);  // the request manager n1 answered every call
    CHECK(managed.managed == 20);      // through the client/server group (003 section 4.1)
    CHECK(managed.direct == 0);        // no replica answered n4 itself
  }
}

}  // namespace cohort
