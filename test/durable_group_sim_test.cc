// A durable group (GroupConfig::durable, nso/node_durable.cc): its servants keep their state on
// disk with its position in the group's order, and when every member restarted, the group
// resumes from the most advanced state kept instead of starting afresh. A member that restarts
// alone is re-added with the group's state as before; its kept state is not used.
//
// Real Nodes over the simulated network: group g of n1, n2, n3 with counter servants whose
// "disk" outlives their node (what Servant::KeepStateIn does with a file), and incarnation files
// (Node::RestartedFrom).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "invocation/kept_call_log.h"
#include "nso/group.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/rng.h"
#include "nso/sim_network.h"
#include "proto/api.pb.h"
#include "test/counter_trio.h"
#include "test/each_run.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

struct Kept {
  uint64_t position = 0;
  uint64_t view = 0;  // the latest view of the deliveries kept (as Servant::KeepStateIn keeps it)
  int64_t value = 0;
  std::vector<std::string> list;  // the payloads applied, in order (the randomised case's)
  invocation::KeptCallLog calls;  // what the latest calls answered
};

struct Run : test::CountedGroupG {
  Run(uint64_t seed, nso::GroupConfig::Ordering ordering)
      : CountedGroupG(seed), ordering(ordering) {}

  nso::Config ConfigOf(NodeId id) {
    nso::Config config = test::WithQuickExclusion(test::GroupOf(id, ordering, size));
    config.groups[0].durable = durable;
    if (event_driven) config.groups[0].liveness = nso::GroupConfig::Liveness::kEvent;
    return config;
  }

  // Node `id` as process `incarnation`; `previous` (0: a first start): the process its
  // incarnation file named. Its servant registers with what its disk holds.
  void Start(NodeId id, uint64_t incarnation = 0, uint64_t previous = 0) {
    sim.Add(ConfigOf(id), incarnation);
    if (previous != 0) sim.nodes[id]->RestartedFrom(previous);
    value[id] = 0;
    calls[id].Clear();
    last_view[id] = 0;
    Serve(id);
    client[id] = *sim.nodes[id]->Attach("client");
  }

  // The counter servant of node `id`: each delivery adds one and is kept (with its group_seq)
  // before it is answered, as Servant::KeepStateIn does.
  void Serve(NodeId id) {
    nso::Node* node = sim.nodes[id].get();
    uint64_t nso = *node->Attach("counter");
    nso::ServantKeptState kept{true, disk.count(id) ? disk[id].position : 0,
                               disk.count(id) ? disk[id].view : 0};
    servant[id] = *node->RegisterServant(nso, "g", [this, node, id](nso::ServantDelivery d) {
      if (sim.net.crashed(id)) return;
      if (d.method == nso::kViewMethod) return SawView(id, d);
      if (d.method == nso::kGetStateMethod) {
        sim.net.After(0, [this, node, id, number = d.delivery] {
          node->Answer(servant[id], number, absl::OkStatus(),
                       absl::StrCat(value[id], "|", absl::StrJoin(list[id], ",")));
        });
        return;
      }
      if (d.method == nso::kRestoreKeptMethod) {
        if (silent_restore.count(id)) return;  // never answers (it goes before it does)
        if (auto failing = restore_error.find(id); failing != restore_error.end()) {
          sim.net.After(0, [this, node, id, number = d.delivery, error = failing->second] {
            node->Answer(servant[id], number, error, "");
          });
          return;
        }
        value[id] = disk[id].value;
        list[id] = disk[id].list;
        calls[id] = disk[id].calls;
        restored[id]++;
        CHECK(d.group_seq == disk[id].position);
        sim.net.After(0, [this, node, id, number = d.delivery, kept = calls[id].Bytes()] {
          node->Answer(servant[id], number, absl::OkStatus(), kept);
        });
        return;
      }
      if (d.method == nso::kSetStateMethod) {
        incoming[id] += d.payload;
        if (!d.state_last) return;
        std::vector<std::string> parts = absl::StrSplit(incoming[id], absl::MaxSplits('|', 1));
        REQUIRE(parts.size() == 2);
        CHECK(absl::SimpleAtoi(parts[0], &value[id]));
        list[id] = parts[1].empty() ? std::vector<std::string>()
                                    : std::vector<std::string>(absl::StrSplit(parts[1], ','));
        incoming[id].clear();
        // A durable group's state comes with the calls it answered.
        if (durable) {
          REQUIRE(d.kept_calls != nullptr);
          calls[id].Replace(*d.kept_calls);
        }
        disk[id] = {d.group_seq, d.view_id, value[id], list[id], calls[id]};
        state_installs[id]++;
        return;
      }
      value[id]++;
      if (!d.payload.empty()) {
        list[id].push_back(d.payload);
        // The group's one order: whichever replica delivers at a position, and whenever, it is
        // the same request, across restarts of every member included.
        auto [at, fresh] = order.emplace(d.group_seq, d.payload);
        if (!fresh && at->second != d.payload) {
          order_violations.push_back(absl::StrCat("n", id, " delivered ", d.payload, " at ",
                                                  d.group_seq, ", where ", at->second, " was"));
        }
      }
      calls[id].Add(d.call, absl::StrCat(value[id]));
      disk[id] = {d.group_seq, std::max(disk[id].view, d.view_id), value[id], list[id], calls[id]};
      if (!d.one_way) {
        sim.net.After(0, [this, node, id, number = d.delivery, v = value[id]] {
          node->Answer(servant[id], number, absl::OkStatus(), absl::StrCat(v));
        });
      }
    }, kept, /*view_events=*/true);
  }

  // Virtual synchrony across power cuts too: a view comes at the same point of the group's one
  // order (group_seq, the counter's value) with the same members at every servant that gets it,
  // and each servant's views move forward (nso/node_views.cc). View ids only grow across power
  // cuts: the servants keep the latest view with their state, and the group is re-founded in a
  // view above every one kept (nso/node_durable.cc).
  void SawView(NodeId id, const nso::ServantDelivery& d) {
    std::vector<std::string> names;
    for (const auto& member : d.view->members()) names.push_back(member.name());
    const std::string seen = absl::StrCat("[", absl::StrJoin(names, ","), "] in_view ",
                                          d.view->in_view(), " at ", d.group_seq, ", value ");
    if (d.view_id <= last_view[id]) {
      order_violations.push_back(absl::StrCat("n", id, " got view ", d.view_id, " after view ",
                                              last_view[id]));
    }
    last_view[id] = d.view_id;
    servant_views++;
    disk[id].view = d.view_id;  // kept with the state (a write of its own)
    auto [at, fresh] = views.emplace(d.view_id, absl::StrCat(seen, value[id]));
    if (!fresh && at->second != absl::StrCat(seen, value[id])) {
      order_violations.push_back(absl::StrCat("n", id, " got view ", d.view_id, " ", seen,
                                              value[id], ", another servant ", at->second));
    }
  }

  void StartAll() {
    for (NodeId id = 1; id <= size; ++id) Start(id);
    sim.net.RunUntil(sim.net.now_ms() + 100);
  }

  // The daemon outside the group (node size + 1: a peer, not a member), with a client.
  NodeId StartOutside() {
    const NodeId id = size + 1;
    sim.Add(ConfigOf(id));
    client[id] = *sim.nodes[id]->Attach("client");
    return id;
  }

  void Kill(NodeId id) { sim.net.Kill(id); }

  // Node `id` back as a new process that read its last one from its incarnation file.
  void Restart(NodeId id) {
    sim.net.Restart(id);
    const uint64_t previous = incarnation.count(id) ? incarnation[id] : id;
    incarnation[id] = previous + 10;
    Start(id, incarnation[id], previous);
  }

  // Runs until every node is in a view with all three members in which no one awaits a state,
  // for at most 10 s of simulated time.
  bool Settled() {
    for (int waited = 0; waited < 10000; waited += 10) {
      sim.net.RunUntil(sim.net.now_ms() + 10);
      bool settled = true;
      for (NodeId id = 1; id <= 3 && settled; ++id) {
        settled = View(id) >= 2 && sim.nodes[id]->GroupDetails("g")->members.size() == 3 &&
                  !GroupAt(id).durable_claim();
      }
      if (settled && AddAll(1).size() == 3) return true;
    }
    return false;
  }

  uint64_t RecoveredFromKept() {
    uint64_t total = 0;
    for (NodeId id = 1; id <= 3; ++id) total += GroupAt(id).counters().recovered_from_kept;
    return total;
  }

  nso::GroupConfig::Ordering ordering;
  NodeId size = 3;
  bool durable = true;
  bool event_driven = false;  // 003 section 3: messages only while requests are pending
  std::map<NodeId, uint64_t> servant, incarnation;
  std::map<NodeId, int64_t> value;
  std::map<NodeId, Kept> disk;  // outlives the node
  std::map<NodeId, std::string> incoming;
  std::map<NodeId, std::vector<std::string>> list;
  std::map<NodeId, invocation::KeptCallLog> calls;
  std::map<uint64_t, std::string> order;  // position in the group's order -> payload
  std::vector<std::string> order_violations;
  std::map<uint64_t, std::string> views;  // view id -> what the first servant to get it saw
  std::map<NodeId, uint64_t> last_view;
  uint64_t servant_views = 0;
  std::map<NodeId, int> state_installs, restored;
  // The servant of a node here cannot take its kept state back (answers this error), or never
  // answers "$restore_kept".
  std::map<NodeId, absl::Status> restore_error;
  std::set<NodeId> silent_restore;
};

// Five calls, every member killed, every member back with its incarnation file.
void FiveCallsThenEveryoneRestarts(Run& run) {
  run.StartAll();
  for (int call = 1; call <= 5; ++call) REQUIRE(run.AddAllAgreed(1) == absl::StrCat(call));
  for (NodeId id = 1; id <= 3; ++id) REQUIRE(run.disk[id].value == 5);
  for (NodeId id = 1; id <= 3; ++id) run.Kill(id);
  run.sim.net.RunUntil(run.sim.net.now_ms() + 20);
  for (NodeId id = 1; id <= 3; ++id) run.Restart(id);
}

}  // namespace

TEST_CASE("every member of a durable group restarted: the group resumes from the state its "
          "servants kept (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    FiveCallsThenEveryoneRestarts(run);
    REQUIRE(run.Settled());  // its last check is a sixth call, answered by all three
    CHECK(run.AddAllAgreed(2) == "7");
    CHECK(run.RecoveredFromKept() == 1);
    int restored = 0, installed = 0;
    for (NodeId id = 1; id <= 3; ++id) {
      restored += run.restored[id];
      installed += run.state_installs[id];
      CHECK(run.disk[id].value == 7);
    }
    CHECK(restored == 1);   // the member that re-founded it took its kept state back
    CHECK(installed == 2);  // the others got it from that member
  });
}

TEST_CASE("without durable, a restart of every member starts the group afresh (what durable "
          "changes)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    run.durable = false;
    FiveCallsThenEveryoneRestarts(run);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 200);
    CHECK(run.AddAllAgreed(1) == "1");
    CHECK(run.RecoveredFromKept() == 0);
  }, /*seeds=*/3);
}

TEST_CASE("the member that kept the most advanced state re-founds the durable group, and the "
          "others, behind, get it (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    run.StartAll();
    for (int call = 1; call <= 3; ++call) REQUIRE(run.AddAllAgreed(1) == absl::StrCat(call));
    run.Kill(3);
    // n3 is excluded; n1 and n2 go on without it.
    for (int waited = 0; waited < 3000 && run.GroupAt(1).members().size() == 3; waited += 10) {
      run.sim.net.RunUntil(run.sim.net.now_ms() + 10);
    }
    REQUIRE(run.GroupAt(1).members().size() == 2);
    for (int call = 4; call <= 7; ++call) {
      std::vector<std::string> replies = run.AddAll(1);
      REQUIRE(replies.size() == 2);
      CHECK(replies[0] == absl::StrCat(call));
    }
    REQUIRE(run.disk[3].value == 3);
    REQUIRE(run.disk[1].value == 7);
    REQUIRE(run.disk[2].value == 7);
    run.Kill(1);
    run.Kill(2);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 20);
    for (NodeId id = 1; id <= 3; ++id) run.Restart(id);
    REQUIRE(run.Settled());  // an eighth call
    CHECK(run.AddAllAgreed(3) == "9");
    CHECK(run.restored[3] == 0);
    CHECK(run.restored[1] + run.restored[2] == 1);
    CHECK(run.GroupAt(1).counters().recovered_from_kept == 1);  // n1 and n2 tie: the lowest id
  });
}

TEST_CASE("a member of a durable group that restarts alone is re-added with the group's state; "
          "what it kept is not used (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    run.StartAll();
    for (int call = 1; call <= 4; ++call) REQUIRE(run.AddAllAgreed(1) == absl::StrCat(call));
    run.Kill(3);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 20);
    run.disk[3] = {1000, 1000};  // a kept state ahead of the group's: a survivor's wins anyway
    run.Restart(3);
    REQUIRE(run.Settled());  // a fifth call
    CHECK(run.AddAllAgreed(3) == "6");
    CHECK(run.restored[3] == 0);
    CHECK(run.state_installs[3] == 1);
    CHECK(run.disk[3].value == 6);
    CHECK(run.RecoveredFromKept() == 0);
  });
}

TEST_CASE("calls made while a durable group waits to resume are ordered after its kept state, "
          "and wait for every member (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    FiveCallsThenEveryoneRestarts(run);
    // At once, before the members have told each other what they kept: one at the member that
    // re-founds the group (n1: a tie, the lowest id), which re-adds the others in that change.
    std::map<NodeId, nso::InvokeResult> results;
    for (NodeId at : {1, 2}) {
      run.sim.nodes[at]->Invoke(run.client[at], test::CounterAdd("g", invocation::Mode::kAll, 5000),
                                [&results, at](nso::InvokeResult result) {
                                  results[at] = std::move(result);
                                });
    }
    for (int waited = 0; waited < 6000 && results.size() < 2; waited += 10) {
      run.sim.net.RunUntil(run.sim.net.now_ms() + 10);
    }
    REQUIRE(results.size() == 2);
    std::vector<std::string> values;
    for (auto& [at, result] : results) {
      INFO("call at n" << at);
      REQUIRE(result.status.ok());
      REQUIRE(result.replies.size() == 3);
      CHECK(result.replies[0].payload == result.replies[1].payload);
      CHECK(result.replies[1].payload == result.replies[2].payload);
      values.push_back(result.replies[0].payload);
    }
    std::sort(values.begin(), values.end());
    CHECK(values == std::vector<std::string>{"6", "7"});
  });
}

TEST_CASE("a member of a durable group that restarts again while the group waits to resume "
          "takes its earlier process's place (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    FiveCallsThenEveryoneRestarts(run);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 3);
    run.Kill(1);  // n1 kept the most (a tie: the lowest id); gone before it could re-found
    run.sim.net.RunUntil(run.sim.net.now_ms() + 20);
    run.Restart(1);
    REQUIRE(run.Settled());
    CHECK(run.AddAllAgreed(3) == "7");
    CHECK(run.RecoveredFromKept() == 1);
  });
}

TEST_CASE("the member re-founding a durable group dies before the others have its state, and "
          "back it re-founds the group again from what it kept (both orders)",
          "[membership][durable][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    // The state never leaves n1 (its chunks are lost), and n1 dies once it has re-founded.
    run.sim.drop = [](NodeId, const wire::Envelope& envelope) {
      return envelope.sender_node() == 1 && envelope.has_membership() &&
             envelope.membership().kind() == wire::MembershipMessage::STATE_CHUNK;
    };
    FiveCallsThenEveryoneRestarts(run);
    for (int waited = 0; waited < 2000 && run.View(2) < 2; waited += 1) {
      run.sim.net.RunUntil(run.sim.net.now_ms() + 1);
    }
    REQUIRE(run.GroupAt(1).counters().recovered_from_kept == 1);
    REQUIRE(run.View(2) >= 2);  // n2 installed n1's view, and awaits its state
    run.Kill(1);
    run.sim.drop = nullptr;
    run.sim.net.RunUntil(run.sim.net.now_ms() + 50);
    CHECK(run.state_installs[2] == 0);
    run.Restart(1);
    REQUIRE(run.Settled());
    CHECK(run.AddAllAgreed(2) == "7");
    CHECK(run.GroupAt(1).counters().recovered_from_kept == 1);  // its new process's
  });
}

TEST_CASE("a servant that cannot take its kept state back, or goes before it does: the durable "
          "group waits, and resumes once a servant that can registers there (both orders)",
          "[membership][durable][sim]") {
  for (bool silent : {false, true}) {
    test::ForEachRun<Run>([silent](Run& run) {
      INFO((silent ? "the servant goes before it answers" : "the servant answers an error"));
      // n1 re-founds the group (all kept the same position: the lowest id).
      if (silent) {
        run.silent_restore.insert(1);
      } else {
        run.restore_error[1] = absl::DataLossError("the disk went bad");
      }
      FiveCallsThenEveryoneRestarts(run);
      run.sim.net.RunUntil(run.sim.net.now_ms() + 1500);
      CHECK(run.RecoveredFromKept() == 0);
      CHECK(run.restored[1] == 0);
      for (NodeId id = 1; id <= 3; ++id) CHECK(run.GroupAt(id).durable_claim());  // waiting
      // Another servant at n1, which can.
      run.silent_restore.clear();
      run.restore_error.clear();
      run.sim.nodes[1]->UnregisterServant(run.servant[1]);
      run.Serve(1);
      REQUIRE(run.Settled());
      CHECK(run.AddAllAgreed(2) == "7");
      CHECK(run.RecoveredFromKept() == 1);
      CHECK(run.restored[1] == 1);
    }, /*seeds=*/3);
  }
}

namespace {

// Calls from every node in every mode while single members crash and restart, and every member
// is killed at once ("power cuts") and started again. Then: one order across the whole run, every
// replica holds the same list, and every call acknowledged before or between power cuts is in
// it exactly once. `outside`: half the calls come from a daemon outside the group, which lives
// through every power cut and resends the calls it had in flight to the group that resumes: each
// must be executed once (answered from the calls kept with the state), and every acknowledged
// call have an answer of its own (a counter's value: no two alike).
void PowerCuts(Run& run, uint64_t seed, bool outside = false) {
  nso::Rng rng(seed * 7919 + 17);
  run.size = 3 + 2 * rng.Uniform(2);  // 3 or 5
  run.event_driven = rng.Uniform(2) == 0;
  run.StartAll();
  const NodeId outsider = outside ? run.StartOutside() : 0;
  // Payload -> answered OK by a replica. Shared with the callbacks, which a node destroyed at its
  // kill may run after this function returned. One-way calls are not counted: their OK says only
  // that the caller's daemon accepted them, and a power cut may take them with it.
  auto acknowledged = std::make_shared<std::map<std::string, bool>>();
  auto answers = std::make_shared<std::map<std::string, std::string>>();  // payload -> value
  uint64_t next_call = 0;
  std::set<NodeId> down;
  uint64_t power_cuts = 0;
  const uint64_t chaos_end = run.sim.net.now_ms() + 6000;
  uint64_t next_fault = run.sim.net.now_ms() + 200 + rng.Uniform(400);
  while (run.sim.net.now_ms() < chaos_end) {
    run.sim.net.RunUntil(run.sim.net.now_ms() + 15);
    std::vector<NodeId> up;
    for (NodeId id = 1; id <= run.size; ++id) {
      if (!down.count(id)) up.push_back(id);
    }
    if (outsider != 0 && rng.Uniform(2) == 0) up = {outsider};
    if (!up.empty()) {
      NodeId at = up[rng.Uniform(up.size())];
      const std::string payload = absl::StrCat("c", ++next_call);
      const invocation::Mode modes[] = {invocation::Mode::kOneWay, invocation::Mode::kFirst,
                                        invocation::Mode::kMajority, invocation::Mode::kAll};
      nso::InvokeOptions options = test::CounterAdd("g", modes[rng.Uniform(4)], 2000);
      options.payload = payload;
      const bool one_way = options.mode == invocation::Mode::kOneWay;
      if (!one_way) (*acknowledged)[payload] = false;
      run.sim.nodes[at]->Invoke(
          run.client[at], std::move(options),
          [acknowledged, answers, payload, one_way](nso::InvokeResult result) {
            if (!result.status.ok() || one_way) return;
            (*acknowledged)[payload] = true;
            if (!result.replies.empty()) (*answers)[payload] = result.replies[0].payload;
          });
    }
    if (run.sim.net.now_ms() < next_fault) continue;
    next_fault = run.sim.net.now_ms() + 200 + rng.Uniform(600);
    if (rng.Uniform(3) == 0) {  // a power cut: every member killed, all back 20-300 ms later
      power_cuts++;
      for (NodeId id = 1; id <= run.size; ++id) {
        if (!down.count(id)) run.Kill(id);
      }
      run.sim.net.RunUntil(run.sim.net.now_ms() + 20 + rng.Uniform(280));
      for (NodeId id = 1; id <= run.size; ++id) {
        run.Restart(id);
        run.sim.net.RunUntil(run.sim.net.now_ms() + rng.Uniform(30));
      }
      down.clear();
    } else if (!down.empty()) {  // the one down comes back
      NodeId id = *down.begin();
      run.Restart(id);
      down.erase(id);
    } else {  // one member killed
      NodeId id = 1 + rng.Uniform(run.size);
      run.Kill(id);
      down.insert(id);
    }
  }
  for (NodeId id : down) run.Restart(id);
  // Settled: one view with every member, no one waiting to resume, and the same list everywhere.
  bool settled = false;
  for (int waited = 0; waited < 30000 && !settled; waited += 50) {
    run.sim.net.RunUntil(run.sim.net.now_ms() + 50);
    settled = true;
    for (NodeId id = 1; id <= run.size && settled; ++id) {
      const nso::Group& group = run.GroupAt(id);
      settled = group.members().size() == run.size && !group.durable_claim() &&
                run.list[id] == run.list[1];
    }
  }
  INFO("nodes " << run.size << (run.event_driven ? ", event-driven" : ", lively") << ", "
                << power_cuts << " power cuts, " << next_call << " calls"
                << (outside ? ", half from outside" : ""));
  REQUIRE(settled);
  CHECK(run.servant_views > run.size);  // views reached the servants (each checked in SawView)
  CHECK(run.order_violations.empty());
  if (!run.order_violations.empty()) FAIL(run.order_violations.front());
  std::map<std::string, int> times;
  for (const std::string& payload : run.list[1]) times[payload]++;
  int lost = 0, twice = 0, acked = 0;
  for (const auto& [payload, ok] : *acknowledged) {
    if (ok) acked++;
    if (ok && times[payload] == 0) lost++;
  }
  for (const auto& [payload, count] : times) {
    if (count > 1) twice++;
  }
  CHECK(lost == 0);
  CHECK(twice == 0);
  CHECK(acked > 0);
  std::map<std::string, std::string> answered_by;  // value -> the call that got it
  int shared = 0;
  for (const auto& [payload, value] : *answers) {
    auto [at, fresh] = answered_by.emplace(value, payload);
    if (!fresh) {
      shared++;
      UNSCOPED_INFO(payload << " and " << at->second << " were both answered " << value);
    }
  }
  CHECK(shared == 0);
}

// PowerCuts over the seeds of COHORT_DURABLE_SEEDS=N [COHORT_DURABLE_FIRST=K] (a longer sweep; 8
// seeds from 1 by default), in both orders.
void PowerCutRuns(bool outside) {
  const char* seeds = std::getenv("COHORT_DURABLE_SEEDS");
  const char* first = std::getenv("COHORT_DURABLE_FIRST");
  const uint64_t count = seeds != nullptr ? std::strtoull(seeds, nullptr, 10) : 8;
  const uint64_t from = first != nullptr ? std::strtoull(first, nullptr, 10) : 1;
  uint64_t seed = from - 1;
  test::ForEachRun<Run>([&seed, count, from, outside](Run& run) {
    if (++seed == from + count) seed = from;  // the second order's runs take the same seeds
    PowerCuts(run, seed, outside);
  }, count, from);
}

}  // namespace

TEST_CASE("a durable group under crashes and power cuts keeps one order and every call it "
          "acknowledged (random runs, both orders)",
          "[membership][durable][sim]") {
  PowerCutRuns(/*outside=*/false);
}

TEST_CASE("calls from a daemon outside a durable group, resent across its power cuts, are "
          "executed once and answered as they were (random runs, both orders)",
          "[membership][durable][sim]") {
  PowerCutRuns(/*outside=*/true);
}

}  // namespace cohort
