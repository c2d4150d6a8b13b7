// The calls a durable group's servant keeps with its state (invocation/kept_call_log.h) and their
// way into and out of a daemon's reply cache (invocation/kept_calls.h).
#include <catch2/catch.hpp>

#include <string>

#include "invocation/kept_call_log.h"
#include "invocation/kept_calls.h"
#include "invocation/kept_state.h"
#include "invocation/reply_cache.h"
#include "proto/api.pb.h"

namespace cohort::invocation {
namespace {

constexpr ReplyCache::ClientKey kClient{4, 77, 9};

void Answered(ReplyCache* cache, ReplyCache::ClientKey client, uint64_t call_id,
              const std::string& payload) {
  const wire::Reply* cached = nullptr;
  REQUIRE(cache->OnDelivery(client, call_id, &cached) == ReplyCache::Verdict::kExecute);
  wire::Reply reply;
  reply.set_replier(1);
  reply.set_payload(payload);
  cache->Completed(client, call_id, reply);
}

}  // namespace

TEST_CASE("kept calls: a servant's log goes into a reply cache; a resent call is answered as it "
          "was, an older one is not executed again", "[durable]") {
  KeptCallLog log;
  log.Add(KeptCallIdentity(kClient, 5), std::string("6"));
  log.Add(KeptCallIdentity(kClient, 6), absl::NotFoundError("no such key"));
  log.Add("", std::string("ignored: no identity"));
  REQUIRE(log.size() == 2);
  api::KeptCalls calls;
  REQUIRE(calls.ParseFromString(log.Bytes()));
  ReplyCache cache;
  REQUIRE(LoadKeptCalls(calls, /*replier=*/3, &cache).ok());
  const wire::Reply* cached = nullptr;
  REQUIRE(cache.OnDelivery(kClient, 5, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "6");
  CHECK(cached->replier() == 3);
  REQUIRE(cache.OnDelivery(kClient, 6, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->status_code() == static_cast<int>(absl::StatusCode::kNotFound));
  CHECK(cached->error() == "no such key");
  CHECK(cache.OnDelivery(kClient, 4, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.OnDelivery(kClient, 7, &cached) == ReplyCache::Verdict::kExecute);
  CHECK(cache.OnDelivery({4, 78, 9}, 1, &cached) == ReplyCache::Verdict::kExecute);
}

TEST_CASE("kept calls: a reply cache given with a transferred state keeps its answers, and a "
          "call in progress stays so", "[durable]") {
  ReplyCache cache;
  Answered(&cache, kClient, 1, "a");
  Answered(&cache, kClient, 2, "b");
  const wire::Reply* cached = nullptr;
  REQUIRE(cache.OnDelivery({5, 1, 1}, 10, &cached) == ReplyCache::Verdict::kExecute);
  api::KeptCalls calls;
  ToKeptCalls(cache, &calls);
  REQUIRE(calls.calls_size() == 3);
  KeptCallLog log;
  log.Replace(calls);
  log.Add(KeptCallIdentity({5, 1, 1}, 10), std::string("done"));  // answered here later
  api::KeptCalls kept;
  REQUIRE(kept.ParseFromString(log.Bytes()));
  ReplyCache loaded;
  REQUIRE(LoadKeptCalls(kept, 2, &loaded).ok());
  REQUIRE(loaded.OnDelivery(kClient, 2, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "b");
  REQUIRE(loaded.OnDelivery({5, 1, 1}, 10, &cached) == ReplyCache::Verdict::kAnswered);
  CHECK(cached->payload() == "done");  // the answer wins over "in progress"

  api::KeptCalls in_progress;
  ToKeptCalls(cache, &in_progress);
  ReplyCache waiting;
  REQUIRE(LoadKeptCalls(in_progress, 2, &waiting).ok());
  CHECK(waiting.OnDelivery({5, 1, 1}, 10, &cached) == ReplyCache::Verdict::kInProgress);
}

TEST_CASE("kept calls: the log keeps the latest calls within its bounds", "[durable]") {
  KeptCallLog log;
  for (uint64_t call = 1; call <= kKeptCallsMax + 10; ++call) {
    log.Add(KeptCallIdentity(kClient, call), std::string("x"));
  }
  CHECK(log.size() == kKeptCallsMax);
  api::KeptCalls calls;
  REQUIRE(calls.ParseFromString(log.Bytes()));
  ReplyCache cache;
  REQUIRE(LoadKeptCalls(calls, 1, &cache).ok());
  const wire::Reply* cached = nullptr;
  CHECK(cache.OnDelivery(kClient, 10, &cached) == ReplyCache::Verdict::kForgotten);
  CHECK(cache.OnDelivery(kClient, 11, &cached) == ReplyCache::Verdict::kAnswered);

  KeptCallLog big;
  const std::string payload(300 * 1024, 'p');
  for (uint64_t call = 1; call <= 10; ++call) big.Add(KeptCallIdentity(kClient, call), payload);
  CHECK(big.size() == 3);  // 1 MiB holds three
  CHECK(big.Bytes().size() <= kKeptCallsMaxBytes);

  ReplyCache many;  // more than kKeptCallsMax in all: each client keeps its latest share
  for (uint64_t client = 1; client <= 20; ++client) {
    for (uint64_t call = 1; call <= 256; ++call) Answered(&many, {client, 1, 1}, call, "v");
  }
  api::KeptCalls shared;
  ToKeptCalls(many, &shared);
  CHECK(shared.calls_size() == 20 * (kKeptCallsMax / 20));
  ReplyCache from_shared;
  REQUIRE(LoadKeptCalls(shared, 1, &from_shared).ok());
  const uint64_t oldest_kept = 256 - kKeptCallsMax / 20 + 1;
  for (uint64_t client = 1; client <= 20; ++client) {
    INFO("client " << client);
    CHECK(from_shared.LatestCall({client, 1, 1}) == 256);
    CHECK(from_shared.OnDelivery({client, 1, 1}, oldest_kept, &cached) ==
          ReplyCache::Verdict::kAnswered);
    CHECK(from_shared.OnDelivery({client, 1, 1}, oldest_kept - 1, &cached) ==
          ReplyCache::Verdict::kForgotten);
  }
}

TEST_CASE("kept calls: what is not a call's identity is named, not loaded", "[durable]") {
  api::KeptCalls calls;
  calls.add_calls()->set_call(KeptCallIdentity(kClient, 1));
  calls.add_calls()->set_call("\xff\xff nonsense");
  ReplyCache cache;
  absl::Status loaded = LoadKeptCalls(calls, 1, &cache);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.message().find("kept call 1 of 2") != std::string::npos);
  KeptCallLog log;
  CHECK_FALSE(log.ReplaceFrom("\x0a\xff").ok());
}

}  // namespace cohort::invocation
