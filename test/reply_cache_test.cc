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

}  // namespace
}  // namespace cohort::invocation
