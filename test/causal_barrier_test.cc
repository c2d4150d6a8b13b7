// Causality between related requests of overlapping groups (003 section 4.4, figure 7).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "invocation/causal_barrier.h"

namespace cohort::invocation {

TEST_CASE("003 fig 7: a request to another group waits until the earlier one is ordered",
          "[causality]") {
  CausalBarrier barrier(5000);
  std::vector<std::string> sent;
  auto send = [&](std::string what) { return [&sent, what] { sent.push_back(what); }; };
  // B sends m1 to gy, then m2 to gx: m2 is held until m1 is ordered in gy.
  CHECK(barrier.Admit(/*nso=*/7, "gy", /*call=*/1, 0, send("m1")));
  CHECK_FALSE(barrier.Admit(7, "gx", 2, 0, send("m2")));
  CHECK_FALSE(barrier.Admit(7, "gx", 3, 0, send("m2b")));  // FIFO behind it
  CHECK(barrier.held() == 2);
  auto released = barrier.Ordered(1, 10);
  REQUIRE(released.size() == 2);  // both go to gx: no barrier between them
  for (auto& submit : released) submit();
  CHECK(sent == std::vector<std::string>{"m2", "m2b"});
}

TEST_CASE("requests to the same group, and of other NSOs, are never held", "[causality]") {
  CausalBarrier barrier(5000);
  CHECK(barrier.Admit(1, "g", 1, 0, [] {}));
  CHECK(barrier.Admit(1, "g", 2, 0, [] {}));
  CHECK(barrier.Admit(2, "h", 3, 0, [] {}));
  CHECK(barrier.held() == 0);
}

TEST_CASE("a request that is never reported ordered releases the barrier after the timeout",
          "[causality]") {
  CausalBarrier barrier(1000);
  int sent = 0;
  CHECK(barrier.Admit(1, "gy", 1, 0, [] {}));
  CHECK_FALSE(barrier.Admit(1, "gx", 2, 0, [&] { sent++; }));
  CHECK(barrier.Expire(999).empty());
  auto released = barrier.Expire(1000);
  REQUIRE(released.size() == 1);
  released[0]();
  CHECK(sent == 1);
}

TEST_CASE("in_flight counts a client's unordered and held requests; Expire skips ordered ones",
          "[causality]") {
  CausalBarrier barrier(1000);
  CHECK(barrier.in_flight(1) == 0);
  for (uint64_t call = 1; call <= 100; ++call) CHECK(barrier.Admit(1, "g", call, call, [] {}));
  int released = 0;
  CHECK_FALSE(barrier.Admit(1, "h", 101, 100, [&] { released++; }));
  CHECK(barrier.in_flight(1) == 101);
  CHECK(barrier.in_flight(2) == 0);
  for (uint64_t call = 1; call <= 99; ++call) CHECK(barrier.Ordered(call, 200).empty());
  CHECK(barrier.in_flight(1) == 2);
  CHECK(barrier.Expire(1099).empty());  // call 100 was admitted at 100: not yet
  auto expired = barrier.Expire(1100);
  REQUIRE(expired.size() == 1);  // call 100 gives up, and releases 101 to "h"
  expired[0]();
  CHECK(released == 1);
  CHECK(barrier.in_flight(1) == 1);
  CHECK(barrier.Ordered(101, 1200).empty());
  CHECK(barrier.in_flight(1) == 0);
  CHECK(barrier.Expire(5000).empty());
}

TEST_CASE("a request whose causal wait lapsed still counts in_flight until ordered or count_for",
          "[causality][backpressure]") {
  CausalBarrier barrier(1000, 5000);
  CHECK(barrier.Admit(1, "g", 1, 0, [] {}, 10));
  CHECK(barrier.Admit(1, "g", 2, 0, [] {}, 20));
  int released = 0;
  CHECK_FALSE(barrier.Admit(1, "h", 3, 500, [&] { released++; }, 30));
  // After release_after_ms the held request goes on, but 1 and 2 are still not ordered.
  auto expired = barrier.Expire(1000);
  REQUIRE(expired.size() == 1);
  expired[0]();
  CHECK(released == 1);
  CHECK(barrier.in_flight(1) == 3);
  CHECK(barrier.in_flight_bytes(1) == 60);
  CHECK(barrier.Admit(2, "g", 10, 1000, [] {}, 5));  // another client
  CHECK(barrier.total_in_flight() == 4);
  CHECK(barrier.total_in_flight_bytes() == 65);
  CHECK(barrier.Ordered(10, 1000).empty());
  CHECK(barrier.total_in_flight() == 3);
  // A lapsed request reported ordered is no longer counted.
  CHECK(barrier.Ordered(2, 1200).empty());
  CHECK(barrier.in_flight(1) == 2);
  CHECK(barrier.in_flight_bytes(1) == 40);
  // Request 1 stops counting at 5000; request 3, tracked from its release at 1000, at 6000.
  CHECK(barrier.Expire(4999).empty());
  CHECK(barrier.in_flight(1) == 2);
  CHECK(barrier.Expire(5000).empty());
  CHECK(barrier.in_flight(1) == 1);
  CHECK(barrier.in_flight_bytes(1) == 30);
  CHECK(barrier.Expire(5999).empty());
  CHECK(barrier.in_flight(1) == 1);
  CHECK(barrier.Expire(6000).empty());
  CHECK(barrier.in_flight(1) == 0);
  CHECK(barrier.in_flight_bytes(1) == 0);
  // A lapsed request does not hold a request to another group.
  CHECK(barrier.Admit(1, "g", 4, 7000, [] {}));
  CHECK(barrier.Expire(8000).empty());
  CHECK(barrier.in_flight(1) == 1);
  CHECK(barrier.Admit(1, "h", 5, 8000, [] {}));
  CHECK(barrier.in_flight(1) == 2);
}

TEST_CASE("Holds names the requests a client has held, not those submitted", "[causality]") {
  CausalBarrier barrier(1000);
  CHECK_FALSE(barrier.Holds(1, 5));
  CHECK(barrier.Admit(1, "g", 5, 0, [] {}));
  CHECK_FALSE(barrier.Holds(1, 5));  // submitted at once
  CHECK_FALSE(barrier.Admit(1, "h", 9, 1, [] {}));
  CHECK(barrier.Holds(1, 9));
  CHECK_FALSE(barrier.Holds(2, 9));  // another client's
  auto released = barrier.Ordered(5, 2);
  CHECK(released.size() == 1);
  CHECK_FALSE(barrier.Holds(1, 9));
}

}  // namespace cohort::invocation
