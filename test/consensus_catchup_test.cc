// A member that falls far behind (cut off for a while, below the exclusion timeout) catches up
// from the decisions the others kept for it; one beyond the bounds is reported for re-admission
// with the state (consensus/consensus_order.h). Found by the kv nemesis: a member frozen for a
// moment while the others decided > 1024 instances stopped delivering for good.
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "consensus/consensus_order.h"

namespace cohort::consensus {
namespace {

struct InFlight {
  NodeId from;
  NodeId to;
  wire::Envelope envelope;
};

// Three members over a FIFO network that can cut one member off (its messages both ways lost).
class Cluster {
 public:
  explicit Cluster(ConsensusOrderOptions options) {
    for (NodeId id : {1u, 2u, 3u}) {
      orders_[id] = std::make_unique<ConsensusOrder>(id, std::vector<NodeId>{1, 2, 3}, options);
    }
  }
  void Cut(NodeId node) { cut_ = node; }
  void Heal() { cut_ = 0; }
  void Broadcast(NodeId from, const std::string& payload) {
    Outbox out;
    orders_[from]->Broadcast(payload, &out);
    Take(from, &out);
  }
  // Delivers every message in flight (and what they cause), then one tick of `ms`.
  void Run(uint64_t ms) {
    while (!queue_.empty()) {
      InFlight message = std::move(queue_.front());
      queue_.pop_front();
      if (message.from == cut_ || message.to == cut_) continue;
      Outbox out;
      orders_[message.to]->Step(message.from, message.envelope, &out);
      Take(message.to, &out);
    }
    now_ms_ += ms;
    for (auto& [id, order] : orders_) {
      Outbox out;
      order->Tick(now_ms_, &out);
      Take(id, &out);
    }
  }
  const std::vector<std::string>& delivered(NodeId id) { return delivered_[id]; }
  const std::set<NodeId>& beyond_log_reported() const { return beyond_log_; }
  // How many decided instances member `id` still keeps.
  size_t kept(NodeId id) {
    const ConsensusOrder& order = *orders_[id];
    size_t kept = 0;
    for (uint64_t k = 1; k < order.next_instance(); ++k) kept += order.instance(k) != nullptr;
    return kept;
  }

 private:
  void Take(NodeId from, Outbox* out) {
    for (auto& send : out->sends) queue_.push_back({from, send.to, send.TakeWhole()});
    for (auto& delivery : out->deliveries) delivered_[from].push_back(delivery.payload);
    for (NodeId node : out->beyond_log) beyond_log_.insert(node);
  }
  std::map<NodeId, std::unique_ptr<ConsensusOrder>> orders_;
  std::map<NodeId, std::vector<std::string>> delivered_;
  std::set<NodeId> beyond_log_;
  std::deque<InFlight> queue_;
  NodeId cut_ = 0;
  uint64_t now_ms_ = 1;
};

// Member 3 is cut off while 1 and 2 decide `count` instances (one message each), then healed.
void FallBehindAndHeal(Cluster* cluster, int count) {
  cluster->Cut(3);
  for (int i = 0; i < count; ++i) {
    cluster->Broadcast(1 + i % 2, "m" + std::to_string(i));
    cluster->Run(1);
  }
  cluster->Heal();
  for (int i = 0; i < 20000 && cluster->delivered(3).size() < static_cast<size_t>(count); ++i) {
    cluster->Run(5);
  }
}

TEST_CASE("a member behind by many more instances than the old 1024 catches up", "[consensus]") {
  ConsensusOrderOptions options;  // defaults: keep what a member has not moved past
  Cluster cluster(options);
  FallBehindAndHeal(&cluster, 3000);
  REQUIRE(cluster.delivered(1).size() == 3000);
  REQUIRE(cluster.delivered(3).size() == 3000);
  CHECK(cluster.delivered(3) == cluster.delivered(1));
  CHECK(cluster.delivered(2) == cluster.delivered(1));
  CHECK(cluster.beyond_log_reported().empty());
}

TEST_CASE("a member behind the bounds of the decided log is reported for re-admission",
          "[consensus]") {
  ConsensusOrderOptions options;
  options.decided_log_max = 100;  // a crashed-looking member holds no more than this
  Cluster cluster(options);
  FallBehindAndHeal(&cluster, 500);
  REQUIRE(cluster.delivered(1).size() == 500);
  CHECK(cluster.delivered(3).empty());  // nothing out of order: it waits for the state
  CHECK(cluster.beyond_log_reported() == std::set<NodeId>{3});
}

TEST_CASE("decided instances every member moved past are dropped", "[consensus]") {
  ConsensusOrderOptions options;
  options.decided_log_max = 100;
  Cluster cluster(options);
  for (int i = 0; i < 1000; ++i) {
    cluster.Broadcast(1, "m" + std::to_string(i));
    cluster.Run(1);
  }
  for (int i = 0; i < 200; ++i) cluster.Run(5);
  REQUIRE(cluster.delivered(3).size() == 1000);
  // Nobody was behind: no member was reported, whatever the bound.
  CHECK(cluster.beyond_log_reported().empty());
}

// Member 1 calls alone, so it coordinates every instance (the member with most messages in the
// last decision does) and members 2 and 3 hear only from it: each learns from its messages what
// every member delivered, and drops it too (before, only member 1 did: the others kept every
// decided instance up to decided_log_max, 65,536 per group).
TEST_CASE("participants that hear only from the coordinator drop what every member delivered",
          "[consensus]") {
  ConsensusOrderOptions options;  // decided_log_max 65,536
  Cluster cluster(options);
  for (int i = 0; i < 1000; ++i) {
    cluster.Broadcast(1, "m" + std::to_string(i));
    cluster.Run(1);
  }
  for (int i = 0; i < 20; ++i) cluster.Run(5);
  REQUIRE(cluster.delivered(2).size() == 1000);
  REQUIRE(cluster.delivered(3).size() == 1000);
  for (NodeId id : {1u, 2u, 3u}) {
    INFO("member " << id << " keeps " << cluster.kept(id) << " decided instances");
    CHECK(cluster.kept(id) <= 3);
  }
  // A member cut off is still waited for: the others keep what it has not delivered.
  cluster.Cut(3);
  for (int i = 0; i < 50; ++i) {
    cluster.Broadcast(1, "c" + std::to_string(i));
    cluster.Run(1);
  }
  CHECK(cluster.kept(1) >= 50);
  CHECK(cluster.kept(2) >= 50);
  cluster.Heal();
  for (int i = 0; i < 200 && cluster.delivered(3).size() < 1050; ++i) cluster.Run(5);
  CHECK(cluster.delivered(3) == cluster.delivered(1));
  CHECK(cluster.beyond_log_reported().empty());
}

}  // namespace
}  // namespace cohort::consensus
