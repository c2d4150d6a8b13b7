// The pure membership state machines (membership/): views, joining, streamed state transfer.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "membership/joining.h"
#include "membership/state_transfer.h"
#include "membership/view.h"

namespace cohort::membership {
namespace {

std::vector<NodeId> V(std::initializer_list<NodeId> nodes) { return nodes; }

// Sends `sender`'s pieces to `receiver` (some dropped, reordered and duplicated by `rng`), and
// collects what the receiver releases.
struct Delivered {
  std::string meta;
  bool meta_seen = false;
  std::string servant;
  bool complete = false;
  int lasts = 0;
};

void Feed(StateReceiver* receiver, const StateSender& sender, const std::vector<StatePiece>& pieces,
          Delivered* delivered) {
  for (const StatePiece& piece : pieces) {
    StateReceiver::Output out;
    REQUIRE(receiver->Add(sender.view().id, piece.offset, *piece.bytes, piece.last,
                          sender.meta_size(), &out)
                .ok());
    if (out.meta) {
      CHECK_FALSE(delivered->meta_seen);
      delivered->meta = *out.meta;
      delivered->meta_seen = true;
    }
    for (const auto& chunk : out.servant) {
      CHECK(chunk.offset == delivered->servant.size());  // in order, no gap, no repeat
      delivered->servant += chunk.bytes;
      if (chunk.last) delivered->lasts++;
    }
    if (out.complete) delivered->complete = true;
  }
}

}  // namespace

TEST_CASE("a view change removes, adds, and re-adds a restarted member", "[view]") {
  View view{4, V({1, 2, 3})};
  auto next = ApplyChange(view, {4, V({3}), V({5}), 1});
  REQUIRE(next);
  CHECK(next->view.id == 5);
  CHECK(next->view.members == V({1, 2, 5}));
  CHECK(next->removed == V({3}));
  CHECK(next->joiners == V({5}));

  auto readd = ApplyChange(view, {4, V({2}), V({2}), 1});
  REQUIRE(readd);
  CHECK(readd->view.members == V({1, 2, 3}));
  CHECK(readd->removed.empty());
  CHECK(readd->joiners == V({2}));

  // A re-founding view goes past the views heard of (to_view); never back.
  auto past = ApplyChange(view, {4, V({2}), V({2}), 1, /*to_view=*/7});
  REQUIRE(past);
  CHECK(past->view.id == 7);
  auto not_back = ApplyChange(view, {4, V({2}), V({2}), 1, /*to_view=*/3});
  REQUIRE(not_back);
  CHECK(not_back->view.id == 5);
}

TEST_CASE("a stale or emptying view change is not applied", "[view]") {
  View view{4, V({1, 2})};
  CHECK_FALSE(ApplyChange(view, {3, V({2}), {}, 1}));  // proposed in view 3: passed
  CHECK_FALSE(ApplyChange(view, {4, V({1, 2}), {}, 1}));
  CHECK(IsMajority(2, 3));
  CHECK_FALSE(IsMajority(1, 2));
  CHECK(IsMajority(3, 4));
  CHECK_FALSE(IsMajority(2, 4));
}

TEST_CASE("a state is streamed in chunks and released in order", "[state]") {
  std::string meta(1000, 'm');
  std::string servant_state;
  for (int i = 0; i < 3 * static_cast<int>(kStateChunkBytes) + 17; ++i) {
    servant_state += static_cast<char>('a' + i % 26);
  }
  StateSender sender({7, V({1, 2, 3})}, V({3}), meta, 0, 100, 60000);
  CHECK(sender.meta_size() == 1000);
  CHECK_FALSE(sender.complete());
  // The servant streams its state in two parts; big parts are cut to kStateChunkBytes.
  std::vector<StatePiece> first = sender.Append(servant_state.substr(0, kStateChunkBytes + 5), false);
  std::vector<StatePiece> rest = sender.Append(servant_state.substr(kStateChunkBytes + 5), true);
  CHECK(sender.complete());
  for (const StatePiece& piece : sender.pieces()) CHECK(piece.bytes->size() <= kStateChunkBytes);
  CHECK(sender.pieces().size() == 1 + first.size() + rest.size());
  CHECK(sender.pieces().back().last);

  StateReceiver receiver;
  receiver.Begin(7);
  Delivered delivered;
  Feed(&receiver, sender, sender.pieces(), &delivered);
  CHECK(delivered.complete);
  CHECK(delivered.meta == meta);
  CHECK(delivered.servant == servant_state);
  CHECK(delivered.lasts == 1);
  CHECK(receiver.buffered_bytes() == 0);
  // A resend after completion changes nothing.
  Delivered again;
  Feed(&receiver, sender, sender.pieces(), &again);
  CHECK_FALSE(again.complete);
  CHECK(again.servant.empty());
}

TEST_CASE("lost, reordered and duplicated chunks: resends complete the state exactly once",
          "[state]") {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937 rng(seed);
    std::string meta(std::uniform_int_distribution<int>(0, 300000)(rng), 'm');
    std::string servant_state(std::uniform_int_distribution<int>(0, 900000)(rng), 's');
    for (size_t i = 0; i < servant_state.size(); i += 997) servant_state[i] = char('0' + i % 10);
    StateSender sender({3, V({1, 2})}, V({2}), meta, 0, 100, 60000);
    StateReceiver receiver;
    receiver.Begin(3);
    Delivered delivered;
    size_t at = 0;
    while (at < servant_state.size() || !sender.complete()) {
      size_t size = std::uniform_int_distribution<size_t>(0, 400000)(rng);
      bool last = at + size >= servant_state.size();
      sender.Append(servant_state.substr(at, size), last);
      at += size;
    }
    for (int round = 0; round < 40 && !delivered.complete; ++round) {
      std::vector<StatePiece> wire;
      for (const StatePiece& piece : sender.pieces()) {
        if (rng() % 3 == 0) continue;              // lost
        wire.push_back(piece);
        if (rng() % 4 == 0) wire.push_back(piece);  // duplicated
      }
      std::shuffle(wire.begin(), wire.end(), rng);
      Feed(&receiver, sender, wire, &delivered);
    }
    INFO("seed " << seed);
    REQUIRE(delivered.complete);
    CHECK(delivered.meta == meta);
    CHECK(delivered.servant == servant_state);
    CHECK(delivered.lasts == 1);
  }
}

TEST_CASE("an empty state is one chunk that says it is the last", "[state]") {
  StateSender sender({2, V({1, 2})}, V({2}), "", 0, 100, 60000);
  sender.Append("", true);
  StateReceiver receiver;
  receiver.Begin(2);
  Delivered delivered;
  Feed(&receiver, sender, sender.pieces(), &delivered);
  CHECK(delivered.complete);
  CHECK(delivered.meta_seen);
  CHECK(delivered.servant.empty());
  CHECK(delivered.lasts == 1);
}

TEST_CASE("inconsistent chunks are refused with a reason, and a new view starts over", "[state]") {
  StateReceiver receiver;
  receiver.Begin(5);
  StateReceiver::Output out;
  absl::Status other_view = receiver.Add(4, 0, "x", false, 1, &out);
  CHECK(absl::IsFailedPrecondition(other_view));
  CHECK(other_view.message().find("view 4") != std::string::npos);
  REQUIRE(receiver.Add(5, 10, "abc", true, 2, &out).ok());  // ahead of a gap: held
  CHECK(receiver.buffered_bytes() == 3);
  CHECK(absl::IsInvalidArgument(receiver.Add(5, 0, "x", false, 3, &out)));  // meta size changed
  CHECK(absl::IsInvalidArgument(receiver.Add(5, 11, "abcdef", false, 2, &out)));  // past the end
  CHECK(absl::IsInvalidArgument(receiver.Add(5, 0, "ab", true, 2, &out)));  // a second end
  CHECK(absl::IsInvalidArgument(receiver.Add(5, ~0ull - 1, "abc", false, 2, &out)));  // overflow
  CHECK_FALSE(out.meta);
  CHECK(out.servant.empty());
  receiver.Begin(6);
  CHECK(receiver.buffered_bytes() == 0);
  REQUIRE(receiver.Add(6, 0, "mmxyz", true, 2, &out).ok());
  REQUIRE(out.meta);
  CHECK(*out.meta == "mm");
  REQUIRE(out.servant.size() == 1);
  CHECK(out.servant[0].bytes == "xyz");
  CHECK(out.servant[0].last);
  CHECK(out.complete);
}

TEST_CASE("the provider resends until each joiner is done, then stops", "[state]") {
  StateSender sender({3, V({1, 2, 3})}, V({2, 3}), "meta", 0, 100, 5000);
  CHECK_FALSE(sender.ResendDue(99));
  CHECK(sender.ResendDue(100));
  CHECK_FALSE(sender.ResendDue(150));
  sender.JoinerDone(2);
  CHECK_FALSE(sender.done(200));
  CHECK(sender.ResendDue(200));
  sender.JoinerDone(3);
  CHECK(sender.done(201));
  CHECK_FALSE(sender.ResendDue(400));
  StateSender silent({3, V({1, 2})}, V({2}), "meta", 0, 100, 5000);
  CHECK(silent.done(5000));  // a joiner that never answers asks again by itself
}

TEST_CASE("a joiner asks to join, waits for its state, and asks again when it is late",
          "[join]") {
  Joiner joiner;
  joiner.SetTimeouts({200, 2000});
  CHECK(joiner.Tick(1000, false, false) == Joiner::Action::kNone);  // does not want in
  joiner.set_want_member(true);
  CHECK(joiner.Tick(1000, false, false) == Joiner::Action::kAskToJoin);
  CHECK(joiner.Tick(1100, false, false) == Joiner::Action::kNone);  // rate-limited
  CHECK(joiner.Tick(1200, false, false) == Joiner::Action::kAskToJoin);
  joiner.JoinedView(4, 1250, /*provider=*/2);
  CHECK(joiner.awaiting_state());
  CHECK(joiner.state_view() == 4);
  CHECK(joiner.Tick(3000, true, false) == Joiner::Action::kNone);
  CHECK(joiner.Tick(3250, true, false) == Joiner::Action::kStateLateAsk);
  CHECK(joiner.awaiting_state());  // still delivers nothing without a state
  CHECK(joiner.Tick(3300, true, false) == Joiner::Action::kNone);
  joiner.StateInstalled();
  CHECK_FALSE(joiner.awaiting_state());
  CHECK(joiner.Tick(9000, true, false) == Joiner::Action::kNone);  // a member, up to date
}

TEST_CASE("a joiner excluded while it waits for its state asks to join again at once",
          "[join]") {
  Joiner joiner;
  joiner.SetTimeouts({200, 2000});
  joiner.set_want_member(true);
  CHECK(joiner.Tick(1000, false, false) == Joiner::Action::kAskToJoin);
  joiner.JoinedView(4, 1100, /*provider=*/2);
  CHECK(joiner.Tick(1150, true, false) == Joiner::Action::kNone);  // in view 4, state on its way
  // View 5 removes it before the state came (the others counted its silence before view 4):
  // out of the view, it asks again after the retry period, not after the 2 s patience.
  CHECK(joiner.Tick(1250, false, false) == Joiner::Action::kAskToJoin);
  CHECK(joiner.awaiting_state());  // a late state of view 4 is still taken
  CHECK(joiner.Tick(1300, false, false) == Joiner::Action::kNone);  // rate-limited
  CHECK(joiner.Tick(1450, false, false) == Joiner::Action::kAskToJoin);
  joiner.JoinedView(6, 1500, /*provider=*/3);
  CHECK(joiner.Tick(1700, true, false) == Joiner::Action::kNone);  // a member again, waiting
  // A node that no longer wants in (its servant went) does not ask.
  joiner.set_want_member(false);
  CHECK(joiner.Tick(1800, false, false) == Joiner::Action::kNone);
}

TEST_CASE("a joiner told to leave stops asking, and stays left until it wants in again",
          "[join]") {
  Joiner joiner;
  joiner.SetTimeouts({200, 2000});
  joiner.set_want_member(true);
  CHECK(joiner.Tick(1000, false, false) == Joiner::Action::kAskToJoin);
  joiner.Leave();
  CHECK(joiner.left());
  CHECK_FALSE(joiner.want_member());
  CHECK(joiner.Tick(2000, false, false) == Joiner::Action::kNone);  // asks no more
  joiner.set_want_member(false);  // a servant lost: still left
  CHECK(joiner.left());
  joiner.set_want_member(true);  // JoinGroup, or a servant attached
  CHECK_FALSE(joiner.left());
  CHECK(joiner.Tick(3000, false, false) == Joiner::Action::kAskToJoin);
}

TEST_CASE("a joiner that suspects its provider asks again once no chunk came for a while",
          "[join]") {
  Joiner joiner;
  joiner.SetTimeouts({200, 10000});
  joiner.set_want_member(true);
  joiner.JoinedView(4, 1000, /*provider=*/2);
  CHECK(joiner.provider() == 2);
  CHECK(joiner.Tick(1100, true, false, true) == Joiner::Action::kNone);  // just joined
  CHECK(joiner.Tick(1200, true, false, false) == Joiner::Action::kNone);  // not suspected
  CHECK(joiner.Tick(1200, true, false, true) == Joiner::Action::kStateLateAsk);
  CHECK(joiner.awaiting_state());
  CHECK(joiner.Tick(1300, true, false, true) == Joiner::Action::kNone);  // rate-limited
  CHECK(joiner.Tick(1400, true, false, true) == Joiner::Action::kStateLateAsk);
  // A provider still sending is not given up on, suspected or not (a busy provider's "I am
  // alive" messages may come late behind its chunks).
  joiner.StateProgress(1500);
  CHECK(joiner.Tick(1650, true, false, true) == Joiner::Action::kNone);
  CHECK(joiner.Tick(1700, true, false, true) == Joiner::Action::kStateLateAsk);
  // Unknown provider (told its view by a member that did not add it): no state may be on its
  // way, so it asks again once nothing came for a while, as with a suspected provider; chunks
  // coming hold it back.
  Joiner unknown;
  unknown.SetTimeouts({200, 10000});
  unknown.JoinedView(4, 1000);
  CHECK(unknown.Tick(1100, true, false) == Joiner::Action::kNone);
  unknown.StateProgress(1150);
  CHECK(unknown.Tick(1300, true, false) == Joiner::Action::kNone);
  CHECK(unknown.Tick(1350, true, false) == Joiner::Action::kStateLateAsk);
  CHECK(unknown.Tick(1450, true, false) == Joiner::Action::kNone);  // rate-limited
}

TEST_CASE("a member that is behind first gets a chance to catch up, then asks", "[join]") {
  Joiner joiner;
  joiner.SetTimeouts({200, 2000});
  CHECK(joiner.Tick(1000, true, false) == Joiner::Action::kNone);
  CHECK(joiner.Tick(1500, true, true) == Joiner::Action::kNone);
  CHECK(joiner.Tick(1799, true, true) == Joiner::Action::kNone);
  CHECK(joiner.Tick(1800, true, true) == Joiner::Action::kAskToJoin);
}

TEST_CASE("a member does not re-add a joiner whose state is on its way", "[join]") {
  Admission admission;
  admission.SetTimeouts(JoinTimeoutsFor(50, 1000));  // patience: max(1000, 2000)
  admission.Added(7, /*provider=*/2, 100, /*view=*/4);
  CHECK(admission.ProviderOf(7, 4) == 2);
  CHECK(admission.ProviderOf(8, 4) == 0);
  CHECK_FALSE(admission.ShouldPropose(7, true, false, 1000, 4));
  // Unless its provider is suspected here: the state may never come from there.
  CHECK(admission.ShouldPropose(7, true, false, 1000, 4, /*provider_suspected=*/true));
  CHECK(admission.ShouldPropose(7, true, false, 2100, 4));
  CHECK_FALSE(admission.ShouldPropose(7, true, true, 5000, 4));  // still sending it a state
  CHECK_FALSE(admission.ShouldPropose(7, true, true, 1000, 4, true));
  CHECK(admission.ShouldPropose(8, false, false, 1000, 4));
  CHECK(admission.NoticeDue(3, 10));
  CHECK_FALSE(admission.NoticeDue(3, 50));
  CHECK(admission.NoticeDue(3, 110));
}

TEST_CASE("a joiner whose provider left the view is re-added at its next request", "[join]") {
  Admission admission;
  admission.SetTimeouts(JoinTimeoutsFor(50, 1000));
  admission.Added(7, /*provider=*/2, 100, /*view=*/4);
  admission.Added(8, /*provider=*/3, 100, /*view=*/4);
  CHECK_FALSE(admission.ShouldPropose(7, true, false, 1000, 4));
  admission.ProviderGone(2);  // removed by a view change (it failed, or restarted)
  CHECK(admission.ProviderOf(7, 4) == 0);
  CHECK(admission.ShouldPropose(7, true, false, 1000, 4));
  CHECK(admission.ProviderOf(8, 4) == 3);  // another provider's joiner still waits
  CHECK_FALSE(admission.ShouldPropose(8, true, false, 1000, 4));
}

TEST_CASE("a member added in an earlier view that asks to join is re-added, and told no provider",
          "[join]") {
  // n7 was added in view 4 (its state came from n2), then missed the change to view 5: the view
  // this member tells it names no provider (none owes it view 5's state), and its request is
  // answered by a view change that re-adds it with a state, not held back for the patience.
  Admission admission;
  admission.SetTimeouts(JoinTimeoutsFor(50, 10000));  // patience: 10 s
  admission.Added(7, /*provider=*/2, 100, /*view=*/4);
  CHECK_FALSE(admission.ShouldPropose(7, true, false, 1000, 4));
  CHECK(admission.ProviderOf(7, 5) == 0);
  CHECK(admission.ShouldPropose(7, true, false, 1000, 5));
}

}  // namespace cohort::membership
