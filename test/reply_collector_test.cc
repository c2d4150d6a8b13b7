// Reply collection per invocation mode (003 section 2.1).
#include <catch2/catch.hpp>

#include "invocation/reply_collector.h"

namespace cohort::invocation {

TEST_CASE("003 s2.1: replies wanted per mode", "[invocation]") {
  CHECK(RepliesWanted(Mode::kOneWay, 3) == 0);
  CHECK(RepliesWanted(Mode::kFirst, 3) == 1);
  CHECK(RepliesWanted(Mode::kMajority, 3) == 2);
  CHECK(RepliesWanted(Mode::kMajority, 4) == 3);
  CHECK(RepliesWanted(Mode::kMajority, 5) == 3);
  CHECK(RepliesWanted(Mode::kAll, 5) == 5);
}

TEST_CASE("collector: duplicates do not count; completes at the wanted number", "[invocation]") {
  ReplyCollector collector(Mode::kMajority, 3);
  CHECK_FALSE(collector.Add({1, "n1", absl::OkStatus(), "a"}));
  CHECK_FALSE(collector.Add({1, "n1", absl::OkStatus(), "a"}));
  CHECK(collector.Add({2, "n2", absl::OkStatus(), "a"}));
  CHECK(collector.replies().size() == 2);
}

TEST_CASE("collector: wait-for-all does not wait for a member that left the view", "[invocation]") {
  ReplyCollector collector(Mode::kAll, 3);
  CHECK_FALSE(collector.Add({1, "n1", absl::OkStatus(), ""}));
  CHECK_FALSE(collector.Add({2, "n2", absl::OkStatus(), ""}));
  collector.MemberGone(3);
  CHECK(collector.complete());
  CHECK(collector.wanted() == 2);
}

TEST_CASE("collector: the reply of a member gone from the view stands in for no other's",
          "[invocation]") {
  // n3 answered, then left the view (or was removed and added again as a new process): the
  // call now waits for n1 and n2, both (refound_survivors_sim_test saw 6 of 7 members answer).
  ReplyCollector all(Mode::kAll, 3);
  CHECK_FALSE(all.Add({3, "n3", absl::OkStatus(), ""}));
  all.MemberGone(3);
  CHECK(all.wanted() == 2);
  CHECK_FALSE(all.Add({1, "n1", absl::OkStatus(), ""}));
  CHECK_FALSE(all.complete());
  CHECK(all.Add({2, "n2", absl::OkStatus(), ""}));
  CHECK(all.replies().size() == 3);  // n3's reply is still handed to the caller
  ReplyCollector majority(Mode::kMajority, 5);
  CHECK_FALSE(majority.Add({5, "n5", absl::OkStatus(), ""}));
  CHECK_FALSE(majority.Add({4, "n4", absl::OkStatus(), ""}));
  majority.MemberGone(5);  // 3 of the 4 left
  CHECK_FALSE(majority.Add({1, "n1", absl::OkStatus(), ""}));
  CHECK(majority.Add({2, "n2", absl::OkStatus(), ""}));
}

TEST_CASE("collector: a view change never lets a call complete without replies", "[invocation]") {
  ReplyCollector first(Mode::kFirst, 1);  // asynchronous forwarding: the manager's reply only
  first.MemberGone(2);
  CHECK_FALSE(first.complete());
  CHECK(first.wanted() == 1);
  ReplyCollector all(Mode::kAll, 2);
  all.MemberGone(2);
  all.MemberGone(3);
  CHECK(all.wanted() == 1);
  CHECK_FALSE(all.complete());
}

}  // namespace cohort::invocation
