// One servant per group per daemon (Node::ReplaceServants): a servant that registers while another
// of its group is attached at the same daemon (a restarted servant process whose predecessor's
// stream has not ended yet) replaces it. Before session 50 both stayed: invocations went to the
// first, so the second saw none of them and, once the first went, answered from an object that
// had missed them. Now the first's stream ends ABORTED, and the daemon leaves the group and
// rejoins with the state for the new one, which then answers as the other replicas do.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

// A counter servant of group "g": each "add" adds one and answers the new value; its state is
// the value. Told by its node when its stream ends (the node's cut-off hook).
struct Counter {
  uint64_t servant = 0;
  int64_t value = 0;
  std::string incoming;
  int deliveries = 0;
  absl::Status ended;
};

void Serve(test::SimNodes& sim, NodeId id, const std::shared_ptr<Counter>& counter) {
  nso::Node* node = sim.nodes[id].get();
  const uint64_t nso = *node->Attach("counter");
  counter->servant = *node->RegisterServant(nso, "g", [&sim, node, counter](nso::ServantDelivery d) {
    if (!d.ended.empty()) return;
    if (d.method == nso::kGetStateMethod) {
      sim.net.After(0, [node, counter, number = d.delivery] {
        node->Answer(counter->servant, number, absl::OkStatus(), absl::StrCat(counter->value));
      });
      return;
    }
    if (d.method == nso::kSetStateMethod) {
      counter->incoming += d.payload;
      if (d.state_last) {
        (void)absl::SimpleAtoi(counter->incoming, &counter->value);
        counter->incoming.clear();
      }
      return;
    }
    if (d.method != "add") return;
    ++counter->deliveries;
    ++counter->value;
    sim.net.After(0, [node, counter, number = d.delivery, v = counter->value] {
      node->Answer(counter->servant, number, absl::OkStatus(), absl::StrCat(v));
    });
  });
  node->SetServantHooks(
      counter->servant, [] { return nso::ServantBacklog{}; },
      [counter](const absl::Status& why) { counter->ended = why; });
}

}  // namespace

TEST_CASE("a servant registering where one of its group is attached replaces it: the daemon "
          "rejoins with the state for the new one",
          "[membership][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus,
                        nso::GroupConfig::Ordering::kSequencer}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      INFO("ordering " << static_cast<int>(ordering) << " seed " << seed);
      test::SimNodes sim(seed);
      for (NodeId id = 1; id <= 3; ++id) sim.Add(test::GroupOfThree(id, ordering));
      std::map<NodeId, std::shared_ptr<Counter>> counters;
      for (NodeId id = 1; id <= 3; ++id) {
        counters[id] = std::make_shared<Counter>();
        Serve(sim, id, counters[id]);
      }
      sim.net.RunUntil(300);
      const uint64_t client = *sim.nodes[2]->Attach("client");
      auto add_all = [&] {
        nso::InvokeResult result =
            sim.Call(2, client, test::CounterAdd("g", invocation::Mode::kAll, 3000));
        std::vector<std::string> values;
        if (result.status.ok()) {
          for (const auto& reply : result.replies) values.push_back(reply.payload);
        }
        return values;
      };
      for (int i = 0; i < 5; ++i) REQUIRE(add_all().size() == 3);
      REQUIRE(counters[1]->value == 5);

      // A second servant at n1 while the first is attached.
      auto newer = std::make_shared<Counter>();
      Serve(sim, 1, newer);
      CHECK(counters[1]->ended.code() == absl::StatusCode::kAborted);
      CHECK(absl::StrContains(counters[1]->ended.message(), "replaced by a newer servant"));
      // n1 leaves and rejoins; the new servant gets the state, then every later call.
      std::vector<std::string> values;
      for (int attempt = 0; attempt < 100; ++attempt) {
        values = add_all();
        if (values.size() == 3 && newer->value > 0) break;
        sim.net.RunUntil(sim.net.now_ms() + 50);
      }
      REQUIRE(values.size() == 3);
      for (const std::string& v : values) CHECK(v == values[0]);
      CHECK(newer->value == counters[2]->value);
      CHECK(newer->value == counters[3]->value);
      CHECK(newer->deliveries < newer->value);  // the value came with the state
      CHECK(counters[1]->value == 5);            // the replaced one got nothing more
    }
  }
}

}  // namespace cohort
