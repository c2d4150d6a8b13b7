// invocation/outside_fifo.h: a request from outside is proposed after its client's previous one
// (proposed here or delivered), in order along a chain, and after max(hold_max_ms, its deadline
// + 1 s) without it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "absl/types/span.h"
#include "invocation/outside_fifo.h"

namespace cohort::invocation {
namespace {

wire::Request Req(uint64_t call_id, uint64_t after, uint64_t nso = 7) {
  wire::Request request;
  request.set_origin(4);
  request.set_origin_incarnation(9);
  request.set_client_nso(nso);
  request.set_call_id(call_id);
  request.set_after_call_id(after);
  return request;
}

std::vector<uint64_t> Ids(absl::Span<const wire::Request> requests) {
  std::vector<uint64_t> ids;
  for (const wire::Request& request : requests) ids.push_back(request.call_id());
  return ids;
}

TEST_CASE("outside FIFO: a request waits for its predecessor, then the chain goes in order",
          "[invocation]") {
  OutsideFifo fifo(/*hold_max_ms=*/1000);
  CHECK(Ids(fifo.Admit(Req(10, 0), false, 0)) == std::vector<uint64_t>{10});
  // 11 was proposed here: 12 after it goes at once.
  CHECK(Ids(fifo.Admit(Req(11, 10), false, 1)) == std::vector<uint64_t>{11});
  // 14 and 13 arrive before 12 (another route): held; 12 brings both, in the client's order.
  CHECK(fifo.Admit(Req(14, 13), false, 2).empty());
  CHECK(fifo.Admit(Req(13, 12), false, 2).empty());
  CHECK(fifo.Admit(Req(13, 12), false, 3).empty());  // a copy: kept once
  CHECK(fifo.held() == 2);
  CHECK(fifo.Awaited(OutsideFifo::ClientOf(Req(12, 0)), 12));
  CHECK_FALSE(fifo.Awaited(OutsideFifo::ClientOf(Req(12, 0)), 11));
  CHECK(Ids(fifo.Admit(Req(12, 11), false, 4)) == std::vector<uint64_t>{12, 13, 14});
  CHECK(fifo.held() == 0);
  // Another client's requests are not held behind this one's.
  CHECK(Ids(fifo.Admit(Req(15, 0, /*nso=*/8), false, 5)) == std::vector<uint64_t>{15});
}

TEST_CASE("outside FIFO: a predecessor delivered (proposed elsewhere) releases at the next Take",
          "[invocation]") {
  OutsideFifo fifo(1000);
  CHECK(Ids(fifo.Admit(Req(21, 20), /*predecessor_delivered=*/true, 0)) ==
        std::vector<uint64_t>{21});
  CHECK(fifo.Admit(Req(31, 30), false, 0).empty());
  CHECK(fifo.Admit(Req(32, 31), false, 0).empty());
  CHECK(fifo.Take(10).empty());
  fifo.Delivered(OutsideFifo::ClientOf(Req(30, 0)), 30);
  size_t expired = 7;
  CHECK(Ids(fifo.Take(11, &expired)) == std::vector<uint64_t>{31, 32});
  CHECK(expired == 0);
  CHECK(fifo.held() == 0);
  // Known by the reply cache without a delivery here (a state transfer brought it).
  CHECK(fifo.Admit(Req(61, 60), false, 20).empty());
  CHECK(fifo.Take(21, &expired, [](const OutsideFifo::ClientKey&, uint64_t) { return false; })
            .empty());
  CHECK(Ids(fifo.Take(22, &expired, [](const OutsideFifo::ClientKey&, uint64_t call_id) {
          return call_id == 60;
        })) == std::vector<uint64_t>{61});
}

TEST_CASE("outside FIFO: a predecessor not seen here after wait_ms is named, once per 4 x "
          "wait_ms, until it comes", "[invocation]") {
  OutsideFifo fifo(/*hold_max_ms=*/3000);
  auto calls = [](const std::vector<OutsideFifo::CallKey>& keys) {
    std::vector<uint64_t> ids;
    for (const auto& key : keys) ids.push_back(key.second);
    return ids;
  };
  CHECK(Ids(fifo.Admit(Req(10, 0), false, 0)) == std::vector<uint64_t>{10});  // proposed here
  CHECK(fifo.Admit(Req(11, 10), false, 0).size() == 1);  // its predecessor was proposed here
  CHECK(fifo.Admit(Req(13, 12), false, 100).empty());    // 12 not seen
  CHECK(fifo.Admit(Req(14, 13), false, 100).empty());    // 13 is held here: not named
  CHECK(fifo.Unseen(149, 50).empty());                   // on its way, perhaps
  const std::vector<OutsideFifo::CallKey> unseen = fifo.Unseen(150, 50);
  CHECK(calls(unseen) == std::vector<uint64_t>{12});
  CHECK(unseen[0].first == OutsideFifo::ClientOf(Req(12, 0)));
  CHECK(fifo.Unseen(151, 50).empty());       // named once
  CHECK(fifo.Unseen(349, 50).empty());
  CHECK(calls(fifo.Unseen(350, 50)) == std::vector<uint64_t>{12});  // again after 4 x wait_ms
  CHECK(Ids(fifo.Admit(Req(12, 11), false, 360)) == std::vector<uint64_t>{12, 13, 14});
  CHECK(fifo.Unseen(1000, 50).empty());
  // Another wait, for another predecessor, is named after its own wait_ms.
  CHECK(fifo.Admit(Req(21, 20), false, 1000).empty());
  CHECK(calls(fifo.Unseen(1050, 50)) == std::vector<uint64_t>{20});
  fifo.Clear();
  CHECK(fifo.Unseen(2000, 50).empty());
}

TEST_CASE("outside FIFO: a predecessor that never comes is waited for hold_max_ms, no longer",
          "[invocation]") {
  OutsideFifo fifo(/*hold_max_ms=*/1000, /*remember_ms=*/5000);
  CHECK(fifo.Admit(Req(41, 40), false, 100).empty());
  CHECK(fifo.Admit(Req(42, 41), false, 150).empty());
  size_t expired = 0;
  CHECK(fifo.Take(1099, &expired).empty());
  CHECK(Ids(fifo.Take(1100, &expired)) == std::vector<uint64_t>{41, 42});
  CHECK(expired == 1);  // 42 came with 41, its predecessor, in order
  // What was proposed here is remembered until delivered, or for remember_ms.
  CHECK(fifo.remembered() == 2);
  fifo.Delivered(OutsideFifo::ClientOf(Req(41, 0)), 41);
  CHECK(fifo.remembered() == 1);
  fifo.Take(7000);
  CHECK(fifo.remembered() == 0);
  // Clear (this member left): what was held is dropped, and handed back (the node sends its
  // own requests among them outside).
  CHECK(fifo.Admit(Req(51, 50), false, 7000).empty());
  CHECK(fifo.Admit(Req(52, 51), false, 7000).empty());
  CHECK(fifo.Holds(OutsideFifo::ClientOf(Req(51, 0)), 51));
  CHECK_FALSE(fifo.Holds(OutsideFifo::ClientOf(Req(50, 0)), 50));
  std::vector<uint64_t> dropped = Ids(fifo.Clear());
  std::sort(dropped.begin(), dropped.end());
  CHECK(dropped == std::vector<uint64_t>{51, 52});
  CHECK(fifo.held() == 0);
  CHECK_FALSE(fifo.Holds(OutsideFifo::ClientOf(Req(51, 0)), 51));
  CHECK_FALSE(fifo.has_work());
}

TEST_CASE("outside FIFO: a request held here is told apart until it is proposed", "[invocation]") {
  // Node::SubmitAsMember chains a member's next request behind its previous one while that
  // one is held here (Holds), and no longer once it went (proposed, with its chain).
  OutsideFifo fifo(/*hold_max_ms=*/1000);
  const OutsideFifo::ClientKey client = OutsideFifo::ClientOf(Req(1, 0));
  CHECK(fifo.Admit(Req(21, 20), false, 0).empty());
  CHECK(fifo.Admit(Req(22, 21), false, 0).empty());
  CHECK(fifo.Holds(client, 21));
  CHECK(fifo.Holds(client, 22));
  fifo.Delivered(client, 20);
  CHECK(fifo.Holds(client, 21));  // ready, not yet taken
  CHECK(Ids(fifo.Take(1)) == std::vector<uint64_t>{21, 22});
  CHECK_FALSE(fifo.Holds(client, 21));
  CHECK_FALSE(fifo.Holds(client, 22));
  // Held past the longest wait: proposed without its predecessor, and no longer held.
  CHECK(fifo.Admit(Req(31, 30), false, 10).empty());
  CHECK(fifo.Take(10 + 1000).size() == 1);
  CHECK_FALSE(fifo.Holds(client, 31));
}

TEST_CASE("outside FIFO: a request with a long deadline waits until its deadline + 1 s",
          "[invocation]") {
  // Its predecessor left its client's daemon first, so by this request's deadline that daemon
  // has had it ordered or given it up; waiting less could order this one first while the
  // predecessor is still being sent.
  OutsideFifo fifo(/*hold_max_ms=*/1000);
  wire::Request late = Req(43, 42);
  late.set_deadline_ms(5000);
  CHECK(fifo.Admit(late, false, 100).empty());
  CHECK(fifo.Admit(Req(45, 44), false, 100).empty());  // no deadline given: hold_max_ms
  size_t expired = 0;
  CHECK(Ids(fifo.Take(1100, &expired)) == std::vector<uint64_t>{45});
  CHECK(fifo.Take(6099, &expired).empty());
  CHECK(fifo.held() == 1);
  CHECK(Ids(fifo.Take(6100, &expired)) == std::vector<uint64_t>{43});
  CHECK(expired == 1);
  // Delivered in time: released at once, whatever its deadline.
  wire::Request waits = Req(47, 46);
  waits.set_deadline_ms(5000);
  CHECK(fifo.Admit(waits, false, 7000).empty());
  fifo.Delivered(OutsideFifo::ClientOf(Req(46, 0)), 46);
  CHECK(Ids(fifo.Take(7001, &expired)) == std::vector<uint64_t>{47});
  CHECK(expired == 0);
}

TEST_CASE("outside FIFO: at most max_held wait; more are proposed at once", "[invocation]") {
  OutsideFifo fifo(/*hold_max_ms=*/1000, /*remember_ms=*/5000, /*max_held=*/2);
  CHECK(fifo.Admit(Req(71, 70), false, 0).empty());
  CHECK(fifo.Admit(Req(81, 80), false, 0).empty());
  CHECK(Ids(fifo.Admit(Req(91, 90), false, 0)) == std::vector<uint64_t>{91});
  CHECK(fifo.overflowed() == 1);
  CHECK(fifo.held() == 2);
  fifo.Delivered(OutsideFifo::ClientOf(Req(70, 0)), 70);
  CHECK(Ids(fifo.Take(1)) == std::vector<uint64_t>{71});
  CHECK(fifo.held() == 1);
  CHECK(fifo.Admit(Req(101, 100), false, 2).empty());  // room again
}

}  // namespace
}  // namespace cohort::invocation
