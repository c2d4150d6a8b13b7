// A client that pipelines calls and does not read their results is not read either, on a gRPC
// InvokeStream (what another language's client does) and on the local fast path: with 1,024 calls
// outstanding, 16 MiB of results waiting, or as many calls outstanding as make 16 MiB at the
// mean size of its results so far (16 before its first result), its daemon reads no more of its
// calls until all are down to half (nso/api_service.h), so the calls wait in the client's stream,
// not as results in the daemon's memory. Once it reads, every call is executed and answered, in
// full. Before session 50 the daemon read and executed every call at once and kept all their
// results (here 94 MiB) until the client read them, or, on the local fast path, disconnected the
// client at 64 MiB unread; in session 50 it read 1,024 (32 MiB of results here), since session
// 51 about 512 (16 MiB at 32 KiB each). Past 64 MiB of results not taken (or 32 times its
// largest result, if more) a client is cut off; one that reads is not, for a burst of large ones.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <future>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"
#include "invocation/local_link.h"
#include "invocation/servant.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"
#include "test/raw_client.h"

namespace cohort {
namespace {

constexpr int kCalls = 3000;
constexpr size_t kResultBytes = 32 * 1024;  // 94 MiB of results in all; 512 make 16 MiB

// A client's two ends of its calls, over one transport: write a call, read a result.
struct Calls {
  std::function<bool(const api::PipelinedCall&)> write;
  std::function<bool(api::PipelinedResult*)> read;
  std::function<void()> done_writing;
  // gRPC: the stream and its context; the local fast path: the link.
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReaderWriter<api::PipelinedCall, api::PipelinedResult>> stream;
  std::unique_ptr<internal::LocalLink> link;
  ~Calls() {
    if (context) context->TryCancel();  // a stream a failed check left open
  }
};

// `path`: "grpc" (an InvokeStream, as another language's client has) or "local".
std::unique_ptr<Calls> OpenCalls(const std::string& path, const test::RawClient& raw) {
  auto calls = std::make_unique<Calls>();
  Calls* c = calls.get();
  if (path == "grpc") {
    c->context = std::make_unique<grpc::ClientContext>();
    c->stream = raw.stub->InvokeStream(c->context.get());
    c->write = [c](const api::PipelinedCall& call) { return c->stream->Write(call); };
    c->read = [c](api::PipelinedResult* result) { return c->stream->Read(result); };
    c->done_writing = [c] { c->stream->WritesDone(); };
    return calls;
  }
  auto opened = internal::LocalLink::Open(
      internal::LocalEndpoint{raw.local_api, raw.local_key, "", ""}, absl::Seconds(5));
  if (!opened.ok()) return nullptr;
  c->link = *std::move(opened);
  c->write = [c](const api::PipelinedCall& call) {
    api::LocalFrame frame;
    *frame.mutable_call() = call;
    return c->link->Write(frame).ok();
  };
  c->read = [c](api::PipelinedResult* result) {
    api::LocalFrame frame;
    if (!c->link->Read(&frame) || !frame.has_result()) return false;
    *result = std::move(*frame.mutable_result());
    return true;
  };
  c->done_writing = [] {};
  return calls;
}

api::PipelinedCall BigCall(uint64_t nso, int i) {
  api::PipelinedCall call;
  call.set_call(i);
  api::InvokeRequest* invoke = call.mutable_invoke();
  invoke->set_nso(nso);
  invoke->set_group("big");
  invoke->set_method("big");
  invoke->set_payload(absl::StrCat(i));
  invoke->set_mode(api::WAIT_FIRST);
  invoke->set_deadline_ms(120000);
  return call;
}

// One daemon, n1, with the one-member group "big".
test::ClusterOptions BigGroupOptions() {
  test::ClusterOptions options;
  options.size = 1;
  options.groups_yaml = "groups:\n  - {name: big, members: [n1]}\n";
  options.metrics = true;
  return options;
}

// The servant of "big" on n1's local fast path, serving method "big" with `handler`.
absl::StatusOr<std::unique_ptr<Servant>> StartBigServant(const test::Cluster& cluster,
                                                         Servant::Handler handler) {
  ConnectOptions servant_options;
  servant_options.local = true;
  auto servant = Servant::Create(cluster.ClientAddress(1), "big", servant_options);
  if (!servant.ok()) return servant.status();
  (*servant)->Serve("big", std::move(handler));
  if (absl::Status started = (*servant)->Start(); !started.ok()) return started;
  return servant;
}

// Servants of "big" on n1..n`members` (the local fast path) answering "big" with kFullReply
// bytes and then the payload; fewer than `members` if one did not start.
constexpr size_t kFullReply = (4 << 20) - 4096;  // near limits.max_payload_bytes (4 MiB)
std::vector<std::unique_ptr<Servant>> StartFullSizeServants(const test::Cluster& cluster,
                                                            int members) {
  std::vector<std::unique_ptr<Servant>> servants;
  for (int i = 1; i <= members; ++i) {
    ConnectOptions servant_options;
    servant_options.local = true;
    auto servant = Servant::Create(cluster.ClientAddress(i), "big", servant_options);
    if (!servant.ok()) break;
    (*servant)->Serve("big", [](const std::string& payload) -> absl::StatusOr<std::string> {
      return std::string(kFullReply, 'r') + payload;
    });
    if (!(*servant)->Start().ok()) break;
    servants.push_back(*std::move(servant));
  }
  return servants;
}

}  // namespace

TEST_CASE("a client that does not read its results is not read either; once it reads, every "
          "call is answered: gRPC and the local fast path",
          "[backpressure][e2e]") {
  const std::string path = GENERATE(std::string("grpc"), std::string("local"));
  INFO("path " << path);
  test::Cluster cluster(BigGroupOptions());
  REQUIRE(cluster.Start());
  // "big" answers its payload after 32 KiB of padding; the servant counts its calls.
  std::atomic<int> executed{0};
  auto servant =
      StartBigServant(cluster, [&](const std::string& payload) -> absl::StatusOr<std::string> {
        ++executed;
        return std::string(kResultBytes, 'r') + payload;
      });
  REQUIRE(servant.ok());

  test::RawClient raw =
      test::AttachRaw(test::SmallWindowChannel(cluster.ClientAddress(1)), "slow-reader");
  REQUIRE(raw.nso != 0);
  std::unique_ptr<Calls> opened = OpenCalls(path, raw);
  REQUIRE(opened != nullptr);
  Calls& calls = *opened;
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kCalls; ++i) {
      if (!calls.write(BigCall(raw.nso, i))) return;
      ++written;
    }
    calls.done_writing();
  });

  // Nothing read: the daemon stops reading calls at 512 outstanding (16 MiB of 32 KiB results),
  // so the servant's count stops well short of every call sent.
  int last = -1;
  int stable_for = 0;
  for (int i = 0; i < 200 && stable_for < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    const int now = executed.load();
    stable_for = now == last ? stable_for + 1 : 0;
    last = now;
  }
  INFO("executed " << executed.load() << ", written " << written.load());
  CHECK(stable_for >= 8);
  CHECK(executed.load() >= 16);
  // The bound the rules give (nso/api_service.h PauseReadingCalls): reading pauses at 512 calls
  // in flight (16 MiB at the mean result size) or 16 MiB of results waiting, so at most about
  // 512 + 512 calls are executed, and the daemon keeps at most 32 MiB for this client. Where
  // between 512 and 1,024 depends on how fast the servant runs while the calls are read: 600 at
  // most in sessions 50-52, 779 and 780 on this machine in session 53 (the code of session 52
  // too); 3,000 were sent.
  CHECK(executed.load() <= 1024 + 16);

  // Reading: every call is executed and answered with its whole result.
  std::vector<bool> answered(kCalls, false);
  int results = 0;
  api::PipelinedResult result;
  while (results < kCalls && calls.read(&result)) {
    INFO("call " << result.call() << ": " << result.error());
    REQUIRE(result.status_code() == 0);
    REQUIRE(result.call() < static_cast<uint64_t>(kCalls));
    REQUIRE(result.reply().replies_size() == 1);
    const std::string& payload = result.reply().replies(0).payload();
    REQUIRE(payload.size() > kResultBytes);
    CHECK(payload.substr(kResultBytes) == absl::StrCat(result.call()));
    CHECK_FALSE(answered[result.call()]);
    answered[result.call()] = true;
    ++results;
  }
  writer.join();
  CHECK(written.load() == kCalls);
  CHECK(results == kCalls);
  CHECK(executed.load() == kCalls);
  if (calls.stream) CHECK(calls.stream->Finish().ok());
  CHECK(test::MetricValue(test::HttpGet(cluster.MetricsPort(1), "/metrics"),
                          "cohort_clients_cut_off_total{path=\"" + path + "\"}") == 0);
  (*servant)->Stop();
}

TEST_CASE("a client with more than 64 MiB of results not read is cut off, and its daemon goes on "
          "serving: gRPC and the local fast path",
          "[backpressure][e2e]") {
  // The calls read before a pause can make more than the pause's 16 MiB of results (up to 1,024
  // calls, each up to max_payload_bytes per reply, when the client's earlier results were small):
  // here 50 calls with results of a few bytes, then 100 calls read while their servant is held,
  // answered with 1 MiB each. Until session 51 a gRPC stream kept them all until read (up to
  // 1,024 x 4 MiB x replies); the local fast path closed the link at 64 MiB.
  const std::string path = GENERATE(std::string("grpc"), std::string("local"));
  INFO("path " << path);
  test::Cluster cluster(BigGroupOptions());
  REQUIRE(cluster.Start());
  constexpr int kSmallCalls = 50;
  constexpr int kHeldCalls = 100;
  constexpr size_t kMiB = 1 << 20;
  absl::Notification release;
  std::atomic<int> small{0};
  std::atomic<int> executed{0};
  auto servant =
      StartBigServant(cluster, [&](const std::string& payload) -> absl::StatusOr<std::string> {
        if (payload == "small") {
          ++small;
          return payload;
        }
        release.WaitForNotificationWithTimeout(absl::Seconds(30));
        ++executed;
        return std::string(kMiB, 'r') + payload;
      });
  REQUIRE(servant.ok());

  test::RawClient raw =
      test::AttachRaw(test::SmallWindowChannel(cluster.ClientAddress(1)), "never-reads");
  REQUIRE(raw.nso != 0);
  std::unique_ptr<Calls> calls = OpenCalls(path, raw);
  REQUIRE(calls != nullptr);
  for (int i = 0; i < kSmallCalls; ++i) {
    api::PipelinedCall call = BigCall(raw.nso, i);
    call.mutable_invoke()->set_payload("small");
    REQUIRE(calls->write(call));
  }
  REQUIRE(test::Eventually([&] { return small.load() == kSmallCalls; }, 20));
  for (int i = kSmallCalls; i < kSmallCalls + kHeldCalls; ++i) {
    REQUIRE(calls->write(BigCall(raw.nso, i)));
  }
  // Their results so far are small, so nothing pauses the reading: the daemon reads the 100.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  release.Notify();
  // The servant answers every call; past 64 MiB not taken the client is cut off.
  for (int i = 0; i < 200 && executed.load() < kHeldCalls; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(executed.load() == kHeldCalls);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last answers reach n1
  // What the client reads now is what was on its way before: not all 150 results.
  int results = 0;
  api::PipelinedResult result;
  while (results < kSmallCalls + kHeldCalls && calls->read(&result)) {
    REQUIRE(result.status_code() == 0);
    ++results;
  }
  INFO("results read " << results);
  REQUIRE(results < kSmallCalls + kHeldCalls);
  if (calls->stream) {
    grpc::Status finished = calls->stream->Finish();
    CHECK(finished.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
    CHECK(finished.error_message().find("does not read its results") != std::string::npos);
  }
  // Counted, by path (the first case's reading client never was).
  const std::string metrics = test::HttpGet(cluster.MetricsPort(1), "/metrics");
  CHECK(test::MetricValue(metrics, "cohort_clients_cut_off_total{path=\"" + path + "\"}") == 1);
  const std::string other = path == "grpc" ? "local" : "grpc";
  CHECK(test::MetricValue(metrics, "cohort_clients_cut_off_total{path=\"" + other + "\"}") == 0);
  // The daemon goes on: another client is answered.
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  auto answered = (*client)->Invoke("big", "big", "after", Mode::kFirst, absl::Seconds(10));
  REQUIRE(answered.ok());
  REQUIRE(answered->replies.size() == 1);
  CHECK(answered->replies[0].payload.size() == kMiB + 5);
  (*servant)->Stop();
}

TEST_CASE("a client that reads is not cut off for a burst of large results, and a result may "
          "hold a full-size reply from each member: gRPC and the local fast path",
          "[backpressure][e2e]") {
  // 16 wait-for-all calls at once (the slow start's), each answered by 3 members with 4 MiB:
  // 192 MiB of results. Until session 52 the local fast path closed the link at 64 MiB not yet
  // taken however fast the client read, and over gRPC every such result failed ("Sent message
  // larger than max (12570686 vs. 9437184)": the daemon's send bound).
  const bool local = GENERATE(true, false);
  INFO((local ? "local fast path" : "gRPC"));
  test::ClusterOptions options;
  options.size = 3;
  options.groups_yaml = "groups:\n  - {name: big, members: [n1, n2, n3]}\n";
  options.metrics = true;
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Servant>> servants = StartFullSizeServants(cluster, 3);
  REQUIRE(servants.size() == 3);
  ConnectOptions client_options;
  client_options.local = local;
  client_options.client_name = "reader";
  auto client = Client::Connect(cluster.ClientAddress(1), client_options);
  REQUIRE(client.ok());
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<absl::StatusOr<GroupReplies>>> futures;
    for (int i = 0; i < 16; ++i) {
      futures.push_back((*client)->InvokeFuture("big", "big", absl::StrCat(10 + i), Mode::kAll,
                                                absl::Seconds(60)));
    }
    for (auto& future : futures) {
      auto result = future.get();
      INFO(result.status() << (result.ok() ? std::string() : cluster.LogTails(10)));
      REQUIRE(result.ok());
      REQUIRE(result->replies.size() == 3);
      for (const auto& reply : result->replies) CHECK(reply.payload.size() == kFullReply + 2);
    }
  }
  const std::string metrics = test::HttpGet(cluster.MetricsPort(1), "/metrics");
  CHECK((*client)->via() == std::string(local ? "local" : "grpc"));
  CHECK(test::MetricValue(metrics, "cohort_clients_cut_off_total{path=\"local\"}") == 0);
  CHECK(test::MetricValue(metrics, "cohort_clients_cut_off_total{path=\"grpc\"}") == 0);
  for (auto& servant : servants) servant->Stop();
}

TEST_CASE("an open group's wait-for-all replies of full size reach a caller outside the group, "
          "over either peer transport",
          "[e2e]") {
  // The request manager sends the caller's node every reply in one message (12 MiB here): the
  // gRPC peer transport refused it until session 52 (its server read at most 9 MiB).
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport " << transport);
  test::ClusterOptions options;
  options.size = 4;
  options.groups_yaml = "groups:\n  - {name: big, members: [n1, n2, n3], style: open}\n";
  options.extra_yaml = "peer_transport: " + transport + "\n";
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Servant>> servants = StartFullSizeServants(cluster, 3);
  REQUIRE(servants.size() == 3);
  auto client = Client::Connect(cluster.ClientAddress(4), "outside");
  REQUIRE(client.ok());
  for (int i = 0; i < 4; ++i) {
    auto result = (*client)->Invoke("big", "big", absl::StrCat(10 + i), Mode::kAll,
                                    absl::Seconds(30), Style::kOpen);
    INFO(result.status() << (result.ok() ? std::string() : cluster.LogTails(10)));
    REQUIRE(result.ok());
    REQUIRE(result->replies.size() == 3);
    for (const auto& reply : result->replies) {
      CHECK(reply.payload == std::string(kFullReply, 'r') + absl::StrCat(10 + i));
    }
  }
  for (auto& servant : servants) servant->Stop();
}

}  // namespace cohort
