// Group-to-group invocation (003 section 4.3) under crashes, restarts and partitions, on real
// Nodes over the simulated network. Group gx (n1..n3) relays each of its requests to group gy
// (n4..n6): every member of gx calls gy while processing the same request, naming the calling
// group and the request's place in gx's order, and gy must execute the call once and give every
// gx member the same reply. n7 (in no group) calls gx.
//
// Checked: no gy replica applies a relayed request twice; the gy replicas agree; every gx request
// acknowledged to n7 was applied by gy exactly once, and every gx member that answered it relayed
// the same reply of gy; once healed, new calls reach every member of both groups.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/each_run.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

nso::Config TwoGroups(NodeId id, nso::GroupConfig::Ordering ordering) {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  for (NodeId peer = 1; peer <= 7; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
  }
  nso::GroupConfig gx;
  gx.name = "gx";
  gx.members = {"n1", "n2", "n3"};
  gx.ordering = ordering;
  nso::GroupConfig gy = gx;
  gy.name = "gy";
  gy.members = {"n4", "n5", "n6"};
  config.groups = {gx, gy};
  return config;
}

bool InGx(NodeId id) { return id >= 1 && id <= 3; }

struct Run {
  Run(uint64_t seed, nso::GroupConfig::Ordering ordering)
      : ordering(ordering), sim(seed, /*delay_max_ms=*/3), rng(seed) {
    for (NodeId id = 1; id <= 7; ++id) Start(id, id);
    caller = *sim.nodes[7]->Attach("caller");
    sim.net.RunUntil(100);
  }

  // Node `id` (back) up as process `incarnation`, with its servant (none at n7).
  void Start(NodeId id, uint64_t incarnation) {
    sim.Add(TwoGroups(id, ordering), incarnation);
    if (id == 7) return;
    nso::Node* node = sim.nodes[id].get();
    const uint64_t nso = *node->Attach("servant");
    relay_nso[id] = *node->Attach("relay");
    applied[id].clear();
    relayed[id] = 0;
    const std::string group = InGx(id) ? "gx" : "gy";
    servant[id] = *node->RegisterServant(nso, group, [this, id, node](nso::ServantDelivery d) {
      if (sim.net.crashed(id) || !d.ended.empty()) return;
      if (d.method == nso::kGetStateMethod) {
        std::string state = InGx(id) ? absl::StrCat(relayed[id]) : absl::StrJoin(applied[id], ",");
        sim.net.After(0, [this, id, node, number = d.delivery, state] {
          node->Answer(servant[id], number, absl::OkStatus(), state);
        });
        return;
      }
      if (d.method == nso::kSetStateMethod) {
        if (d.state_offset == 0) incoming[id].clear();
        incoming[id] += d.payload;
        if (!d.state_last) return;
        has_state.insert(id);
        if (InGx(id)) {
          REQUIRE(absl::SimpleAtoi(incoming[id], &relayed[id]));
        } else {
          applied[id].clear();
          for (absl::string_view tag : absl::StrSplit(incoming[id], ',', absl::SkipEmpty())) {
            applied[id].emplace_back(tag);
          }
        }
        return;
      }
      if (!InGx(id)) {  // gy: apply, answer with the place of the request in gy's sequence
        for (const std::string& tag : applied[id]) {
          if (tag == d.payload) applied_twice.push_back(absl::StrCat("n", id, " ", tag));
        }
        applied[id].push_back(d.payload);
        sim.net.After(0, [this, id, node, number = d.delivery, n = applied[id].size()] {
          node->Answer(servant[id], number, absl::OkStatus(), absl::StrCat(n));
        });
        return;
      }
      // gx: relay to gy as the group's call number group_seq, answer with gy's reply.
      relayed[id]++;
      sim.net.After(0, [this, id, node, d] {
        nso::InvokeOptions options = test::CounterAdd("gy", invocation::Mode::kFirst, 8000);
        options.payload = d.payload;
        options.caller_group = "gx";
        options.group_call_id = d.group_seq * 1024;
        node->Invoke(relay_nso[id], options, [this, id, node, number = d.delivery,
                                              generation = sim.nodes[id].get()](
                                                 nso::InvokeResult result) {
          if (sim.net.crashed(id) || sim.nodes[id].get() != generation) return;
          if (!result.status.ok() || result.replies.empty()) {
            node->Answer(servant[id], number, result.status.ok()
                                                  ? absl::UnavailableError("no reply")
                                                  : result.status, "");
            return;
          }
          node->Answer(servant[id], number, absl::OkStatus(), result.replies[0].payload);
        });
      });
    });
  }

  void Restart(NodeId id) {
    has_state.erase(id);  // until the group's state is installed
    sim.net.Restart(id);
    Start(id, 100 * ++restarts + id);
  }

  // n7 calls gx: "relay <tag>", waiting for a majority of the members' replies (all: `mode`).
  void CallGx(const std::string& tag, invocation::Mode mode = invocation::Mode::kMajority) {
    nso::InvokeOptions options = test::CounterAdd("gx", mode, 6000);
    options.method = "relay";
    options.payload = tag;
    made.insert(tag);
    sim.nodes[7]->Invoke(caller, options, [this, tag](nso::InvokeResult result) {
      results[tag] = result;
    });
  }

  // Crashes and partitions for `chaos_ms`: at most one node of each group down at a time.
  void Chaos(uint64_t chaos_ms) {
    const uint64_t end = sim.net.now_ms() + chaos_ms;
    int next_tag = static_cast<int>(made.size());
    std::map<NodeId, uint64_t> back_at;  // crashed nodes and when they restart
    uint64_t heal_at = 0;
    while (sim.net.now_ms() < end) {
      CallGx(absl::StrCat("t", ++next_tag));
      sim.net.RunUntil(sim.net.now_ms() + 15);
      const uint64_t now = sim.net.now_ms();
      for (auto it = back_at.begin(); it != back_at.end();) {
        if (now < it->second) {
          ++it;
          continue;
        }
        Restart(it->first);
        it = back_at.erase(it);
      }
      if (heal_at != 0 && now >= heal_at) {
        sim.net.Heal();
        heal_at = 0;
      }
      const int dice = static_cast<int>(rng() % 100);
      if (dice < 4 && heal_at == 0) {
        // The fault model (RELIABILITY.md): fewer than half of a group fail at once, counting a
        // restarted member until it has the group's state again.
        const NodeId id = static_cast<NodeId>(1 + rng() % 6);
        bool group_down = false;
        for (NodeId other = 1; other <= 6; ++other) {
          if (InGx(other) == InGx(id) && has_state.count(other) == 0) group_down = true;
        }
        if (!group_down) {
          if (rng() % 2) {
            sim.net.Kill(id);
          } else {
            sim.net.Crash(id);
          }
          has_state.erase(id);
          back_at[id] = now + 100 + rng() % 1400;
        }
      } else if (dice < 6 && heal_at == 0 && has_state.size() == 6) {
        const NodeId id = static_cast<NodeId>(1 + rng() % 6);
        sim.net.Partition({{id}});
        heal_at = now + 50 + rng() % 900;
      }
    }
    sim.net.Heal();
    for (const auto& [id, at] : back_at) Restart(id);
  }

  // Runs until every member of both groups is in a view of three, for at most 30 s.
  bool Settle() {
    for (int waited = 0; waited < 30000; waited += 10) {
      sim.net.RunUntil(sim.net.now_ms() + 10);
      bool settled = true;
      for (NodeId id = 1; id <= 6 && settled; ++id) {
        absl::StatusOr<nso::GroupInfo> info = sim.nodes[id]->GroupDetails(InGx(id) ? "gx" : "gy");
        settled = info.ok() && info->members.size() == 3;
      }
      if (settled) return true;
    }
    return false;
  }

  nso::GroupConfig::Ordering ordering;
  test::SimNodes sim;
  std::mt19937_64 rng;
  uint64_t caller = 0;
  int restarts = 0;
  std::map<NodeId, uint64_t> servant;
  std::map<NodeId, uint64_t> relay_nso;
  std::map<NodeId, std::vector<std::string>> applied;  // gy replicas: tags in applied order
  std::map<NodeId, int64_t> relayed;                    // gx replicas: requests relayed
  std::map<NodeId, std::string> incoming;
  std::vector<std::string> applied_twice;
  std::set<NodeId> has_state = {1, 2, 3, 4, 5, 6};  // servants holding their group's state
  std::set<std::string> made;                        // n7's calls to gx, by tag
  std::map<std::string, nso::InvokeResult> results;  // those that ended
};

}  // namespace

TEST_CASE("group-to-group calls under crashes, restarts and partitions: gy executes each once "
          "and every gx member relays the same reply (both orders)",
          "[invocation][sim]") {
  const uint64_t seeds = getenv("G2G_SEEDS") ? std::stoull(getenv("G2G_SEEDS")) : 20;
  test::ForEachRun<Run>([](Run& run) {
    run.Chaos(4000);
    REQUIRE(run.Settle());
    // Every call made during the run ends (replies or an error) within its deadline.
    run.sim.net.RunUntil(run.sim.net.now_ms() + 10000);
    INFO("applied twice: " << absl::StrJoin(run.applied_twice, "; "));
    CHECK(run.applied_twice.empty());
    CHECK(run.results.size() == run.made.size());

    // After the faults: calls reach all three members of both groups.
    for (int i = 1; i <= 3; ++i) run.CallGx(absl::StrCat("after", i), invocation::Mode::kAll);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 3000);
    for (int i = 1; i <= 3; ++i) {
      REQUIRE(run.results.count(absl::StrCat("after", i)) == 1);
      const nso::InvokeResult& after = run.results[absl::StrCat("after", i)];
      INFO("after" << i << ": " << after.status.ToString());
      CHECK(after.status.ok());
      CHECK(after.replies.size() == 3);
    }
    // The gy replicas agree, and hold each relayed request once.
    const std::vector<std::string>& sequence = run.applied[4];
    INFO("gy replicas applied " << run.applied[4].size() << ", " << run.applied[5].size()
                                << ", " << run.applied[6].size() << " requests");
    CHECK(run.applied[5] == sequence);
    CHECK(run.applied[6] == sequence);
    std::map<std::string, int> times;
    for (const std::string& tag : sequence) times[tag]++;
    int acknowledged = 0;
    for (const auto& [tag, result] : run.results) {
      INFO("call " << tag << ": " << result.status.ToString() << " "
                   << (result.replies.empty() ? "" : result.replies[0].payload));
      CHECK(times[tag] <= 1);
      if (!result.status.ok()) continue;
      acknowledged++;
      CHECK(times[tag] == 1);  // acknowledged: applied by gy, once
      std::set<std::string> replies;
      for (const auto& reply : result.replies) {
        replies.insert(absl::StrCat(reply.status.ToString(), " ", reply.payload));
      }
      CHECK(replies.size() == 1);  // every gx member relayed the same reply of gy
    }
    CHECK(acknowledged > 100);
  }, seeds);
}

}  // namespace cohort
