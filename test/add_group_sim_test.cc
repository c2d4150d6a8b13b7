// A group started after its nodes (Node::AddGroups: a group added to the daemons' files and
// SIGHUP'd, or made by CreateGroup) on the simulated network: each member starts it at its own
// moment, as daemons reload or deliver the definition one after another. Calls made while only
// some members run it complete once a majority does, and a member that starts it late catches
// up (the decisions it missed, or the state), so every replica answers with the same counter.
//
// A group deleted and created again (Node::RemoveGroup, then AddGroups of the next incarnation,
// as DeleteGroup and CreateGroup make each daemon do, one after another): the calls pending at
// the deletion end, the old servants are told, and the new group starts from a fresh state that
// no message of the old one reaches, however late it comes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nso/node.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;
using Ordering = nso::GroupConfig::Ordering;

struct Run {
  Run(uint64_t seed, Ordering ordering) : sim(seed, /*delay_max_ms=*/5) {
    for (NodeId id = 1; id <= 4; ++id) {
      nso::Config config = test::GroupOfThree(id, ordering);  // group g from the start
      sim.Add(config);
    }
    added = std::make_shared<nso::Config>();
    nso::GroupConfig h;
    h.name = "h";
    h.members = {"n1", "n2", "n3"};
    h.ordering = ordering;
    h.silence_ms = 10;
    h.suspect_timeout_ms = 50;
    h.exclude_timeout_ms = 5000;
    added->groups = {h};
    again = std::make_shared<nso::Config>(*added);
    again->groups[0].incarnation = 1;
  }

  // Node `id` starts group h now and, if a member, serves it with a counter.
  void Start(NodeId id) {
    REQUIRE(sim.nodes[id]->AddGroups(*added, {"h"}, " (test)") == std::vector<std::string>{"h"});
    CHECK(sim.nodes[id]->AddGroups(*added, {"h"}, " (test)").empty());  // once
    if (id != 4) counters.Serve(id, "h");
  }

  nso::InvokeResult Add(NodeId at, invocation::Mode mode) {
    if (!client.count(at)) client[at] = *sim.nodes[at]->Attach("client");
    return sim.Call(at, client[at], test::CounterAdd("h", mode, 3000));
  }

  // A wait-for-all "add" from n1, tried every 50 ms until every replica answers (100 tries at
  // most; *attempts: how many).
  nso::InvokeResult AddAll(int* attempts) {
    nso::InvokeResult all;
    for (*attempts = 1; *attempts <= 100; ++*attempts) {
      all = Add(1, invocation::Mode::kAll);
      if (all.status.ok() && all.replies.size() == 3) break;
      sim.net.RunUntil(sim.net.now_ms() + 50);
    }
    return all;
  }

  // Node `id` deletes incarnation 0 of h and starts incarnation 1, served by `fresh`.
  void Recreate(NodeId id, test::SimCounters* fresh) {
    REQUIRE(sim.nodes[id]->RemoveGroup("h", 0));
    CHECK_FALSE(sim.nodes[id]->RemoveGroup("h", 0));  // once
    REQUIRE(sim.nodes[id]->AddGroups(*again, {"h"}, " (test)") == std::vector<std::string>{"h"});
    if (id != 4) fresh->Serve(id, "h");
  }

  test::SimNodes sim;
  std::shared_ptr<nso::Config> added;
  std::shared_ptr<nso::Config> again;  // h, incarnation 1
  std::map<NodeId, uint64_t> client;
  test::SimCounters counters{&sim};
};

// 40 seeds of `body`, each with a fresh Run (group g settled, 200 ms) and an rng of its seed.
void ForSeeds(Ordering ordering, const std::function<void(Run&, std::mt19937_64&)>& body) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed << ", ordering " << nso::ToString(ordering));
    Run run(seed, ordering);
    std::mt19937_64 rng(seed);
    run.sim.net.RunUntil(200);
    body(run, rng);
  }
}

TEST_CASE("a group started by each node at its own moment runs once a majority has it; a late "
          "member catches up and every replica agrees (many seeds, both orderings)",
          "[sim][membership]") {
  ForSeeds(GENERATE(Ordering::kConsensus, Ordering::kSequencer), [](Run& run,
                                                                     std::mt19937_64& rng) {
    // n1 and n2 start h 0-150 ms apart; calls from n1 begin at once and wait for the majority.
    run.Start(1);
    run.sim.net.RunUntil(run.sim.net.now_ms() + rng() % 150);
    run.Start(2);
    int64_t acknowledged = 0;
    for (int k = 0; k < 10; ++k) {
      nso::InvokeResult result = run.Add(1, invocation::Mode::kMajority);
      REQUIRE(result.status.ok());
      acknowledged++;
    }
    // n3 starts it 0-400 ms later, n4 (hosting no member) too; calls go on meanwhile.
    uint64_t late_at = run.sim.net.now_ms() + rng() % 400;
    bool late_started = false;
    while (!late_started || acknowledged < 20) {
      if (!late_started && run.sim.net.now_ms() >= late_at) {
        run.Start(3);
        run.Start(4);
        late_started = true;
      }
      if (acknowledged < 20) {
        REQUIRE(run.Add(1, invocation::Mode::kMajority).status.ok());
        acknowledged++;
      } else {
        run.sim.net.RunUntil(run.sim.net.now_ms() + 10);
      }
    }
    // Every replica answers a wait-for-all call, with one value; from outside the group too.
    int attempts = 0;
    nso::InvokeResult all = run.AddAll(&attempts);
    REQUIRE(all.status.ok());
    REQUIRE(all.replies.size() == 3);
    for (const auto& reply : all.replies) CHECK(reply.payload == all.replies[0].payload);
    int64_t after = 0;
    REQUIRE(absl::SimpleAtoi(all.replies[0].payload, &after));
    CHECK(after >= acknowledged + 1);
    for (const auto& [id, installs] : run.counters.state_installs) {
      if (installs > 0) CHECK(run.counters.installed_ok[id]);  // a state that was a number
    }
    nso::InvokeResult outside = run.Add(4, invocation::Mode::kAll);
    REQUIRE(outside.status.ok());
    REQUIRE(outside.replies.size() == 3);
    for (const auto& reply : outside.replies) CHECK(reply.payload == outside.replies[0].payload);
  });
}

TEST_CASE("a group deleted and created again by each node at its own moment: pending calls end, "
          "old servants are told, and the new group starts fresh (many seeds, both orderings)",
          "[sim][membership]") {
  ForSeeds(GENERATE(Ordering::kConsensus, Ordering::kSequencer), [](Run& run,
                                                                     std::mt19937_64& rng) {
    for (NodeId id = 1; id <= 4; ++id) run.Start(id);
    for (int k = 0; k < 5; ++k) REQUIRE(run.Add(1, invocation::Mode::kAll).status.ok());
    // Calls in flight from a member and from outside while the nodes delete h one by one.
    std::map<int, nso::InvokeResult> pending;
    std::map<int, int> answers;
    for (int k = 0; k < 8; ++k) {
      NodeId at = k % 2 ? 4 : 1;
      if (!run.client.count(at)) run.client[at] = *run.sim.nodes[at]->Attach("client");
      run.sim.nodes[at]->Invoke(run.client[at], test::CounterAdd("h", invocation::Mode::kAll, 3000),
                                [&pending, &answers, k](nso::InvokeResult result) {
                                  pending[k] = std::move(result);
                                  answers[k]++;
                                });
    }
    run.sim.net.RunUntil(run.sim.net.now_ms() + rng() % 5);
    std::vector<NodeId> order = {1, 2, 3, 4};
    std::shuffle(order.begin(), order.end(), rng);
    test::SimCounters fresh{&run.sim};
    for (NodeId id : order) {
      run.Recreate(id, &fresh);
      run.sim.net.RunUntil(run.sim.net.now_ms() + rng() % 150);
    }
    run.sim.net.RunUntil(run.sim.net.now_ms() + 100);
    for (int k = 0; k < 8; ++k) {
      INFO("call " << k);
      REQUIRE(answers[k] == 1);  // every call ended, once
      if (!pending[k].status.ok()) {
        CHECK(pending[k].status.code() == absl::StatusCode::kNotFound);
        CHECK(std::string(pending[k].status.message()).find("was deleted") != std::string::npos);
      }
    }
    for (NodeId id = 1; id <= 3; ++id) {
      CHECK(run.counters.ended[id].find("\"h\" was deleted") != std::string::npos);
    }
    // The new group: every replica starts from 0; nothing of the old group reaches it.
    int attempts = 0;
    nso::InvokeResult all = run.AddAll(&attempts);
    INFO(all.status.ToString() << ", " << all.replies.size() << " replies");
    REQUIRE(all.status.ok());
    REQUIRE(all.replies.size() == 3);
    for (const auto& reply : all.replies) CHECK(reply.payload == all.replies[0].payload);
    int64_t first = 0;
    REQUIRE(absl::SimpleAtoi(all.replies[0].payload, &first));
    nso::InvokeResult outside = run.Add(4, invocation::Mode::kAll);
    REQUIRE(outside.status.ok());
    REQUIRE(outside.replies.size() == 3);
    for (const auto& reply : outside.replies) CHECK(reply.payload == absl::StrCat(first + 1));
    // Only the new group's own calls counted: the attempts above (some may have been refused
    // before executing, none executed twice), never the old group's 5 + 8.
    CHECK(first >= 1);
    CHECK(first <= attempts);
    for (NodeId id = 1; id <= 3; ++id) CHECK(fresh.value[id] == first + 1);
  });
}

// A reload hands AddGroups the whole file; the node keeps only the groups it starts (before, each
// reload adding a group kept every group of the file once more: 2,000 groups in the file, 100
// reloads adding one each grew a daemon from 24 MB to 77 MB), and a removed group's goes with it.
TEST_CASE("a group added from a whole file keeps only its own configuration, freed when it is "
          "removed", "[sim][membership]") {
  test::SimNodes sim(7, /*delay_max_ms=*/5);
  sim.Add(test::GroupOfThree(1, Ordering::kConsensus));
  nso::Node& node = *sim.nodes[1];
  nso::Config file = test::GroupOfThree(1, Ordering::kConsensus);
  nso::GroupConfig other = file.groups[0];
  file.groups.clear();
  for (int i = 0; i < 50; ++i) {
    other.name = absl::StrCat("f", i);
    file.groups.push_back(other);
  }
  CHECK(node.added_group_configs() == 0);
  for (int i = 0; i < 10; ++i) {
    // Each "reload" adds one group of a 50-group file.
    REQUIRE(node.AddGroups(file, {absl::StrCat("f", i)}, " (test)").size() == 1);
    CHECK(node.added_group_configs() == static_cast<size_t>(i + 1));
  }
  REQUIRE(node.AddGroups(file, {"f10", "f11"}, " (test)").size() == 2);
  CHECK(node.added_group_configs() == 12);
  REQUIRE(node.RemoveGroup("f11", 0));
  CHECK(node.added_group_configs() == 11);
  for (int i = 0; i < 10; ++i) REQUIRE(node.RemoveGroup(absl::StrCat("f", i), 0));
  CHECK(node.added_group_configs() == 1);
  // The group left runs on what was kept for it.
  std::vector<std::string> running;
  for (const nso::Group* group : node.groups()) running.push_back(group->name());
  std::sort(running.begin(), running.end());
  CHECK(running == std::vector<std::string>{"f10", "g"});
  for (uint64_t t = sim.net.now_ms(); t < 500; t += 10) sim.net.RunUntil(t);
}

}  // namespace
}  // namespace cohort
