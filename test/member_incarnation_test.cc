// Which process (daemon incarnation) of each member a view counts (nso/group.h
// Group::MemberIncarnation): heard in the view, named by the change that added it, carried while
// it stays a member, told with a view told rather than delivered. Traffic of another process in
// the view is refused and reported as a restart, also before the counted one was heard in it.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nso/group.h"
#include "nso/logging.h"
#include "nso/sim_network.h"

namespace cohort {
namespace {

using nso::NodeId;

nso::Config ConfigOfTwo() {
  nso::Config config;
  config.node = "n2";
  config.node_id = 2;
  for (NodeId peer = 1; peer <= 3; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
  }
  nso::GroupConfig group;
  group.name = "g";
  group.members = {"n1", "n2", "n3"};
  config.groups = {group};
  return config;
}

// A heartbeat of `from`'s process `incarnation` in view `view_id`, as Group::Receive takes it.
wire::Envelope Heartbeat(NodeId from, uint64_t incarnation, uint64_t view_id) {
  wire::Envelope envelope;
  envelope.set_group("g");
  envelope.set_sender_node(from);
  envelope.set_view_id(view_id);
  envelope.set_incarnation(incarnation);
  envelope.mutable_heartbeat();
  return envelope;
}

}  // namespace

TEST_CASE("a view counts one process of each member: heard, added with it, or carried",
          "[membership]") {
  nso::ConfigureLogging("off", "text", "");
  nso::SimNetwork net(nso::SimNetworkOptions{});
  const nso::Config config = ConfigOfTwo();
  nso::Group group(config.groups[0], config, {1, 2, 3}, net.Endpoint(2), /*incarnation=*/2, 0);
  consensus::Deliveries deliveries;

  CHECK(group.MemberIncarnation(1) == 0);  // the configured view: nothing heard yet
  group.Receive(1, Heartbeat(1, 11, 1), &deliveries);
  CHECK(group.MemberIncarnation(1) == 11);
  CHECK(group.TakeRestarts().empty());

  // View 2 re-adds n3 with process 103 (a join request's incarnation); n1 stays.
  group.InstallView(2, {1, 2, 3}, &deliveries, {{3, 103}});
  CHECK(group.MemberIncarnation(1) == 11);   // carried: heard in view 1
  CHECK(group.MemberIncarnation(3) == 103);  // named by the change
  CHECK_FALSE(group.HeardInView(1));

  // Another process of n3 speaks in view 2 first: refused, reported as a restart.
  group.Receive(3, Heartbeat(3, 203, 2), &deliveries);
  CHECK_FALSE(group.HeardInView(3));
  std::vector<std::pair<NodeId, uint64_t>> restarts = group.TakeRestarts();
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0] == std::pair<NodeId, uint64_t>{3, 203});
  group.Receive(3, Heartbeat(3, 103, 2), &deliveries);  // the counted one is taken
  CHECK(group.HeardInView(3));
  CHECK(group.MemberIncarnation(3) == 103);

  // A restart of n1 (known only as carried) is refused too, once per view.
  group.Receive(1, Heartbeat(1, 12, 2), &deliveries);
  group.Receive(1, Heartbeat(1, 12, 2), &deliveries);
  CHECK_FALSE(group.HeardInView(1));
  restarts = group.TakeRestarts();
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0] == std::pair<NodeId, uint64_t>{1, 12});

  // Added with an unknown process (0): any one is taken, and then counted.
  group.InstallView(3, {1, 2, 3}, &deliveries, {{1, 0}});
  CHECK(group.MemberIncarnation(1) == 0);
  CHECK(group.MemberIncarnation(3) == 103);
  group.Receive(1, Heartbeat(1, 12, 3), &deliveries);
  CHECK(group.HeardInView(1));
  CHECK(group.MemberIncarnation(1) == 12);

  // A view told (NEW_VIEW, a state), not delivered: the processes it was told with (n1's), none
  // carried from the old view (n3's).
  group.InstallView(7, {1, 2, 3}, &deliveries, {{1, 21}, {3, 0}}, /*adopted=*/true);
  CHECK(group.MemberIncarnation(1) == 21);
  CHECK(group.MemberIncarnation(3) == 0);
  CHECK(group.MemberIncarnation(2) == 2);  // this process
  group.Receive(1, Heartbeat(1, 12, 7), &deliveries);  // not the process told: a restart
  CHECK_FALSE(group.HeardInView(1));
  restarts = group.TakeRestarts();
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0] == std::pair<NodeId, uint64_t>{1, 12});
  group.Receive(3, Heartbeat(3, 303, 7), &deliveries);  // unknown: the first one heard is taken
  CHECK(group.MemberIncarnation(3) == 303);

  // Told with no processes (a sender that knew none): nothing known.
  group.InstallView(8, {1, 2, 3}, &deliveries, {}, /*adopted=*/true);
  CHECK(group.MemberIncarnation(1) == 0);
  CHECK(group.MemberIncarnation(3) == 0);
}

TEST_CASE("a process that says which one it follows (an incarnation file) is not counted in a "
          "view that never heard its node; by a restarted process, it is",
          "[membership]") {
  nso::ConfigureLogging("off", "text", "");
  nso::SimNetwork net(nso::SimNetworkOptions{});
  const nso::Config config = ConfigOfTwo();
  consensus::Deliveries deliveries;
  wire::Envelope restarted = Heartbeat(1, 11, 1);
  restarted.set_previous_incarnation(10);

  // A first process of n2: n1's process 11 follows 10, which view 1 counts instead.
  nso::Group group(config.groups[0], config, {1, 2, 3}, net.Endpoint(2), /*incarnation=*/2, 0);
  group.Receive(1, restarted, &deliveries);
  CHECK_FALSE(group.HeardInView(1));
  CHECK(group.MemberIncarnation(1) == 10);
  CHECK(group.counters().restarts_named == 1);
  std::vector<std::pair<NodeId, uint64_t>> restarts = group.TakeRestarts();
  REQUIRE(restarts.size() == 1);
  CHECK(restarts[0] == std::pair<NodeId, uint64_t>{1, 11});
  // Once the view change re-adds it as process 11, it is the member.
  group.InstallView(2, {1, 2, 3}, &deliveries, {{1, 11}});
  group.Receive(1, Heartbeat(1, 11, 2), &deliveries);
  CHECK(group.HeardInView(1));
  // Its envelopes of view 1, late, find a retired view that never heard it: refused.
  group.Receive(1, restarted, &deliveries);
  CHECK(group.counters().restarts_named == 1);

  // A node heard in the view: what its later process says changes nothing (a restart as ever).
  nso::Group heard(config.groups[0], config, {1, 2, 3}, net.Endpoint(2), /*incarnation=*/2, 0);
  heard.Receive(1, Heartbeat(1, 10, 1), &deliveries);
  heard.Receive(1, restarted, &deliveries);
  CHECK(heard.MemberIncarnation(1) == 10);
  CHECK(heard.counters().restarts_named == 0);
  CHECK(heard.TakeRestarts().size() == 1);

  // A restarted process of n2 itself takes no other's word: with every member restarted, none
  // would be left to re-add the others.
  nso::Group claimant(config.groups[0], config, {1, 2, 3}, net.Endpoint(2), /*incarnation=*/22, 0);
  claimant.ClaimAsRestarted(2);
  claimant.Receive(1, restarted, &deliveries);
  CHECK(claimant.HeardInView(1));
  CHECK(claimant.MemberIncarnation(1) == 11);
  CHECK(claimant.counters().restarts_named == 0);
}

TEST_CASE("a restarted process says which one it follows in its configured view only",
          "[membership]") {
  nso::ConfigureLogging("off", "text", "");
  nso::SimNetwork net(nso::SimNetworkOptions{});
  const nso::Config config = ConfigOfTwo();
  std::vector<wire::Envelope> sent;  // what n1 receives from n2
  net.Endpoint(1)->SetReceiver(
      [&sent](NodeId, wire::Envelope envelope) { sent.push_back(std::move(envelope)); });
  consensus::Deliveries deliveries;
  nso::Group group(config.groups[0], config, {1, 2, 3}, net.Endpoint(2), /*incarnation=*/22, 0);
  group.ClaimAsRestarted(2);
  group.Tick(100, false, &deliveries);  // heartbeats
  net.RunUntil(200);
  REQUIRE_FALSE(sent.empty());
  for (const wire::Envelope& envelope : sent) {
    CHECK(envelope.view_id() == 1);
    CHECK(envelope.incarnation() == 22);
    CHECK(envelope.previous_incarnation() == 2);
  }
  sent.clear();
  group.InstallView(2, {1, 2, 3}, &deliveries, {});
  group.Tick(300, false, &deliveries);
  net.RunUntil(400);
  REQUIRE_FALSE(sent.empty());
  for (const wire::Envelope& envelope : sent) {
    CHECK(envelope.view_id() == 2);
    CHECK(envelope.previous_incarnation() == 0);
  }
}

}  // namespace cohort
