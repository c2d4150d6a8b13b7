// A daemon that keeps its incarnation on disk (cohortd's incarnation_file, nso/incarnation_file.h)
// knows when it restarted, and its envelopes of the configured view say which process it follows
// (Envelope.previous_incarnation). A member that never heard the earlier process in that view
// then counts that one, not the new process, which is re-added with the state by a view change.
// Without the file, such a member takes the new process for the one whose acknowledgements it
// forgot (RELIABILITY.md "A process never heard before it restarted").
//
// Real Nodes over the simulated network: group g of n1, n2, n3 with counter servants. n2 never
// hears n3's first process (every envelope from n3 to n2 is lost); n3 takes part in calls with
// n1, then is killed and started again.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "nso/group.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/counter_trio.h"
#include "test/each_run.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;

struct Run : test::CounterTrio {
  using CounterTrio::CounterTrio;

  // Node `id` killed and started again as process `incarnation`; `file`: it read its last
  // incarnation, `previous`, from its incarnation file.
  void Restart(NodeId id, uint64_t incarnation, uint64_t previous, bool file) {
    CounterTrio::Restart(id, incarnation);
    if (file) sim.nodes[id]->RestartedFrom(previous);
  }
};

// n3's first process takes part in two calls that n2 never hears it in; it is then restarted.
// True when n3's first process answered both.
bool FirstProcessUnheardByN2(Run& run) {
  run.sim.drop = [](NodeId to, const wire::Envelope& envelope) {
    return to == 2 && envelope.sender_node() == 3;
  };
  run.StartAll();
  bool answered = true;
  for (int call = 0; call < 2; ++call) answered = answered && run.AddAll(1).size() == 3;
  REQUIRE(run.GroupAt(2).MemberIncarnation(3) == 0);  // never heard in view 1
  REQUIRE(run.GroupAt(1).MemberIncarnation(3) == 3);
  return answered;
}

}  // namespace

TEST_CASE("without an incarnation file, a member that never heard the earlier process takes the "
          "restarted one for it (the hazard the file closes; both orders)",
          "[membership][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    REQUIRE(FirstProcessUnheardByN2(run));
    run.Restart(3, /*incarnation=*/33, /*previous=*/3, /*file=*/false);
    run.sim.drop = nullptr;
    bool counted_in_view_1 = false;  // n2 counted the new process in n3's first one's view
    for (int waited = 0; waited < 100; ++waited) {
      run.sim.net.RunUntil(run.sim.net.now_ms() + 1);
      counted_in_view_1 = counted_in_view_1 ||
                          (run.View(2) == 1 && run.GroupAt(2).MemberIncarnation(3) == 33);
    }
    CHECK(counted_in_view_1);
    CHECK(run.GroupAt(2).counters().restarts_named == 0);
  }, /*seeds=*/5);
}

TEST_CASE("with an incarnation file, a member that never heard the earlier process counts it, "
          "and the restarted one is re-added with the state (both orders)",
          "[membership][sim]") {
  test::ForEachRun<Run>([](Run& run) {
    REQUIRE(FirstProcessUnheardByN2(run));
    const int64_t value = run.counters.value[1];
    REQUIRE(value == 2);
    run.Restart(3, /*incarnation=*/33, /*previous=*/3, /*file=*/true);
    run.sim.drop = nullptr;
    bool settled = false;
    for (int waited = 0; waited < 10000 && !settled; waited += 5) {
      run.sim.net.RunUntil(run.sim.net.now_ms() + 5);
      // n2 never counts the new process in the view n3's first process took part in.
      if (run.View(2) == 1) REQUIRE(run.GroupAt(2).MemberIncarnation(3) != 33);
      settled = run.counters.state_installs[3] > 0;
      for (NodeId id = 1; id <= 3 && settled; ++id) {
        settled = run.View(id) >= 2 && run.sim.nodes[id]->GroupDetails("g")->members.size() == 3;
      }
    }
    REQUIRE(settled);
    CHECK(run.GroupAt(2).counters().restarts_named == 1);
    CHECK(run.GroupAt(1).counters().restarts_named == 0);  // it had heard the first process
    CHECK(run.GroupAt(3).counters().all_restarted == 0);   // the others had not restarted
    CHECK(run.GroupAt(2).MemberIncarnation(3) == 33);      // the view that re-added it
    CHECK(run.counters.value[3] == value);                 // the state, given with the view
    const std::vector<std::string> replies = run.AddAll(2);
    REQUIRE(replies.size() == 3);
    for (const std::string& reply : replies) CHECK(reply == "3");
  }, /*seeds=*/5);
}

TEST_CASE("with incarnation files, every member restarted takes no other's word and the group "
          "starts afresh, as without the files (both orders)",
          "[membership][sim]") {
  // A restarted process does not count the processes others follow (Group::SameIncarnations):
  // with every member restarted, none is left to re-add the others.
  test::ForEachRun<Run>([](Run& run) {
    run.StartAll();
    REQUIRE(run.AddAll(1).size() == 3);
    for (NodeId id = 1; id <= 3; ++id) run.sim.net.Kill(id);
    run.sim.net.RunUntil(run.sim.net.now_ms() + 20);
    for (NodeId id = 1; id <= 3; ++id) {
      run.sim.net.Restart(id);
      run.Start(id, 10 * id);
      run.sim.nodes[id]->RestartedFrom(id);
    }
    run.sim.net.RunUntil(run.sim.net.now_ms() + 100);
    const std::vector<std::string> replies = run.AddAll(1);
    REQUIRE(replies.size() == 3);
    for (const std::string& reply : replies) CHECK(reply == "1");
    for (NodeId id = 1; id <= 3; ++id) {
      CHECK(run.View(id) == 1);
      CHECK(run.GroupAt(id).counters().restarts_named == 0);
      // Each knew every member had restarted (cohort_group_all_restarted_total), once.
      CHECK(run.GroupAt(id).counters().all_restarted == 1);
    }
  }, /*seeds=*/5);
}

TEST_CASE("a restarted node claims its configured views for the groups of its file and those "
          "older than it, not for groups made after its start",
          "[membership]") {
  nso::ConfigureLogging("off", "text", "");
  nso::SimNetwork net(nso::SimNetworkOptions{});
  std::map<std::string, std::vector<uint64_t>> previous;  // by group, as n1 receives them
  net.Endpoint(1)->SetReceiver([&previous](NodeId, wire::Envelope envelope) {
    previous[envelope.group()].push_back(envelope.previous_incarnation());
  });
  nso::Node node(test::GroupOfThree(2, nso::GroupConfig::Ordering::kConsensus), net.Endpoint(2),
                 /*incarnation=*/22, 0);
  node.RestartedFrom(2);
  auto fresh = std::make_shared<nso::Config>(
      test::GroupOfThree(2, nso::GroupConfig::Ordering::kConsensus));
  fresh->groups[0].name = "older";  // from a directory's state (GroupDirectory::Adopt)
  fresh->groups.push_back(fresh->groups[0]);
  fresh->groups[1].name = "newer";  // created while this process runs
  CHECK(node.AddGroups(*fresh, {"older"}, "", /*existed=*/true).size() == 1);
  CHECK(node.AddGroups(*fresh, {"newer"}, "", /*existed=*/false).size() == 1);
  for (uint64_t t = 10; t <= 200; t += 10) {
    node.Tick(t);
    net.RunUntil(t);
  }
  for (const char* group : {"g", "older", "newer"}) {
    INFO(group);
    REQUIRE_FALSE(previous[group].empty());  // its heartbeats
    for (uint64_t sent : previous[group]) CHECK(sent == (std::string(group) == "newer" ? 0 : 2));
  }
}

}  // namespace cohort
