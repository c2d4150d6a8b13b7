// Issue 7's first deliverable at the caller's daemon (omniORB2, 001 sections 5-6: no allocation
// per message on the hot path): the bookkeeping made and dropped around each call keeps its
// memory: a client's awaited calls (AwaitedCalls), the causal barrier's count of its requests in
// flight, and the B-tree maps that empty between calls (SpareAllocator). Counted with operator
// new (//nso:count_heap).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "consensus/spare.h"
#include "invocation/awaited_calls.h"
#include "invocation/causal_barrier.h"
#include "invocation/reply_collector.h"
#include "nso/heap_count.h"

namespace cohort {
namespace {

uint64_t Allocations() { return *nso::HeapAllocations(); }

TEST_CASE("awaited calls: the lowest, results in any order, ids added out of order",
          "[call][alloc]") {
  invocation::AwaitedCalls awaited;
  CHECK(awaited.empty());
  for (uint64_t id : {3, 5, 7, 9}) awaited.Add(id);
  CHECK(awaited.size() == 4);
  CHECK(awaited.lowest() == 3);
  awaited.Remove(5);  // a later call's result first
  CHECK(awaited.lowest() == 3);
  CHECK_FALSE(awaited.contains(5));
  awaited.Remove(3);
  CHECK(awaited.lowest() == 7);  // the finished 5 is skipped
  awaited.Remove(4);             // never awaited: ignored
  awaited.Remove(3);             // twice: ignored
  CHECK(awaited.size() == 2);
  awaited.Add(6);  // below the last: put in its place
  awaited.Add(6);  // twice: once
  CHECK(awaited.size() == 3);
  CHECK(awaited.lowest() == 6);
  CHECK(awaited.contains(7));
  awaited.Add(1);
  CHECK(awaited.lowest() == 1);
  for (uint64_t id : {9, 1, 7, 6}) awaited.Remove(id);
  CHECK(awaited.empty());
  awaited.Add(11);
  CHECK(awaited.lowest() == 11);
  CHECK(awaited.size() == 1);
}

TEST_CASE("awaited calls: the same as a std::set under a pipelined stream", "[call][alloc]") {
  invocation::AwaitedCalls awaited;
  std::map<uint64_t, bool> reference;  // id -> awaited
  uint64_t next = 1;
  uint64_t state = 12345;  // a fixed pseudo-random sequence
  for (int step = 0; step < 20000; ++step) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const uint64_t roll = state >> 33;
    if (roll % 3 != 0 || reference.empty()) {
      awaited.Add(next);
      reference[next++] = true;
    } else {
      // A result: mostly the oldest's, sometimes another's.
      auto it = reference.begin();
      if (roll % 5 == 0) std::advance(it, (roll / 5) % reference.size());
      awaited.Remove(it->first);
      reference.erase(it);
    }
    REQUIRE(awaited.size() == reference.size());
    if (!reference.empty()) REQUIRE(awaited.lowest() == reference.begin()->first);
  }
}

TEST_CASE("awaited calls: one call in flight at a time allocates nothing; a pipeline of 64 "
          "nothing once grown",
          "[call][alloc]") {
  invocation::AwaitedCalls awaited;
  uint64_t before = Allocations();
  for (uint64_t id = 1; id <= 1000; ++id) {
    awaited.Add(id);
    awaited.Remove(id);
  }
  CHECK(Allocations() == before);
  uint64_t id = 2000;
  for (int i = 0; i < 64; ++i) awaited.Add(id++);
  for (int round = 0; round < 4; ++round) {  // grown to its steady size
    for (int i = 0; i < 64; ++i) {
      awaited.Remove(id - 64);
      awaited.Add(id++);
    }
  }
  before = Allocations();
  for (int i = 0; i < 5000; ++i) {
    awaited.Remove(id - 64);
    awaited.Add(id++);
  }
  CHECK(Allocations() == before);
  CHECK(awaited.size() == 64);
  CHECK(awaited.lowest() == id - 64);
}

TEST_CASE("causal barrier: a client's sequential calls allocate nothing once warm",
          "[call][alloc]") {
  invocation::CausalBarrier barrier(/*release_after_ms=*/1000, /*count_for_ms=*/5000);
  const std::string group = "g";
  uint64_t call = 1;
  auto one_call = [&](uint64_t now_ms) {
    bool held_made = false;
    REQUIRE(barrier.AdmitOrHold(7, group, call, now_ms, 100, [&] {
      held_made = true;
      return invocation::CausalBarrier::Submit([] {});
    }));
    CHECK_FALSE(held_made);
    CHECK(barrier.in_flight(7) == 1);
    CHECK(barrier.in_flight_bytes(7) == 100);
    CHECK(barrier.Ordered(call++, now_ms).empty());
  };
  for (int i = 0; i < 100; ++i) one_call(i);  // warm: the hash maps and the deque's blocks
  const uint64_t before = Allocations();
  for (int i = 0; i < 16; ++i) one_call(100 + i);
  CHECK(Allocations() == before);
  CHECK(barrier.in_flight(7) == 0);
}

TEST_CASE("causal barrier: a lapsed request is still counted, no longer waited for",
          "[call]") {
  invocation::CausalBarrier barrier(/*release_after_ms=*/100, /*count_for_ms=*/1000);
  int ran = 0;
  auto submit = [&] { ran++; };
  REQUIRE(barrier.Admit(1, "a", 1, 0, submit, 10));
  // Another group's request waits for call 1 to be ordered.
  CHECK_FALSE(barrier.Admit(1, "b", 2, 10, submit, 20));
  CHECK(barrier.in_flight(1) == 2);
  // Call 1's wait lapses: call 2 goes, and both are counted.
  std::vector<invocation::CausalBarrier::Submit> released = barrier.Expire(150);
  REQUIRE(released.size() == 1);
  released[0]();
  CHECK(ran == 1);
  CHECK(barrier.in_flight(1) == 2);
  CHECK(barrier.in_flight_bytes(1) == 30);
  // A third to group b needs no wait: b's request is the only one not lapsed.
  CHECK(barrier.Admit(1, "b", 3, 160, submit, 5));
  CHECK(barrier.in_flight(1) == 3);
  // Call 1, lapsed, reported ordered: uncounted once.
  CHECK(barrier.Ordered(1, 170).empty());
  CHECK(barrier.Ordered(1, 170).empty());
  CHECK(barrier.in_flight(1) == 2);
  CHECK(barrier.in_flight_bytes(1) == 25);
  // Past count_for_ms, a lapsed request is no longer counted either.
  barrier.Expire(1200);
  CHECK(barrier.in_flight(1) == 0);
  CHECK(barrier.total_in_flight_bytes() == 0);
}

TEST_CASE("spare allocator: a B-tree map that empties between entries keeps its root; a copy "
          "has a pool of its own; a moved-from map works",
          "[call][alloc]") {
  consensus::SpareBtreeMap<uint64_t, std::string> map;
  map[1] = "x";
  map.erase(1);
  uint64_t before = Allocations();
  for (uint64_t key = 2; key < 1000; ++key) {
    map[key] = "small";  // (within std::string's inline capacity)
    map.erase(key);
  }
  CHECK(Allocations() == before);

  map[5] = "five";
  consensus::SpareBtreeMap<uint64_t, std::string> copy = map;
  CHECK(copy.get_allocator() != map.get_allocator());
  CHECK(copy.at(5) == "five");
  copy.erase(5);
  map.erase(5);

  consensus::SpareBtreeMap<uint64_t, std::string> moved = std::move(map);
  map.clear();
  map[6] = "six";  // the moved-from map still allocates from a pool
  moved[7] = "seven";
  CHECK(map.size() == 1);
  CHECK(moved.size() == 1);

  // At most SparePool::kKept blocks are kept.
  consensus::SparePool pool;
  std::vector<void*> blocks;
  for (int i = 0; i < consensus::SparePool::kKept + 2; ++i) blocks.push_back(::operator new(64));
  int kept = 0;
  for (void* block : blocks) {
    if (pool.Keep(block, 64)) {
      kept++;
    } else {
      ::operator delete(block);
    }
  }
  CHECK(kept == consensus::SparePool::kKept);
  CHECK(pool.Take(32) == nullptr);
  void* taken = pool.Take(64);
  CHECK(taken != nullptr);
  ::operator delete(taken);
}

TEST_CASE("reply collector: a call given a recycled vector allocates none for its replies",
          "[call][alloc]") {
  std::vector<invocation::MemberReply> recycled;
  {
    invocation::ReplyCollector first(invocation::Mode::kAll, 3);
    for (uint32_t node = 1; node <= 3; ++node) first.Add({node, "n", absl::OkStatus(), "p"});
    recycled = first.TakeReplies();
  }
  REQUIRE(recycled.capacity() >= 3);
  invocation::ReplyCollector second(invocation::Mode::kAll, 3);
  second.GiveStorage(std::move(recycled));
  const uint64_t before = Allocations();
  CHECK_FALSE(second.Add({1, "n", absl::OkStatus(), "a"}));
  CHECK_FALSE(second.Add({2, "n", absl::OkStatus(), "b"}));
  CHECK_FALSE(second.Add({2, "n", absl::OkStatus(), "b"}));  // a second reply of node 2
  CHECK(second.Add({3, "n", absl::OkStatus(), "c"}));
  CHECK(Allocations() == before);
  REQUIRE(second.replies().size() == 3);
  CHECK(second.replies()[1].payload == "b");
  // Storage given once replies came is ignored (they stay).
  second.GiveStorage(std::vector<invocation::MemberReply>(4));
  CHECK(second.replies().size() == 3);
}

}  // namespace
}  // namespace cohort
