// nso/slot_queue.h: the raw TCP transport's per-link queue. FIFO order, popped items' resources
// released at once, bounded storage while a queue never drains, and no allocation once grown.
#include <memory>
#include <set>
#include <vector>
#include <random>
#include <deque>
#include <string>

#include "catch2/catch.hpp"
#include "nso/slot_queue.h"

namespace cohort::nso {
namespace {

struct Item {
  uint64_t id = 0;
  std::shared_ptr<const std::string> held;
};

TEST_CASE("slot queue: FIFO against std::deque over random pushes and pops", "[slot_queue]") {
  SlotQueue<Item> queue;
  std::deque<uint64_t> model;
  std::mt19937 random(58);
  uint64_t next = 1;
  for (int step = 0; step < 20000; ++step) {
    if (model.empty() || random() % 3 != 0) {
      queue.emplace_back().id = next;
      model.push_back(next++);
    } else {
      REQUIRE(queue.front().id == model.front());
      queue.pop_front();
      model.pop_front();
    }
    REQUIRE(queue.size() == model.size());
    REQUIRE(queue.empty() == model.empty());
    if (!model.empty()) {
      const size_t i = random() % model.size();
      REQUIRE(queue[i].id == model[i]);
    }
  }
}

TEST_CASE("slot queue: a popped item's resources go at once", "[slot_queue]") {
  SlotQueue<Item> queue;
  auto batch = std::make_shared<const std::string>("shared batch");
  queue.emplace_back().held = batch;
  queue.emplace_back().held = batch;
  REQUIRE(batch.use_count() == 3);
  queue.pop_front();
  REQUIRE(batch.use_count() == 2);  // not kept in the popped slot until the queue drains
  queue.pop_front();
  REQUIRE(batch.use_count() == 1);
  REQUIRE(queue.empty());
}

TEST_CASE("slot queue: a queue that never drains stays bounded", "[slot_queue]") {
  // A peer down: each send adds one and drops the oldest (TcpTransport::SendWithBatch).
  SlotQueue<Item> queue;
  for (uint64_t id = 1; id <= 100000; ++id) {
    queue.emplace_back().id = id;
    if (queue.size() > 8) queue.pop_front();
    REQUIRE(queue.positions() <= 2 * 9 + 1);
    REQUIRE(queue.items_made() <= 10);
  }
  REQUIRE(queue.size() == 8);
  REQUIRE(queue.front().id == 100000 - 7);
}

TEST_CASE("slot queue: items never move while queued, and are reused once popped",
          "[slot_queue]") {
  // A protobuf message that moves loses its cached sizes (the transport serialises with them).
  SlotQueue<Item> queue;
  std::set<const Item*> made;
  std::vector<std::pair<const Item*, uint64_t>> queued;
  for (uint64_t id = 1; id <= 1000; ++id) {
    Item& item = queue.emplace_back();
    item.id = id;
    queued.emplace_back(&item, id);
    made.insert(&item);
    if (id % 3 == 0) {
      queue.pop_front();
      queued.erase(queued.begin());
    }
    for (size_t i = 0; i < queued.size(); ++i) {
      REQUIRE(&queue[i] == queued[i].first);
      REQUIRE(queue[i].id == queued[i].second);
    }
    if (id == 500) {  // drained once midway
      queued.clear();
      while (!queue.empty()) queue.pop_front();
    }
  }
  while (!queue.empty()) queue.pop_front();
  const size_t before = made.size();
  for (int round = 0; round < 1000; ++round) {  // drained at each flush: the same items again
    for (int i = 0; i < 4; ++i) made.insert(&queue.emplace_back());
    while (!queue.empty()) queue.pop_front();
  }
  REQUIRE(made.size() == before);
}

}  // namespace
}  // namespace cohort::nso
