// Nodes on the simulated network, each ticked every 5 ms of simulated time: the harness of the
// node-level simulation tests (idle groups, backpressure, open groups, state-provider crash).
// A node the network has crashed neither ticks nor receives.
#ifndef COHORT_TEST_SIM_NODES_H_
#define COHORT_TEST_SIM_NODES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

#include "nso/node.h"
#include "nso/sim_network.h"

namespace cohort::test {

// Node `id`'s configuration in the usual cast: peers n1..n4, group "g" of members n1..n3 with
// `ordering` (n4 hosts no member: the caller from outside the group).
inline nso::Config GroupOfThree(nso::NodeId id, nso::GroupConfig::Ordering ordering) {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  for (nso::NodeId peer = 1; peer <= 4; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
  }
  nso::GroupConfig group;
  group.name = "g";
  group.members = {"n1", "n2", "n3"};
  group.ordering = ordering;
  config.groups = {group};
  return config;
}

struct SimNodes {
  // Sees every envelope before node `to` receives it.
  using Tap = std::function<void(nso::NodeId to, const wire::Envelope& envelope)>;

  // `streams_break`: SimNetworkOptions::streams_break.
  explicit SimNodes(uint64_t seed, uint64_t delay_max_ms = 3, bool streams_break = false)
      : net(Options(seed, delay_max_ms, streams_break)) {}

  static nso::SimNetworkOptions Options(uint64_t seed, uint64_t delay_max_ms = 3,
                                        bool streams_break = false) {
    nso::SimNetworkOptions options;
    options.seed = seed;
    options.delay_min_ms = 1;
    options.delay_max_ms = delay_max_ms;
    options.streams_break = streams_break;
    return options;
  }

  // A node for `config` (id config.node_id), receiving through `tap` and ticking from now on.
  nso::Node* Add(nso::Config config) {
    const nso::NodeId id = config.node_id;
    nodes[id] = std::make_unique<nso::Node>(std::move(config), net.Endpoint(id), id, 0);
    net.Endpoint(id)->SetReceiver([this, id](nso::NodeId from, wire::Envelope envelope) {
      if (net.crashed(id)) return;
      if (frozen.count(id) > 0) {
        held[id].emplace_back(from, std::move(envelope));
        return;
      }
      if (tap) tap(id, envelope);
      nodes[id]->Receive(from, envelope);
    });
    // A frozen node reads nothing: it learns of a closed connection by the timeout alone.
    net.Endpoint(id)->SetLinkWatcher([this, id](nso::NodeId peer, bool up) {
      if (!net.crashed(id) && frozen.count(id) == 0) nodes[id]->LinkChanged(peer, up);
    });
    Tick(id);
    return nodes[id].get();
  }

  // Invokes at node `at` for client `nso` and runs the network, `step_ms` at a time, until the
  // call ends.
  nso::InvokeResult Call(nso::NodeId at, uint64_t nso, nso::InvokeOptions options,
                         uint64_t step_ms = 10) {
    nso::InvokeResult out;
    bool done = false;
    nodes[at]->Invoke(nso, std::move(options), [&](nso::InvokeResult result) {
      out = std::move(result);
      done = true;
    });
    while (!done) net.RunUntil(net.now_ms() + step_ms);
    return out;
  }

  // SIGSTOP and SIGCONT: a frozen node neither ticks nor reads, but its streams stay up
  // (Transport::Reachable) and what is sent to it waits, delivered in order when it thaws.
  void Freeze(nso::NodeId id) { frozen.insert(id); }
  void Thaw(nso::NodeId id) {
    frozen.erase(id);
    for (auto& [from, envelope] : held[id]) {
      net.After(0, [this, id, from = from, envelope = std::move(envelope)] {
        if (!net.crashed(id)) nodes[id]->Receive(from, envelope);
      });
    }
    held.erase(id);
  }

  nso::SimNetwork net;
  std::map<nso::NodeId, std::unique_ptr<nso::Node>> nodes;
  Tap tap;
  std::set<nso::NodeId> frozen;
  std::map<nso::NodeId, std::vector<std::pair<nso::NodeId, wire::Envelope>>> held;

 private:
  void Tick(nso::NodeId id) {
    net.After(5, [this, id] {
      if (!net.crashed(id) && frozen.count(id) == 0) nodes[id]->Tick(net.now_ms());
      Tick(id);
    });
  }
};

}  // namespace cohort::test

#endif  // COHORT_TEST_SIM_NODES_H_
