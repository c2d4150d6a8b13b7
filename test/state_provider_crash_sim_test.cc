// Issue 4, state transfer: the member that proposed a join (and so owes the joiner its state)
// crashes before sending it. Real Nodes over the simulated network: group g of n1, n2; only n2
// has a servant at first (n1 keeps the ordered requests for its servant to come); n3's servant
// attaches and asks to join; n2, the only member that can give a state, proposes and crashes as
// its servant is asked for the state. Then n1's servant attaches. View 2 = {n1, n2, n3} without
// n2 is no majority unless n3 takes part, so n3 must follow the view changes while it waits for
// its state (before: it stayed in view 2 for good); it is then re-added with n1's state.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

nso::Config MakeConfig(NodeId id) {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  for (NodeId peer = 1; peer <= 3; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
  }
  nso::GroupConfig g;
  g.name = "g";
  g.members = {"n1", "n2"};
  g.silence_ms = 10;
  g.suspect_timeout_ms = 50;
  g.exclude_timeout_ms = 500;
  config.groups = {g};
  return config;
}

struct Run {
  explicit Run(uint64_t seed) : sim(seed, /*delay_max_ms=*/5) {
    for (NodeId id = 1; id <= 3; ++id) client[id] = *sim.Add(MakeConfig(id))->Attach("client");
  }

  // A counter servant at `id` (test::SimCounters); with crash_provider, n2 dies as its servant
  // is asked for the state.
  void Serve(NodeId id) {
    counters.Serve(id, "g", [this](NodeId at) {
      if (at != 2 || !crash_provider) return true;
      net.Crash(2);
      provider_crashed = true;
      return false;
    });
  }

  // n2's servant only (n1 keeps the ordered requests for its servant to come), then five adds.
  bool ServeTwoAndAddFive() {
    Serve(2);
    net.RunUntil(100);
    for (int i = 0; i < 5; ++i) {
      if (Add(invocation::Mode::kFirst).size() != 1) return false;
    }
    return true;
  }

  // An "add" from n1; the replies' values, or empty when it failed.
  std::vector<std::string> Add(invocation::Mode mode) {
    std::vector<std::string> out;
    nso::InvokeResult result = sim.Call(1, client[1], test::CounterAdd("g", mode, 2000));
    if (!result.status.ok()) return out;
    for (const auto& reply : result.replies) out.push_back(reply.payload);
    return out;
  }

  test::SimNodes sim;
  nso::SimNetwork& net = sim.net;
  std::map<NodeId, std::unique_ptr<nso::Node>>& nodes = sim.nodes;
  std::map<NodeId, uint64_t> client;
  test::SimCounters counters{&sim};
  std::map<NodeId, int64_t>& value = counters.value;
  std::map<NodeId, int>& state_installs = counters.state_installs;
  bool crash_provider = false;
  bool provider_crashed = false;
};

// Seeds 1..20, each a Run whose n2 served five adds (SIMLOG=1: the nodes' logs).
void ForSeeds(const std::function<void(Run&)>& check) {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    Run run(seed);
    REQUIRE(run.ServeTwoAndAddFive());
    check(run);
  }
}

}  // namespace

TEST_CASE("a joiner whose state provider crashes is re-added with another member's state",
          "[membership][sim]") {
  ForSeeds([](Run& run) {
    run.crash_provider = true;
    run.Serve(3);  // n3 asks to join; n2 proposes (n1 has no servant: no state to give)
    for (int waited = 0; waited < 5000 && !run.provider_crashed; waited += 10) {
      run.net.RunUntil(run.net.now_ms() + 10);
    }
    REQUIRE(run.provider_crashed);
    const uint64_t crashed_at = run.net.now_ms();
    run.Serve(1);  // gets the five requests n1 kept for it
    run.net.RunUntil(run.net.now_ms() + 50);
    REQUIRE(run.value[1] == 5);
    for (int waited = 0; waited < 30000 && run.state_installs[3] == 0; waited += 10) {
      run.net.RunUntil(run.net.now_ms() + 10);
    }
    REQUIRE(run.state_installs[3] == 1);
    // n3 suspects its provider (50 ms) and asks again; n1 suspects it too and re-adds n3 with
    // its state. Without that, n3 waited out its state patience (2 s here; an exclusion timeout,
    // 10 s by default), counted in the view without answering.
    CHECK(run.net.now_ms() - crashed_at < 1000);
    CHECK(run.counters.installed_ok[3]);
    CHECK(run.value[3] == 5);
    std::vector<std::string> replies;
    for (int attempt = 0; attempt < 50 && replies.size() != 2; ++attempt) {
      replies = run.Add(invocation::Mode::kAll);  // n1 and n3: n2 is excluded
    }
    REQUIRE(replies.size() == 2);
    CHECK(replies[0] == replies[1]);
    CHECK(run.value[1] == run.value[3]);
    CHECK(run.nodes[1]->GroupDetails("g")->members.size() == 2);
  });
}

TEST_CASE("a provider whose servant detaches before the join is delivered takes the joiner out "
          "again at once; another member re-adds it with the state",
          "[membership][sim]") {
  ForSeeds([](Run& run) {
    // n2 (the only member with a servant) proposes n3's join as the request reaches it; its
    // servant detaches right after, before the view change is ordered.
    bool detached = false;
    run.sim.tap = [&](NodeId to, const wire::Envelope& envelope) {
      if (detached || to != 2 || !envelope.has_membership() ||
          envelope.membership().kind() != wire::MembershipMessage::JOIN_REQUEST) {
        return;
      }
      detached = true;
      run.net.After(0, [&run] { run.nodes[2]->UnregisterServant(run.counters.servants[2]); });
    };
    run.Serve(3);
    for (int waited = 0; waited < 2000 && !detached; waited += 10) {
      run.net.RunUntil(run.net.now_ms() + 10);
    }
    REQUIRE(detached);
    run.sim.tap = nullptr;
    run.Serve(1);  // gets the five requests n1 kept for it: now n1 can give the state
    const uint64_t served_ms = run.net.now_ms();
    for (int waited = 0; waited < 30000 && run.state_installs[3] == 0; waited += 10) {
      run.net.RunUntil(run.net.now_ms() + 10);
    }
    REQUIRE(run.state_installs[3] == 1);
    CHECK(run.value[3] == 5);
    // Well before the joiner's state patience (2 s here): n2 took n3 out at once, and n3 asked
    // again (every 200 ms) until n1 re-added it.
    CHECK(run.net.now_ms() - served_ms < 1000);
    std::vector<std::string> replies;
    for (int attempt = 0; attempt < 50 && replies.size() != 2; ++attempt) {
      replies = run.Add(invocation::Mode::kAll);  // n1 and n3: n2 has left
    }
    REQUIRE(replies.size() == 2);
    CHECK(replies[0] == replies[1]);
  });
}

}  // namespace cohort
