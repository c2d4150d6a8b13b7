// 003 section 4.4, figure 7, on real Nodes over the simulated network: B sends m1 to gy (open
// group), then m2 in gx; A, processing m2, sends m3 to gy. m1 must be serviced at gy before m3,
// at every member of gy, whatever the message delays.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"

namespace cohort {
namespace {

using nso::NodeId;

nso::Config MakeConfig(NodeId id) {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  for (NodeId peer = 1; peer <= 5; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
  }
  nso::GroupConfig gx;
  gx.name = "gx";
  gx.members = {"n1", "n2"};
  nso::GroupConfig gy;
  gy.name = "gy";
  gy.members = {"n3", "n4", "n5"};
  gy.style = nso::GroupConfig::Style::kOpen;
  for (nso::GroupConfig* group : {&gx, &gy}) {
    group->silence_ms = 10;
    group->suspect_timeout_ms = 500;
    group->exclude_timeout_ms = 10000;
  }
  config.groups = {gx, gy};
  return config;
}

struct Figure7 {
  explicit Figure7(uint64_t seed) : net(Options(seed)) {
    for (NodeId id = 1; id <= 5; ++id) {
      nodes[id] = std::make_unique<nso::Node>(MakeConfig(id), net.Endpoint(id), id, 0);
      net.Endpoint(id)->SetReceiver(
          [this, id](NodeId from, wire::Envelope envelope) { nodes[id]->Receive(from, envelope); });
      client[id] = *nodes[id]->Attach("client");
      Tick(id);
    }
    // A (n2) serves gx: processing m2, it sends m3 to gy.
    uint64_t a_servant_nso = *nodes[2]->Attach("A");
    *nodes[2]->RegisterServant(a_servant_nso, "gx", [this](nso::ServantDelivery delivery) {
      if (delivery.payload != "m2") return;
      net.After(0, [this] { Invoke(2, "m3"); });
    });
    // The members of gy record the order in which they service requests.
    for (NodeId id = 3; id <= 5; ++id) {
      uint64_t servant_nso = *nodes[id]->Attach("server");
      uint64_t servant = 0;
      servant = *nodes[id]->RegisterServant(
          servant_nso, "gy", [this, id, &servant_ref = servants[id]](nso::ServantDelivery delivery) {
            serviced[id].push_back(delivery.payload);
            net.After(0, [this, id, number = delivery.delivery, &servant_ref] {
              nodes[id]->Answer(servant_ref, number, absl::OkStatus(), "done");
            });
          });
      servants[id] = servant;
    }
  }

  static nso::SimNetworkOptions Options(uint64_t seed) {
    nso::SimNetworkOptions options;
    options.seed = seed;
    options.delay_min_ms = 1;
    options.delay_max_ms = 40;  // m1 may well arrive after m2 and m3 without the barrier
    return options;
  }

  void Tick(NodeId id) {
    net.After(2, [this, id] {
      nodes[id]->Tick(net.now_ms());
      if (net.now_ms() < 5000) Tick(id);
    });
  }

  void Invoke(NodeId id, const std::string& payload) {
    nso::InvokeOptions options;
    options.group = "gy";
    options.method = "op";
    options.payload = payload;
    options.mode = invocation::Mode::kFirst;
    options.mode_given = true;
    options.style = nso::GroupConfig::Style::kOpen;
    nodes[id]->Invoke(client[id], options, [this](nso::InvokeResult result) {
      if (result.status.ok()) acknowledged++;
    });
  }

  nso::SimNetwork net;
  std::map<NodeId, std::unique_ptr<nso::Node>> nodes;
  std::map<NodeId, uint64_t> client;
  std::map<NodeId, uint64_t> servants;
  std::map<NodeId, std::vector<std::string>> serviced;
  int acknowledged = 0;
};

}  // namespace

TEST_CASE("003 fig 7: related requests through overlapping groups keep their causal order",
          "[causality][sim]") {
  nso::ConfigureLogging("off", "text", "");
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Figure7 run(seed);
    run.net.RunUntil(300);
    run.Invoke(1, "m1");                                       // B: m1 to gy
    REQUIRE(run.nodes[1]->Multicast(run.client[1], "gx", "m2").ok());  // then m2 in gx
    run.net.RunUntil(6000);
    for (NodeId id = 3; id <= 5; ++id) {
      const auto& order = run.serviced[id];
      auto m1 = std::find(order.begin(), order.end(), "m1");
      auto m3 = std::find(order.begin(), order.end(), "m3");
      INFO("seed " << seed << ", member n" << id);
      REQUIRE(m1 != order.end());
      REQUIRE(m3 != order.end());
      CHECK(m1 < m3);
    }
    CHECK(run.acknowledged == 2);
  }
}

}  // namespace cohort
