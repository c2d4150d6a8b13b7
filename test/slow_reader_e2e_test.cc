// A client that pipelines calls and does not read their results is not read either, on a gRPC
// InvokeStream (what another language's client does) and on the local fast path: with 1,024 calls
// outstanding, 16 MiB of results waiting, or as many calls outstanding as make 16 MiB at the
// mean size of its results so far (16 before its first result), its daemon reads no more of its
// calls until all are down to half (nso/api_service.h), so the calls wait in the client's stream,
// not as results in the daemon's memory. Once it reads, every call is executed and answered, in
// full. Before session 50 the daemon read and executed every call at once and kept all their
// results (here 94 MiB) until the client read them, or, on the local fast path, disconnected the
// client at 64 MiB unread; in session 50 it read 1,024 (32 MiB of results here), since session
// 51 about 512 (16 MiB at 32 KiB each). Past 64 MiB of results not taken a client is cut off.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
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
  CHECK(executed.load() <= 600);  // 1,024 in session 50

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

}  // namespace cohort
