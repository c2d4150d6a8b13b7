// Nodes on the simulated network, each ticked every 5 ms of simulated time: the harness of the
// node-level simulation tests (idle groups, backpressure, open groups, state-provider crash).
// A node the network has crashed neither ticks nor receives.
#ifndef COHORT_TEST_SIM_NODES_H_
#define COHORT_TEST_SIM_NODES_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"

namespace cohort::test {

// Node `id`'s configuration: peers n1..n(size + 1), group "g" of members n1..n`size` with
// `ordering` (the last peer hosts no member: the caller from outside the group).
inline nso::Config GroupOf(nso::NodeId id, nso::GroupConfig::Ordering ordering, nso::NodeId size) {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  nso::GroupConfig group;
  group.name = "g";
  group.ordering = ordering;
  for (nso::NodeId peer = 1; peer <= size + 1; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
    if (peer <= size) group.members.push_back(absl::StrCat("n", peer));
  }
  config.groups = {group};
  return config;
}

// The usual cast: group "g" of n1..n3, n4 outside it.
inline nso::Config GroupOfThree(nso::NodeId id, nso::GroupConfig::Ordering ordering) {
  return GroupOf(id, ordering, 3);
}

// `config` with a member excluded after 1 s of silence, and no call refused by a node cut off
// from its group's majority (it accepts them while cut off: what becomes of them is the test's).
inline nso::Config WithQuickExclusion(nso::Config config) {
  config.failure_detector.exclude_timeout_ms = 1000;
  config.failure_detector.fail_fast_after_ms = 60000;
  for (nso::GroupConfig& group : config.groups) group.exclude_timeout_ms = 1000;
  return config;
}

// Whether `node` is in node `at`'s current view of `group`.
inline bool InView(nso::Node* at, nso::NodeId node, const std::string& group = "g") {
  absl::StatusOr<nso::GroupInfo> info = at->GroupDetails(group);
  if (!info.ok()) return false;
  return std::any_of(info->members.begin(), info->members.end(),
                     [node](const nso::GroupInfo::MemberInfo& member) { return member.node == node; });
}

struct SimNodes {
  // Sees every envelope before node `to` receives it.
  using Tap = std::function<void(nso::NodeId to, const wire::Envelope& envelope)>;
  // True for an envelope that node `to` must not receive (lost on the way).
  using Drop = std::function<bool(nso::NodeId to, const wire::Envelope& envelope)>;

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
  // `incarnation` (0: the node id): another one for a node restarted (net.Restart).
  nso::Node* Add(nso::Config config, uint64_t incarnation = 0) {
    const nso::NodeId id = config.node_id;
    nodes[id] = std::make_unique<nso::Node>(std::move(config), net.Endpoint(id),
                                            incarnation != 0 ? incarnation : id, net.now_ms());
    net.Endpoint(id)->SetReceiver([this, id](nso::NodeId from, wire::Envelope envelope) {
      if (net.crashed(id)) return;
      if (frozen.count(id) > 0) {
        held[id].emplace_back(from, std::move(envelope));
        return;
      }
      if (drop && drop(id, envelope)) return;
      if (tap) tap(id, envelope);
      As(id);
      nodes[id]->Receive(from, envelope);
    });
    // A frozen node reads nothing: it learns of a closed connection by the timeout alone.
    net.Endpoint(id)->SetLinkWatcher([this, id](nso::NodeId peer, bool up) {
      if (!net.crashed(id) && frozen.count(id) == 0) {
        As(id);
        nodes[id]->LinkChanged(peer, up);
      }
    });
    if (ticking.insert(id).second) Tick(id);  // a restarted node's ticks go on
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
      net.After(0, [this, id, from = from, envelope = std::move(envelope)]() mutable {
        if (!net.crashed(id)) nodes[id]->Receive(from, envelope);
      });
    }
    held.erase(id);
  }

  nso::SimNetwork net;
  std::map<nso::NodeId, std::unique_ptr<nso::Node>> nodes;
  Tap tap;
  Drop drop;
  std::set<nso::NodeId> frozen;
  std::map<nso::NodeId, std::vector<std::pair<nso::NodeId, wire::Envelope>>> held;

 private:
  std::set<nso::NodeId> ticking;
  void Tick(nso::NodeId id) {
    net.After(5, [this, id] {
      if (!net.crashed(id) && frozen.count(id) == 0) {
        As(id);
        nodes[id]->Tick(net.now_ms());
      }
      Tick(id);
    });
  }

 public:
  // With SIMLOG=info|debug, the nodes' log lines name the node and the simulated time (call it
  // before anything that runs a node's code outside Receive, LinkChanged and Tick).
  void As(nso::NodeId id) {
    static const char* const level = std::getenv("SIMLOG");
    if (level == nullptr) return;
    nso::ConfigureLogging(level, "text", absl::StrCat("t=", net.now_ms(), " n", id));
  }
};

// An "add" to the counters of `group` (SimCounters below), waiting for `mode`.
inline nso::InvokeOptions CounterAdd(const std::string& group, invocation::Mode mode,
                                     uint64_t deadline_ms) {
  nso::InvokeOptions options;
  options.group = group;
  options.method = "add";
  options.mode = mode;
  options.mode_given = true;
  options.deadline_ms = deadline_ms;
  return options;
}

// Replicated counters served at SimNodes' nodes: every delivery with a method adds one and is
// answered with the new value; the state is the value, installed from "$set_state" chunks.
struct SimCounters {
  explicit SimCounters(SimNodes* sim) : sim(sim) {}

  // Serves `group` at node `id`. `on_get_state` (optional) runs when the state is asked for;
  // false leaves the request unanswered (a provider that dies before it answers).
  void Serve(nso::NodeId id, const std::string& group,
             std::function<bool(nso::NodeId)> on_get_state = nullptr) {
    nso::Node* node = sim->nodes[id].get();
    uint64_t nso = *node->Attach("counter");
    servants[id] = *node->RegisterServant(nso, group, [this, node, id, on_get_state](
                                                           nso::ServantDelivery d) {
      if (sim->net.crashed(id)) return;
      if (!d.ended.empty()) {  // the group was deleted (Node::RemoveGroup)
        ended[id] = d.ended;
        return;
      }
      if (d.method == nso::kGetStateMethod) {
        if (on_get_state && !on_get_state(id)) return;
        sim->net.After(0, [this, node, id, number = d.delivery] {
          node->Answer(servants[id], number, absl::OkStatus(), absl::StrCat(value[id]));
        });
        return;
      }
      if (d.method == nso::kSetStateMethod) {
        incoming[id] += d.payload;
        if (d.state_last) {
          installed_ok[id] = absl::SimpleAtoi(incoming[id], &value[id]);
          incoming[id].clear();
          state_installs[id]++;
        }
        return;
      }
      value[id]++;
      if (!d.one_way) {
        sim->net.After(0, [this, node, id, number = d.delivery, v = value[id]] {
          node->Answer(servants[id], number, absl::OkStatus(), absl::StrCat(v));
        });
      }
    });
  }

  SimNodes* sim;
  std::map<nso::NodeId, uint64_t> servants;
  std::map<nso::NodeId, int64_t> value;
  std::map<nso::NodeId, std::string> incoming;
  std::map<nso::NodeId, int> state_installs;
  std::map<nso::NodeId, bool> installed_ok;  // the last state installed was a number
  std::map<nso::NodeId, std::string> ended;  // the registration's end, why (RemoveGroup)
};

}  // namespace cohort::test

#endif  // COHORT_TEST_SIM_NODES_H_
