// What the members keep of a client's replies. Every member keeps its replies to a client's
// latest calls, so that a call sent twice (resent through another member after a failure) runs
// once and is answered again (003 section 4.1; invocation/reply_cache.h). Until session 55 it
// kept the latest 256 of them, whole, for as long as the client lived: a client making calls
// with 1 MiB answers grew every member by 256 MiB. Now each request says below which call id its
// client's daemon awaits nothing (Request.replies_taken_below), and the members forget those
// calls and their replies.
#include <catch2/catch.hpp>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

const char kGroups[] = "groups:\n  - {name: big, members: [n1, n2, n3]}\n";
constexpr size_t kReplyBytes = 1 << 20;

TEST_CASE("members do not keep the large replies of calls whose results the client has had",
          "[reply_cache][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  const bool pipelined = GENERATE(false, true);
  INFO("path " << path << (pipelined ? ", 8 calls in flight" : ", one call at a time"));
  ConnectOptions options;
  options.local = path == "local";
  test::ClusterOptions cluster_options{3, kGroups, "", "warn"};
  cluster_options.metrics = true;
  test::Cluster cluster(cluster_options);
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Servant>> servants;
  for (int i = 1; i <= 3; ++i) {
    auto servant = Servant::Create(cluster.ClientAddress(i), "big", options);
    REQUIRE(servant.ok());
    (*servant)->Serve("get", [](const std::string&) -> absl::StatusOr<std::string> {
      return std::string(kReplyBytes, 'r');
    });
    REQUIRE((*servant)->Start().ok());
    servants.push_back(*std::move(servant));
  }
  auto client = Client::Connect(cluster.ClientAddress(1), options);
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "big", 3));
  auto call_all = [&] {
    auto result = (*client)->Invoke("big", "get", "", Mode::kAll, absl::Seconds(20));
    return result.ok() && result->replies.size() == 3 &&
           result->replies[0].payload.size() == kReplyBytes;
  };
  for (int i = 0; i < 10; ++i) REQUIRE(call_all());
  std::vector<int64_t> before;
  for (int i = 1; i <= 3; ++i) before.push_back(test::RssKib(cluster.Pid(i)));

  constexpr int kCalls = 200;
  if (pipelined) {
    for (int done = 0; done < kCalls; done += 8) {
      std::vector<std::future<absl::StatusOr<GroupReplies>>> calls;
      for (int k = 0; k < 8; ++k) {
        calls.push_back((*client)->InvokeFuture("big", "get", "", Mode::kAll, absl::Seconds(20)));
      }
      for (auto& call : calls) {
        auto result = call.get();
        REQUIRE(result.ok());
        REQUIRE(result->replies.size() == 3);
      }
    }
  } else {
    for (int i = 0; i < kCalls; ++i) REQUIRE(call_all());
  }
  for (int i = 1; i <= 3; ++i) {
    const int64_t grown_kib = test::RssKib(cluster.Pid(i)) - before[i - 1];
    INFO("n" << i << " grew " << grown_kib / 1024 << " MiB over " << kCalls
             << " calls answered with 1 MiB by each member");
    // Before: 200 MiB and more each (every reply kept); now a few replies at a time.
    CHECK(grown_kib < 64 * 1024);
    // What the reply cache says it keeps (before: 200 calls and 200 MiB of replies).
    const std::string metrics = test::HttpGet(cluster.MetricsPort(i), "/metrics");
    const double calls = test::MetricValue(metrics, "cohort_reply_cache_calls{group=\"big\"}");
    const double bytes = test::MetricValue(metrics, "cohort_reply_cache_bytes{group=\"big\"}");
    INFO("its reply cache: " << calls << " calls, " << bytes << " bytes");
    CHECK(calls >= 0);
    CHECK(calls <= 16);
    CHECK(bytes >= 0);
    CHECK(bytes <= 16.0 * kReplyBytes);
  }
}

}  // namespace
}  // namespace cohort
