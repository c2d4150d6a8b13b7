// Backpressure (limits.max_unordered_requests, max_unordered_bytes): a client's requests not yet
// ordered are bounded in number and bytes; beyond a bound a new one is refused
// RESOURCE_EXHAUSTED, naming the limit, and accepted again once the group has ordered the earlier
// ones. Three nodes on the simulated network; while the
// network does not run, nothing is ordered.
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

nso::Config MakeConfig(NodeId id, nso::GroupConfig::Ordering ordering) {
  nso::Config config = test::GroupOfThree(id, ordering);
  config.limits.max_unordered_requests = 5;
  config.limits.max_unordered_bytes = 1000;
  return config;
}

struct Cluster {
  explicit Cluster(nso::GroupConfig::Ordering ordering) : sim(11) {
    sim.tap = [this](NodeId to, const wire::Envelope& envelope) {
      if (envelope.has_reply() && envelope.reply().ordered_notice()) ++notices[to];
    };
    for (NodeId id = 1; id <= 4; ++id) {
      nso::Node* node = sim.Add(MakeConfig(id, ordering));
      if (id == 4) continue;
      uint64_t servant_nso = *node->Attach("servant");
      *node->RegisterServant(servant_nso, "g", [this](nso::ServantDelivery d) {
        if (d.method == "add") ++delivered;
      });
    }
  }
  absl::Status Send(uint64_t nso, size_t bytes = 10, NodeId at = 1) {
    nso::InvokeOptions options;
    options.group = "g";
    options.method = "add";
    options.payload = std::string(bytes, 'x');
    options.mode = invocation::Mode::kOneWay;
    options.mode_given = true;
    absl::Status status = absl::UnknownError("no answer");
    nodes[at]->Invoke(nso, options, [&](nso::InvokeResult result) { status = result.status; });
    return status;
  }

  test::SimNodes sim;
  nso::SimNetwork& net = sim.net;
  std::map<NodeId, std::unique_ptr<nso::Node>>& nodes = sim.nodes;
  int delivered = 0;
  std::map<NodeId, int> notices;  // ordered notices received
};

}  // namespace

TEST_CASE("a client's requests not yet ordered are bounded: RESOURCE_EXHAUSTED beyond the limit",
          "[backpressure][sim]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    Cluster cluster(ordering);
    cluster.net.RunUntil(500);  // everyone has heard everyone
    uint64_t client = *cluster.nodes[1]->Attach("client");
    uint64_t other = *cluster.nodes[1]->Attach("other");
    // The network does not run: nothing is ordered, so the sixth request is one too many.
    for (int i = 0; i < 5; ++i) CHECK(cluster.Send(client).ok());
    absl::Status refused = cluster.Send(client);
    CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(refused.message()), Catch::Contains("limits.max_unordered_requests"));
    CHECK_THAT(std::string(refused.message()), Catch::Contains("5 requests not yet ordered"));
    absl::Status multicast = cluster.nodes[1]->Multicast(client, "g", "hello");
    CHECK(multicast.code() == absl::StatusCode::kResourceExhausted);
    CHECK(cluster.Send(other).ok());  // per client: another client of the node is not held up
    // The group orders them; the client may send again, and nothing accepted was lost.
    cluster.net.RunUntil(cluster.net.now_ms() + 500);
    CHECK(cluster.delivered == 3 * 6);  // 6 accepted requests at each of the 3 members
    for (int i = 0; i < 5; ++i) CHECK(cluster.Send(client).ok());
    cluster.net.RunUntil(cluster.net.now_ms() + 500);
    CHECK(cluster.delivered == 3 * 11);
    // Bytes: 1000 in flight at most, but a client's only request always passes.
    CHECK(cluster.Send(client, 1500).ok());
    absl::Status too_big = cluster.Send(client, 10);
    CHECK(too_big.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(too_big.message()), Catch::Contains("limits.max_unordered_bytes"));
    cluster.net.RunUntil(cluster.net.now_ms() + 500);
    CHECK(cluster.Send(client, 600).ok());
    CHECK(cluster.Send(client, 300).ok());
    absl::Status over = cluster.Send(client, 200);  // 900 + 200 > 1000
    CHECK(over.code() == absl::StatusCode::kResourceExhausted);
    CHECK_THAT(std::string(over.message()), Catch::Contains("900 bytes"));
    cluster.net.RunUntil(cluster.net.now_ms() + 500);
    CHECK(cluster.delivered == 3 * 14);
  }
}

TEST_CASE("a non-member's one-way call gets one ordered notice, from the member that ordered it",
          "[backpressure][sim]") {
  // The notice releases the caller's causal barrier and its backpressure count; every member
  // used to send one (3 per call here).
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    Cluster cluster(ordering);
    cluster.net.RunUntil(500);
    uint64_t client = *cluster.nodes[4]->Attach("outside");
    for (int i = 0; i < 5; ++i) {
      CHECK(cluster.Send(client, 10, /*at=*/4).ok());
      cluster.net.RunUntil(cluster.net.now_ms() + 100);
    }
    CHECK(cluster.delivered == 3 * 5);
    CHECK(cluster.notices[4] == 5);
    // Each was reported ordered: the client may have 5 more in flight at once.
    for (int i = 0; i < 5; ++i) CHECK(cluster.Send(client, 10, 4).ok());
    CHECK(cluster.Send(client, 10, 4).code() == absl::StatusCode::kResourceExhausted);
  }
}

TEST_CASE("a member cut off past the exclusion timeout sends its undelivered one-way calls again "
          "once it rejoins: none is lost", "[backpressure][sim]") {
  // Its requests wait unordered (no majority) and count against its client's backlog; they are
  // not dropped: the member never installs a view without itself, it asks to join the others'
  // view after the heal and broadcasts them again there (Group::InstallView).
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : {nso::GroupConfig::Ordering::kConsensus, nso::GroupConfig::Ordering::kSequencer}) {
    INFO("ordering " << static_cast<int>(ordering));
    test::SimNodes sim(12);
    test::SimCounters counters(&sim);
    for (NodeId id = 1; id <= 3; ++id) {
      sim.Add(test::WithQuickExclusion(test::GroupOfThree(id, ordering)));
      counters.Serve(id, "g");
    }
    sim.net.RunUntil(500);
    nso::Node* n1 = sim.nodes[1].get();
    uint64_t client = *n1->Attach("client");
    sim.net.Partition({{1}, {2, 3}});
    for (int i = 0; i < 3; ++i) {
      nso::InvokeOptions options = test::CounterAdd("g", invocation::Mode::kOneWay, 0);
      absl::Status status = absl::UnknownError("no answer");
      n1->Invoke(client, options, [&](nso::InvokeResult result) { status = result.status; });
      REQUIRE(status.ok());
    }
    CHECK(n1->unordered_requests() == 3);
    // n2 and n3 leave n1 out of their view (after 1 s); the partition heals at 3 s.
    sim.net.RunUntil(sim.net.now_ms() + 3000);
    CHECK(n1->unordered_requests() == 3);  // still waiting, still counted
    auto view = sim.nodes[2]->GroupDetails("g");
    REQUIRE(view.ok());
    CHECK(view->members.size() == 2);
    sim.net.Heal();
    sim.net.RunUntil(sim.net.now_ms() + 2000);
    view = n1->GroupDetails("g");
    REQUIRE(view.ok());
    CHECK(view->members.size() == 3);  // back in, with the state
    CHECK(counters.state_installs[1] == 1);
    // Each replica applied the three calls once.
    for (NodeId id : {1, 2, 3}) {
      INFO("replica n" << id);
      CHECK(counters.value[id] == 3);
    }
    CHECK(n1->unordered_requests() == 0);
  }
}

}  // namespace cohort
