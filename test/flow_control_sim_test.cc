// Flow control from the slowest servant (nso/group_flow.h), on the simulated network: a member
// whose servant reads slower than the group delivers makes the group's new requests wait, so its
// backlog stays near limits.servant_backlog_bytes instead of growing with everything sent; every
// replica still applies every request once, in the same order. A servant that stops reading, or a
// member that crashes while behind, does not hold the group for good.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "invocation/backpressure.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

using nso::NodeId;
using test::InView;

constexpr uint64_t kBacklogBytes = 50000;
constexpr size_t kPayloadBytes = 1000;
constexpr int kRequests = 600;

const nso::GroupConfig::Ordering kOrderings[] = {nso::GroupConfig::Ordering::kConsensus,
                                                 nso::GroupConfig::Ordering::kSequencer};

// Servants that read their deliveries at a pace: `rate[id]` per 5 ms of simulated time (unlimited
// when not given), and tell the node their backlog (Node::SetServantHooks).
struct PacedServants {
  struct Replica {
    std::deque<nso::ServantDelivery> queue;
    uint64_t unread = 0;
    uint64_t read = 0;
    uint64_t max_unread = 0;
    size_t rate = std::numeric_limits<size_t>::max();
    std::vector<std::string> applied;
    uint64_t servant = 0;
    absl::Status cut_off;  // why the node cut it off (ok: it did not)
  };

  explicit PacedServants(test::SimNodes* sim) : sim(sim) {}

  void Serve(NodeId id) {
    nso::Node* node = sim->nodes[id].get();
    auto replica = std::make_shared<Replica>();
    replicas[id] = replica;
    uint64_t nso = *node->Attach("servant");
    replica->servant = *node->RegisterServant(nso, "g", [replica](nso::ServantDelivery d) {
      if (!d.ended.empty() || d.method.empty() || d.method[0] == '$') return;
      replica->unread += d.payload.size();
      replica->max_unread = std::max(replica->max_unread, replica->unread);
      replica->queue.push_back(std::move(d));
    });
    node->SetServantHooks(
        replica->servant,
        [replica] { return nso::ServantBacklog{replica->unread, replica->read}; },
        [replica](const absl::Status& why) {
          replica->cut_off = why;
          replica->queue.clear();
          replica->rate = 0;
        });
    Drain(id);
  }

  void Drain(NodeId id) {
    sim->net.After(5, [this, id] {
      Replica& replica = *replicas[id];
      if (!sim->net.crashed(id)) {
        for (size_t n = 0; n < replica.rate && !replica.queue.empty(); ++n) {
          nso::ServantDelivery d = std::move(replica.queue.front());
          replica.queue.pop_front();
          replica.unread -= d.payload.size();
          replica.read += d.payload.size();
          replica.applied.push_back(d.payload.substr(0, d.payload.find(':')));
          if (!d.one_way) {
            sim->nodes[id]->Answer(replica.servant, d.delivery, absl::OkStatus(), "ok");
          }
        }
      }
      Drain(id);
    });
  }

  test::SimNodes* sim;
  std::map<NodeId, std::shared_ptr<Replica>> replicas;
};

nso::Config FlowConfig(NodeId id, nso::GroupConfig::Ordering ordering, uint64_t backlog_bytes,
                       int64_t stall_ms, int64_t max_unordered, int64_t cutoff_bytes) {
  nso::Config config = test::GroupOfThree(id, ordering);
  config.limits.servant_cutoff_bytes = cutoff_bytes;
  config.limits.servant_backlog_bytes = static_cast<int64_t>(backlog_bytes);
  config.limits.servant_stall_ms = stall_ms;
  config.limits.max_unordered_requests = max_unordered;
  config.consensus.batch_max_messages = 8;  // releases of held requests: 8 per tick
  return config;
}

// Group g of n1..n3 with paced servants (n3's reads 1 delivery per 5 ms), n4 outside.
struct Cast {
  Cast(uint64_t seed, nso::GroupConfig::Ordering ordering, uint64_t backlog_bytes,
       int64_t stall_ms = 2000, int64_t max_unordered = 65536, int64_t cutoff_bytes = 64 << 20)
      : sim(seed), servants(&sim) {
    for (NodeId id = 1; id <= 3; ++id) {
      sim.Add(FlowConfig(id, ordering, backlog_bytes, stall_ms, max_unordered, cutoff_bytes));
    }
    for (NodeId id = 1; id <= 3; ++id) servants.Serve(id);
    servants.replicas[3]->rate = 1;
    sim.net.RunUntil(300);
    client = *sim.nodes[1]->Attach("client");
  }

  // One-way calls from n1's client, 10 per 5 ms, numbered in order; each answer counted.
  void SendGradually(int count) {
    for (int sent = 0; sent < count;) {
      for (int i = 0; i < 10 && sent < count; ++i, ++sent) {
        nso::InvokeOptions options = test::CounterAdd("g", invocation::Mode::kOneWay, 0);
        options.payload = absl::StrCat(next++, ":", std::string(kPayloadBytes, 'x'));
        sim.nodes[1]->Invoke(client, options,
                             [this](nso::InvokeResult result) { accepted += result.status.ok(); });
      }
      sim.net.RunUntil(sim.net.now_ms() + 5);
      held_max = std::max(held_max, HeldAt(1));
    }
  }

  size_t HeldAt(NodeId id) {
    for (const nso::Group* group : sim.nodes[id]->groups()) {
      if (group->name() == "g") return group->held_count();
    }
    return 0;
  }
  const nso::Group* GroupAt(NodeId id) {
    for (const nso::Group* group : sim.nodes[id]->groups()) {
      if (group->name() == "g") return group;
    }
    return nullptr;
  }

  // Runs until every replica in `ids` applied `count`, for at most `limit_ms` more.
  bool RunUntilApplied(std::vector<NodeId> ids, size_t count, uint64_t limit_ms) {
    const uint64_t end = sim.net.now_ms() + limit_ms;
    while (sim.net.now_ms() < end) {
      if (std::all_of(ids.begin(), ids.end(), [&](NodeId id) {
            return servants.replicas[id]->applied.size() >= count;
          })) {
        return true;
      }
      sim.net.RunUntil(sim.net.now_ms() + 10);
    }
    return false;
  }

  test::SimNodes sim;
  PacedServants servants;
  uint64_t client = 0;
  int next = 0;  // the number of the next request sent
  int accepted = 0;
  size_t held_max = 0;
};

// Runs `check` on a fresh Cast(seed, ordering, ...) for each order, logging with SIMLOG.
template <typename Check>
void EachOrdering(uint64_t seed, uint64_t backlog_bytes, int64_t stall_ms, Check check) {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  for (auto ordering : kOrderings) {
    INFO("ordering " << static_cast<int>(ordering) << " seed " << seed);
    Cast cast(seed, ordering, backlog_bytes, stall_ms);
    check(cast);
  }
}

}  // namespace

TEST_CASE("a member whose servant reads slowly makes the group's new requests wait: its backlog "
          "stays near servant_backlog_bytes, and every replica applies every request once, in "
          "the same order",
          "[flow][sim]") {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    EachOrdering(seed, kBacklogBytes, 2000, [](Cast& cast) {
      cast.SendGradually(kRequests);
      REQUIRE(cast.RunUntilApplied({1, 2, 3}, kRequests, 20000));
      CHECK(cast.accepted == kRequests);
      // Without the hold n3's backlog would reach ~540 KB (see the next case).
      CHECK(cast.servants.replicas[3]->max_unread >= kBacklogBytes);
      CHECK(cast.servants.replicas[3]->max_unread <= 2 * kBacklogBytes);
      CHECK(cast.held_max > 0);  // n1's requests waited
      CHECK(cast.GroupAt(3)->times_behind() >= 1);
      for (NodeId id = 1; id <= 3; ++id) {
        CHECK(cast.servants.replicas[id]->applied.size() == static_cast<size_t>(kRequests));
        CHECK(cast.servants.replicas[id]->applied == cast.servants.replicas[1]->applied);
        CHECK(InView(cast.sim.nodes[1].get(), id));
      }
      // Each request once, in n1's client's order (FIFO).
      for (int i = 0; i < kRequests; ++i) {
        CHECK(cast.servants.replicas[1]->applied[i] == absl::StrCat(i));
      }
      cast.sim.net.RunUntil(cast.sim.net.now_ms() + 1000);
      for (NodeId id = 1; id <= 3; ++id) {
        CHECK(cast.HeldAt(id) == 0);
        CHECK_FALSE(cast.GroupAt(id)->flow_holding());
      }
    });
  }
}

TEST_CASE("without flow control (servant_backlog_bytes: 0) the slow servant's backlog grows with "
          "everything sent",
          "[flow][sim]") {
  EachOrdering(1, /*backlog_bytes=*/0, 2000, [](Cast& cast) {
    cast.SendGradually(kRequests);
    REQUIRE(cast.RunUntilApplied({1, 2, 3}, kRequests, 20000));
    CHECK(cast.held_max == 0);
    CHECK(cast.servants.replicas[3]->max_unread > 5 * kBacklogBytes);
    CHECK(cast.GroupAt(3)->times_behind() == 0);
  });
}

TEST_CASE("a servant that stops reading holds its group for servant_stall_ms at most: the others "
          "go on",
          "[flow][sim]") {
  EachOrdering(2, kBacklogBytes, /*stall_ms=*/500, [](Cast& cast) {
    cast.servants.replicas[3]->rate = 0;  // stuck from the start
    cast.SendGradually(kRequests);
    REQUIRE(cast.RunUntilApplied({1, 2}, kRequests, 5000));
    CHECK(cast.held_max > 0);  // it held the group until it was found stuck
    CHECK(cast.servants.replicas[3]->applied.empty());
    CHECK(cast.servants.replicas[3]->max_unread > 5 * kBacklogBytes);
    CHECK_FALSE(cast.GroupAt(1)->flow_holding());
    CHECK(cast.HeldAt(1) == 0);
    // Reading again, it catches up with everything.
    cast.servants.replicas[3]->rate = 1000;
    REQUIRE(cast.RunUntilApplied({3}, kRequests, 5000));
    CHECK(cast.servants.replicas[3]->applied == cast.servants.replicas[1]->applied);
  });
}

TEST_CASE("a servant that does not read is cut off at servant_cutoff_bytes unread, with flow "
          "control or without: its daemon leaves the group, the others go on",
          "[flow][sim][membership]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  constexpr int64_t kCutoffBytes = 4 * kBacklogBytes;
  for (uint64_t backlog_bytes : {kBacklogBytes, uint64_t{0}}) {
    for (auto ordering : kOrderings) {
      INFO("ordering " << static_cast<int>(ordering) << ", backlog " << backlog_bytes);
      Cast cast(6, ordering, backlog_bytes, /*stall_ms=*/500, 65536, kCutoffBytes);
      cast.servants.replicas[3]->rate = 0;  // stuck from the start
      cast.SendGradually(kRequests);
      REQUIRE(cast.RunUntilApplied({1, 2}, kRequests, 5000));
      const PacedServants::Replica& stuck = *cast.servants.replicas[3];
      CHECK(cast.sim.nodes[3]->servants_cut_off() == 1);
      CHECK(stuck.cut_off.code() == absl::StatusCode::kUnavailable);
      CHECK(absl::StrContains(stuck.cut_off.message(), "limits.servant_cutoff_bytes"));
      CHECK(stuck.applied.empty());
      // Found at a tick: at most the cut-off and what came since the last one.
      CHECK(stuck.max_unread >= static_cast<uint64_t>(kCutoffBytes));
      CHECK(stuck.max_unread <= static_cast<uint64_t>(kCutoffBytes) + 20 * (kPayloadBytes + 8));
      // Without its only servant n3 leaves the group (Node::OnServantLost).
      const uint64_t end = cast.sim.net.now_ms() + 3000;
      while (cast.sim.net.now_ms() < end && InView(cast.sim.nodes[1].get(), 3)) {
        cast.sim.net.RunUntil(cast.sim.net.now_ms() + 10);
      }
      cast.sim.net.RunUntil(cast.sim.net.now_ms() + 100);
      CHECK_FALSE(InView(cast.sim.nodes[1].get(), 3));
      CHECK_FALSE(InView(cast.sim.nodes[2].get(), 3));
      CHECK(cast.accepted == kRequests);
      CHECK(cast.servants.replicas[2]->applied == cast.servants.replicas[1]->applied);
      CHECK(cast.sim.nodes[1]->servants_cut_off() == 0);
    }
  }
}

TEST_CASE("a member that crashes while its servants are behind holds the group no longer than "
          "the flag's expiry",
          "[flow][sim]") {
  EachOrdering(3, kBacklogBytes, 2000, [](Cast& cast) {
    cast.SendGradually(200);
    REQUIRE(cast.GroupAt(3)->servants_behind());
    REQUIRE(cast.GroupAt(1)->flow_holding());
    cast.sim.net.Crash(3);
    const uint64_t crashed_at = cast.sim.net.now_ms();
    cast.sim.net.RunUntil(crashed_at + nso::GroupFlow::kExpiryMs + 20);
    CHECK_FALSE(cast.GroupAt(1)->flow_holding());
    CHECK_FALSE(cast.GroupAt(2)->flow_holding());
    cast.SendGradually(100);
    REQUIRE(cast.RunUntilApplied({1, 2}, 300, 3000));
    CHECK(cast.servants.replicas[2]->applied == cast.servants.replicas[1]->applied);
    CHECK(cast.HeldAt(1) == 0);
  });
}

TEST_CASE("a membership change while requests are held orders them first: a member that leaves "
          "loses none",
          "[flow][sim][membership]") {
  EachOrdering(4, kBacklogBytes, 2000, [](Cast& cast) {
    cast.SendGradually(300);
    REQUIRE(cast.HeldAt(1) > 0);
    REQUIRE(cast.sim.nodes[1]->LeaveGroup("g").ok());
    cast.SendGradually(100);  // while it leaves, and from outside once out
    cast.sim.net.RunUntil(cast.sim.net.now_ms() + 200);
    REQUIRE(cast.RunUntilApplied({2, 3}, 400, 20000));
    CHECK(cast.accepted == 400);
    CHECK_FALSE(InView(cast.sim.nodes[2].get(), 1));
    CHECK(cast.servants.replicas[3]->applied == cast.servants.replicas[2]->applied);
    for (int i = 0; i < 400; ++i) {
      CHECK(cast.servants.replicas[2]->applied[i] == absl::StrCat(i));
    }
  });
}

TEST_CASE("the requests a member holds are bounded as one client's backlog is: with many clients, "
          "new ones wait for room",
          "[flow][sim][backpressure]") {
  nso::ConfigureLogging(getenv("SIMLOG") ? "info" : "off", "text", "");
  constexpr int kMaxUnordered = 30;
  for (auto ordering : kOrderings) {
    INFO("ordering " << static_cast<int>(ordering));
    Cast cast(5, ordering, kBacklogBytes, 2000, kMaxUnordered);
    nso::Node* n1 = cast.sim.nodes[1].get();
    std::vector<uint64_t> clients;
    for (int i = 0; i < 20; ++i) clients.push_back(*n1->Attach("client"));
    int accepted = 0, refused_held = 0, refused_other = 0;
    size_t held_max = 0;
    for (int step = 0; step < 60; ++step) {  // 20 one-way calls per 5 ms, one per client
      for (uint64_t client : clients) {
        nso::InvokeOptions options = test::CounterAdd("g", invocation::Mode::kOneWay, 0);
        options.payload = absl::StrCat("c:", std::string(kPayloadBytes, 'x'));
        n1->Invoke(client, options, [&](nso::InvokeResult result) {
          if (result.status.ok()) {
            ++accepted;
          } else if (invocation::IsBacklog(result.status) &&
                     absl::StrContains(result.status.message(), "wait for a member's servants")) {
            ++refused_held;
          } else {
            ++refused_other;
          }
        });
      }
      cast.sim.net.RunUntil(cast.sim.net.now_ms() + 5);
      held_max = std::max(held_max, cast.HeldAt(1));
    }
    CHECK(held_max <= static_cast<size_t>(kMaxUnordered));
    CHECK(refused_held > 0);
    CHECK(refused_other == 0);
    REQUIRE(cast.RunUntilApplied({1, 2, 3}, accepted, 20000));
    for (NodeId id = 1; id <= 3; ++id) {
      CHECK(cast.servants.replicas[id]->applied.size() == static_cast<size_t>(accepted));
    }
  }
}

}  // namespace cohort
