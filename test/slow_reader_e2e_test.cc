// A client that pipelines calls and does not read their results is not read either, on a gRPC
// InvokeStream (what another language's client does) and on the local fast path: with 1,024 calls
// outstanding or 16 MiB of results waiting, its daemon reads no more of its calls until both are
// down to half (nso/api_pipeline.cc, nso/local_api.cc), so the calls wait in the client's stream,
// not as results in the daemon's memory. Once it reads, every call is executed and answered, in
// full. Before session 50 the daemon read and executed every call at once and kept all their
// results (here 94 MiB) until the client read them, or, on the local fast path, disconnected the
// client at 64 MiB unread (the 1,024 calls read before the pause make 32 MiB of results here).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
};

}  // namespace

TEST_CASE("a client that does not read its results is not read either; once it reads, every "
          "call is answered: gRPC and the local fast path",
          "[backpressure][e2e]") {
  const std::string path = GENERATE(std::string("grpc"), std::string("local"));
  INFO("path " << path);
  test::ClusterOptions options;
  options.size = 1;
  options.groups_yaml = "groups:\n  - {name: big, members: [n1]}\n";
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  // "big" answers its payload after 32 KiB of padding; the servant counts its calls.
  std::atomic<int> executed{0};
  ConnectOptions servant_options;
  servant_options.local = true;
  auto servant = Servant::Create(cluster.ClientAddress(1), "big", servant_options);
  REQUIRE(servant.ok());
  (*servant)->Serve("big", [&](const std::string& payload) -> absl::StatusOr<std::string> {
    ++executed;
    return std::string(kResultBytes, 'r') + payload;
  });
  REQUIRE((*servant)->Start().ok());

  test::RawClient raw =
      test::AttachRaw(test::SmallWindowChannel(cluster.ClientAddress(1)), "slow-reader");
  REQUIRE(raw.nso != 0);
  Calls calls;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<api::PipelinedCall, api::PipelinedResult>> stream;
  std::unique_ptr<internal::LocalLink> link;
  if (path == "grpc") {
    stream = raw.stub->InvokeStream(&context);
    calls.write = [&](const api::PipelinedCall& call) { return stream->Write(call); };
    calls.read = [&](api::PipelinedResult* result) { return stream->Read(result); };
    calls.done_writing = [&] { stream->WritesDone(); };
  } else {
    auto opened = internal::LocalLink::Open(
        internal::LocalEndpoint{raw.local_api, raw.local_key, "", ""}, absl::Seconds(5));
    REQUIRE(opened.ok());
    link = *std::move(opened);
    calls.write = [&](const api::PipelinedCall& call) {
      api::LocalFrame frame;
      *frame.mutable_call() = call;
      return link->Write(frame).ok();
    };
    calls.read = [&](api::PipelinedResult* result) {
      api::LocalFrame frame;
      if (!link->Read(&frame) || !frame.has_result()) return false;
      *result = std::move(*frame.mutable_result());
      return true;
    };
    calls.done_writing = [] {};
  }
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; i < kCalls; ++i) {
      api::PipelinedCall call;
      call.set_call(i);
      api::InvokeRequest* invoke = call.mutable_invoke();
      invoke->set_nso(raw.nso);
      invoke->set_group("big");
      invoke->set_method("big");
      invoke->set_payload(absl::StrCat(i));
      invoke->set_mode(api::WAIT_FIRST);
      invoke->set_deadline_ms(120000);
      if (!calls.write(call)) return;
      ++written;
    }
    calls.done_writing();
  });

  // Nothing read: the daemon stops reading calls at 1,024 outstanding, so the servant's count
  // stops well short of every call sent.
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
  CHECK(executed.load() <= 1100);

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
  if (stream) CHECK(stream->Finish().ok());
  (*servant)->Stop();
}

}  // namespace cohort
