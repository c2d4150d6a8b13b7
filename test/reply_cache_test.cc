// The reply cache (invocation/reply_cache.h): exactly-once execution of calls delivered more than
// once, and its transfer to a joiner. Found by the kv nemesis (divergent replies): the evicted
// window was not part of the state, so a joiner executed an old re-broadcast call that every
// other replica ignored as forgotten.
#include "catch2/catch.hpp"
#include "invocation/reply_cache.h"

namespace cohort::invocation {
namespace {

const ReplyCache::ClientKey kClient{3, 7, 1};

wire::Reply Answer(uint64_t call_id) {
  wire::Reply reply;
  reply.set_call_id(call_id);
  reply.set_payload("r" + std::to_string(call_id));
  return reply;
}

void Execute(ReplyCache* cache, uint64_t call_id) {
  const wire::Reply* cached = nullptr;
  REQUIRE(cache->OnDelivery(kClient, call_id, &cached) == ReplyCache::Verdict::kExecute);
  cache->Completed(kClient, call_id, Answer(call_id));
}

TEST_CASE("a call delivered twice is executed once and answered from the cache", "[reply_cache]") {
  ReplyCache cache(4);
  const wire::Reply* cached = nullptr;
  REQUIRE(cache.OnDelivery(kClient, 1, &cached) == ReplyCache::Verdict::kExecute);
  CHECK(cache.OnDelivery(kClient, 1, &cached) == ReplyCache::Verdict::kInProgress);
  cache.Completed(kClient, 1, Answer(1));
  REQUIRE(cache.OnDelivery(kClient, 1, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "r1");
}

TEST_CASE("calls older than the window are forgotten, not executed again", "[reply_cache]") {
  ReplyCache cache(4);
  for (uint64_t call = 1; call <= 10; ++call) Execute(&cache, call);
  const wire::Reply* cached = nullptr;
  CHECK(cache.OnDelivery(kClient, 3, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.OnDelivery(kClient, 9, &cached) == ReplyCache::Verdict::kAnswered);
}

TEST_CASE("a call delivered after a later call of its client is told apart, once",
          "[reply_cache]") {
  // FIFO per client (invocation/outside_fifo.h): call ids increase in the order the client's
  // daemon sent them, so call 2 delivered after call 3 was overtaken; the node refuses it.
  ReplyCache cache(4);
  Execute(&cache, 1);
  Execute(&cache, 3);
  const wire::Reply* cached = nullptr;
  CHECK(cache.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kOutOfOrder);
  CHECK(cache.LatestCall(kClient) == 3);  // the call it came after (named in the warning)
  // A copy of it delivered again is the same call: answered as the first delivery was.
  CHECK(cache.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kInProgress);
  wire::Reply refused;
  refused.set_status_code(10);  // ABORTED
  cache.Completed(kClient, 2, refused);
  REQUIRE(cache.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->status_code() == 10);
  CHECK(cache.Known(kClient, 2));
  // In order again after it; another client's numbers are its own.
  CHECK(cache.OnDelivery(kClient, 4, &cached) == ReplyCache::Verdict::kExecute);
  CHECK(cache.OnDelivery({3, 7, 2}, 1, &cached) == ReplyCache::Verdict::kExecute);
  // Call 6 overtakes call 5 (and pushes call 1 out of the window): a joiner given the state
  // then judges call 5 as every member does.
  CHECK(cache.OnDelivery(kClient, 6, &cached) == ReplyCache::Verdict::kExecute);
  wire::GroupState state;
  cache.ToProto(&state);
  ReplyCache joiner(4);
  joiner.FromProto(state);
  const wire::Reply* at_joiner = nullptr;
  CHECK(joiner.OnDelivery(kClient, 5, &at_joiner) == ReplyCache::Verdict::kOutOfOrder);
  CHECK(cache.OnDelivery(kClient, 5, &cached) == ReplyCache::Verdict::kOutOfOrder);
  CHECK(joiner.OnDelivery(kClient, 1, &at_joiner) == ReplyCache::Verdict::kForgotten);
}

TEST_CASE("a joiner's cache judges every old call as the provider's does", "[reply_cache]") {
  ReplyCache provider(4);
  for (uint64_t call = 1; call <= 10; ++call) Execute(&provider, call);
  wire::GroupState state;
  provider.ToProto(&state);
  wire::GroupState wire_copy;
  REQUIRE(wire_copy.ParseFromString(state.SerializeAsString()));
  ReplyCache joiner(4);
  joiner.FromProto(wire_copy);
  for (uint64_t call = 1; call <= 12; ++call) {
    const wire::Reply* at_provider = nullptr;
    const wire::Reply* at_joiner = nullptr;
    ReplyCache::Verdict expected = provider.OnDelivery(kClient, call, &at_provider);
    INFO("call " << call);
    CHECK(joiner.OnDelivery(kClient, call, &at_joiner) == expected);
    if (expected == ReplyCache::Verdict::kAnswered) CHECK(at_joiner->payload() == at_provider->payload());
  }
}

// A departed client (Request.retire_client): its replies go; every call of it counts as
// delivered and forgotten, so a late copy is neither executed nor answered, and a daemon's
// departed clients are kept as ranges of NSO ids (before: each kept its window for good).
TEST_CASE("a retired client's replies go; its late copies are forgotten; retired clients are "
          "kept as ranges, and handed to a joiner", "[reply_cache]") {
  ReplyCache cache(4);
  for (uint64_t call = 1; call <= 3; ++call) Execute(&cache, call);
  const ReplyCache::ClientKey other{3, 7, 2};
  const wire::Reply* cached = nullptr;
  REQUIRE(cache.OnDelivery(other, 9, &cached) == ReplyCache::Verdict::kExecute);
  REQUIRE(cache.clients() == 2);
  cache.Retire(kClient);
  CHECK(cache.clients() == 1);
  CHECK(cache.Retired(kClient));
  CHECK_FALSE(cache.Retired(other));
  CHECK(cache.Known(kClient, 2));
  CHECK(cache.Known(kClient, 100));
  CHECK(cache.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.OnDelivery(kClient, 100, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.clients() == 1);  // judged without an entry made again
  // Same NSO of another incarnation of its daemon, or of another daemon: not retired.
  CHECK_FALSE(cache.Retired({3, 8, 1}));
  CHECK_FALSE(cache.Retired({4, 7, 1}));
  // Ranges: NSOs 1..3 and 5 are two ranges; 4 joins them into one; 9 another.
  cache.Retire({3, 7, 3});
  cache.Retire({3, 7, 2});
  CHECK(cache.retired_ranges() == 1);
  CHECK(cache.clients() == 0);
  cache.Retire({3, 7, 5});
  CHECK(cache.retired_ranges() == 2);
  cache.Retire({3, 7, 4});
  CHECK(cache.retired_ranges() == 1);
  cache.Retire({3, 7, 9});
  cache.Retire({3, 7, 2});  // twice: nothing changes
  CHECK(cache.retired_ranges() == 2);
  for (uint64_t nso : {1, 2, 3, 4, 5, 9}) CHECK(cache.Retired({3, 7, nso}));
  for (uint64_t nso : {6, 7, 8, 10}) CHECK_FALSE(cache.Retired({3, 7, nso}));
  // A joiner judges them alike; a range that makes no sense (from a peer) is ignored.
  wire::GroupState state;
  cache.ToProto(&state);
  wire::GroupState::RetiredClients* nonsense = state.add_retired();
  nonsense->set_origin(5);
  nonsense->set_origin_incarnation(1);
  nonsense->set_first_nso(10);
  nonsense->set_end_nso(10);
  ReplyCache joiner(4);
  joiner.FromProto(state);
  CHECK(joiner.retired_ranges() == 2);
  for (uint64_t nso : {1, 2, 3, 4, 5, 9}) CHECK(joiner.Retired({3, 7, nso}));
  for (uint64_t nso : {6, 7, 8, 10}) CHECK_FALSE(joiner.Retired({3, 7, nso}));
  CHECK(joiner.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kForgotten);
}

// A client's daemon says which of its calls it awaits no more (Request.replies_taken_below): they
// are forgotten at every member, with their replies, and a late copy of one is neither run nor
// answered. Before session 55 every member kept a client's latest 256 calls with their replies
// (each up to 4 MiB) for the client's life.
TEST_CASE("calls a client's daemon awaits no more are forgotten with their replies; a late copy "
          "is not run; the calls after them are judged as before",
          "[reply_cache]") {
  ReplyCache cache(16);
  for (uint64_t call = 1; call <= 5; ++call) Execute(&cache, call);
  const wire::Reply* cached = nullptr;
  REQUIRE(cache.OnDelivery(kClient, 6, &cached) == ReplyCache::Verdict::kExecute);  // in progress
  REQUIRE(cache.OnDelivery(kClient, 9, &cached) == ReplyCache::Verdict::kExecute);  // 7, 8: not yet
  CHECK(cache.reply_bytes() == 10);  // "r1".."r5"

  cache.TakeRepliesBelow(kClient, 4);
  CHECK(cache.reply_bytes() == 4);  // r4, r5 stay
  CHECK(cache.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.Known(kClient, 2));
  REQUIRE(cache.OnDelivery(kClient, 4, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "r4");
  cache.TakeRepliesBelow(kClient, 2);  // an older word (a resent copy): nothing comes back
  CHECK(cache.OnDelivery(kClient, 3, &cached) == ReplyCache::Verdict::kForgotten);

  CHECK(cache.calls() == 4);  // 4, 5, 6 (in progress), 9
  cache.TakeRepliesBelow(kClient, 8);  // 7 was given up by its daemon (a deadline, one-way)
  CHECK(cache.calls() == 1);  // 9
  CHECK(cache.reply_bytes() == 0);
  cache.Completed(kClient, 6, Answer(6));  // answered here after its daemon had the result
  CHECK(cache.reply_bytes() == 0);
  CHECK(cache.OnDelivery(kClient, 6, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.OnDelivery(kClient, 7, &cached) == ReplyCache::Verdict::kForgotten);  // not run
  // At and above the mark, as before: 8 comes after 9 (out of order), 9 twice (in progress).
  CHECK(cache.OnDelivery(kClient, 8, &cached) == ReplyCache::Verdict::kOutOfOrder);
  CHECK(cache.OnDelivery(kClient, 9, &cached) == ReplyCache::Verdict::kInProgress);

  // A joiner judges them alike.
  wire::GroupState state;
  cache.ToProto(&state);
  ReplyCache joined(16);
  joined.FromProto(state);
  CHECK(joined.OnDelivery(kClient, 5, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(joined.OnDelivery(kClient, 9, &cached) == ReplyCache::Verdict::kInProgress);
  CHECK(joined.OnDelivery(kClient, 10, &cached) == ReplyCache::Verdict::kExecute);
}

TEST_CASE("entries of forgotten calls are reused for later calls: a reused entry starts in "
          "progress, holds only its own reply, and a copy of the cache judges alike",
          "[reply_cache]") {
  ReplyCache cache(4);
  const wire::Reply* cached = nullptr;
  // 1..40 through a window of 4 (evictions) and TakeRepliesBelow: entries go round as spares.
  for (uint64_t call = 1; call <= 40; ++call) {
    REQUIRE(cache.OnDelivery(kClient, call, &cached) == ReplyCache::Verdict::kExecute);
    // Reused or not, a new entry is in progress: never answered with an earlier call's reply.
    REQUIRE(cache.OnDelivery(kClient, call, &cached) == ReplyCache::Verdict::kInProgress);
    wire::Reply answer = Answer(call);
    if (call % 3 == 0) answer.set_error("refused " + std::to_string(call));
    cache.Completed(kClient, call, answer);
    REQUIRE(cache.OnDelivery(kClient, call, &cached) == ReplyCache::Verdict::kAnswered);
    CHECK(cached->payload() == "r" + std::to_string(call));
    CHECK(cached->error() == (call % 3 == 0 ? "refused " + std::to_string(call) : ""));
    if (call % 5 == 0) cache.TakeRepliesBelow(kClient, call - 1);
  }
  CHECK(cache.calls() <= 4);
  CHECK(cache.OnDelivery(kClient, 30, &cached) == ReplyCache::Verdict::kForgotten);
  REQUIRE(cache.OnDelivery(kClient, 40, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "r40");
  // An entry in progress stays so across a copy; a reused one in the copy is too.
  REQUIRE(cache.OnDelivery(kClient, 41, &cached) == ReplyCache::Verdict::kExecute);
  ReplyCache copy = cache;
  CHECK(copy.OnDelivery(kClient, 41, &cached) == ReplyCache::Verdict::kInProgress);
  REQUIRE(copy.OnDelivery(kClient, 42, &cached) == ReplyCache::Verdict::kExecute);
  CHECK(copy.OnDelivery(kClient, 42, &cached) == ReplyCache::Verdict::kInProgress);
  copy.FillAnswersFrom(cache);  // 41 is not answered in the live cache either
  CHECK(copy.OnDelivery(kClient, 41, &cached) == ReplyCache::Verdict::kInProgress);
  cache.Completed(kClient, 41, Answer(41));
  copy.FillAnswersFrom(cache);
  REQUIRE(copy.OnDelivery(kClient, 41, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "r41");
  CHECK(cache.reply_bytes() == copy.reply_bytes());
}

}  // namespace
}  // namespace cohort::invocation
