// Calls over the gRPC InvokeStream (invocation/call_stream.h) against a fake daemon served in
// this process: a caller alone on the stream takes its own result (no hand-off from a reader
// thread), the helper thread takes them when several calls are pending, every result reaches its
// own caller whatever the order the daemon answers in, and a silent daemon or a stream the daemon
// ends fails the calls on it, none hangs, and the next call opens a new stream.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "invocation/call_stream.h"
#include "invocation/client.h"
#include "proto/api.grpc.pb.h"
#include "test/echo_request.h"

namespace cohort::internal {
namespace {

// The fake daemon's InvokeStream: answers each call with its payload, from member "m1", except
// payload "hold" (never answered), "close" (ends the stream) and "swap" (held until the next call
// is answered, then answered: results come back out of order).
class FakeDaemon final : public api::Cohort::Service {
 public:
  grpc::Status InvokeStream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<api::PipelinedResult, api::PipelinedCall>* stream) override {
    streams_++;
    api::PipelinedCall call;
    std::vector<api::PipelinedCall> swapped;
    while (stream->Read(&call)) {
      received_++;
      const std::string& payload = call.invoke().payload();
      if (payload == "hold") continue;
      if (payload == "close") return grpc::Status::OK;
      if (payload == "swap") {
        swapped.push_back(call);
        continue;
      }
      if (!stream->Write(ResultFor(call))) break;
      for (const api::PipelinedCall& held : swapped) stream->Write(ResultFor(held));
      swapped.clear();
    }
    (void)context;
    return grpc::Status::OK;
  }
  int streams() const { return streams_.load(); }
  int received() const { return received_.load(); }

 private:
  static api::PipelinedResult ResultFor(const api::PipelinedCall& call) {
    api::PipelinedResult result;
    result.set_call(call.call());
    api::ReplyFrom* reply = result.mutable_reply()->add_replies();
    reply->set_member("m1");
    reply->set_payload(call.invoke().payload());
    result.mutable_reply()->set_wanted(1);
    return result;
  }
  std::atomic<int> streams_{0};
  std::atomic<int> received_{0};
};

// Waits (up to 5 s) until the fake daemon has read `count` calls in all.
void AwaitReceived(const FakeDaemon& daemon, int count) {
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (daemon.received() < count && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
  REQUIRE(daemon.received() >= count);
}

struct Fixture {
  Fixture() {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&daemon);
    server = builder.BuildAndStart();
    REQUIRE(server != nullptr);
    REQUIRE(port > 0);
    channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                  grpc::InsecureChannelCredentials());
    stub = api::Cohort::NewStub(channel);
  }
  ~Fixture() {
    calls.reset();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  FakeDaemon daemon;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<api::Cohort::Stub> stub;
  std::unique_ptr<CallStream> calls;
};

std::string PayloadOf(const absl::StatusOr<GroupReplies>& got) {
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  REQUIRE(got->replies.size() == 1);
  return got->replies[0].payload;
}

}  // namespace

TEST_CASE("call stream: a lone caller takes its own result; the helper serves many callers",
          "[call_stream]") {
  Fixture f;
  f.calls = std::make_unique<CallStream>(f.stub.get(), "");
  for (int i = 0; i < 200; ++i) {
    const std::string payload = absl::StrCat("seq-", i);
    CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest(payload), absl::Seconds(5))) == payload);
  }
  ReadCounts counts = f.calls->results();
  CHECK(counts.by_callers == 200);  // no hand-off to another thread for a sequential caller
  CHECK(counts.by_helper == 0);

  // 16 callers x 50 calls at once: each gets its own payload back.
  constexpr int kThreads = 16;
  constexpr int kCalls = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string payload = absl::StrCat("t", t, "-", i);
        auto got = f.calls->Invoke(test::EchoRequest(payload), absl::Seconds(10));
        if (!got.ok() || got->replies.size() != 1 || got->replies[0].payload != payload) wrong++;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(wrong.load() == 0);
  counts = f.calls->results();
  CHECK(counts.by_callers + counts.by_helper == 200 + kThreads * kCalls);
  CHECK(counts.by_helper > 0);
  CHECK(f.daemon.streams() == 1);  // all of it on one stream
}

TEST_CASE("call stream: results that come out of order reach their own callers",
          "[call_stream]") {
  Fixture f;
  f.calls = std::make_unique<CallStream>(f.stub.get(), "");
  // "swap" is answered only after the call behind it: its caller (driving alone at first) gets
  // the other caller's result first and hands it over.
  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<GroupReplies> swapped;
    const int received = f.daemon.received();
    std::thread first([&] { swapped = f.calls->Invoke(test::EchoRequest("swap"), absl::Seconds(5)); });
    AwaitReceived(f.daemon, received + 1);
    const std::string other = absl::StrCat("after-", round);
    CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest(other), absl::Seconds(5))) == other);
    first.join();
    CHECK(PayloadOf(swapped) == "swap");
  }
  CHECK(f.daemon.streams() == 1);
}

TEST_CASE("call stream: a silent daemon fails the call by its wait; the next call opens a stream",
          "[call_stream]") {
  Fixture f;
  f.calls = std::make_unique<CallStream>(f.stub.get(), "");
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("before"), absl::Seconds(5))) == "before");

  // Alone (the caller drives): DEADLINE_EXCEEDED by its wait, not never.
  absl::Time start = absl::Now();
  auto held = f.calls->Invoke(test::EchoRequest("hold"), absl::Milliseconds(300));
  CHECK(held.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::Now() - start < absl::Seconds(3));
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("after"), absl::Seconds(5))) == "after");

  // With another call pending (the helper drives): the held call times out, and the stream it
  // resets fails the other call UNAVAILABLE if it is still waiting; none hangs.
  absl::StatusOr<GroupReplies> other_result;
  const int received = f.daemon.received();
  std::thread other([&] { other_result = f.calls->Invoke(test::EchoRequest("hold"), absl::Seconds(30)); });
  AwaitReceived(f.daemon, received + 1);
  start = absl::Now();
  held = f.calls->Invoke(test::EchoRequest("hold"), absl::Milliseconds(300));
  CHECK(held.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::Now() - start < absl::Seconds(3));
  other.join();
  CHECK(other_result.status().code() == absl::StatusCode::kUnavailable);
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("again"), absl::Seconds(5))) == "again");
  CHECK(f.daemon.streams() == 3);
}

TEST_CASE("call stream: a stream the daemon ends fails its calls at once", "[call_stream]") {
  Fixture f;
  f.calls = std::make_unique<CallStream>(f.stub.get(), "");
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("before"), absl::Seconds(5))) == "before");
  absl::StatusOr<GroupReplies> waiting;
  const int received = f.daemon.received();
  std::thread other([&] { waiting = f.calls->Invoke(test::EchoRequest("hold"), absl::Seconds(30)); });
  AwaitReceived(f.daemon, received + 1);
  const absl::Time start = absl::Now();
  auto closed = f.calls->Invoke(test::EchoRequest("close"), absl::Seconds(30));
  other.join();
  CHECK(absl::Now() - start < absl::Seconds(5));  // not the 30 s wait
  CHECK(closed.status().code() == absl::StatusCode::kUnavailable);
  CHECK(waiting.status().code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(closed.status().message()), Catch::Contains("closed by the daemon"));
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("after"), absl::Seconds(5))) == "after");
  CHECK(f.daemon.streams() == 2);
}

}  // namespace cohort::internal

namespace cohort::internal {

// Streams that the daemon ends again and again while many callers use them: each call gets its
// own result or UNAVAILABLE, and the broken streams are replaced one at a time (a cohort-bench
// failover run crashed when two callers replaced the same broken stream at once).
TEST_CASE("call stream: callers racing to replace broken streams", "[call_stream]") {
  Fixture f;
  f.calls = std::make_unique<CallStream>(f.stub.get(), "");
  constexpr int kThreads = 8;
  constexpr int kCalls = 60;
  std::atomic<int> ok{0};
  std::atomic<int> unavailable{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string payload = i % 7 == 3 ? "close" : absl::StrCat("t", t, "-", i);
        auto got = f.calls->Invoke(test::EchoRequest(payload), absl::Seconds(10));
        if (got.ok() && got->replies.size() == 1 && got->replies[0].payload == payload) {
          ok++;
        } else if (got.status().code() == absl::StatusCode::kUnavailable) {
          unavailable++;
        } else {
          wrong++;
        }
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(wrong.load() == 0);
  CHECK(ok.load() + unavailable.load() == kThreads * kCalls);
  CHECK(ok.load() > 0);
  CHECK(f.daemon.streams() > 10);  // the streams were replaced many times
  CHECK(PayloadOf(f.calls->Invoke(test::EchoRequest("last"), absl::Seconds(5))) == "last");

  // The daemon is gone: every stream breaks as soon as it is opened, and the callers race to
  // replace them (each call fails UNAVAILABLE, none hangs or crashes the process).
  f.server->Shutdown(std::chrono::system_clock::now());
  std::atomic<int> failed_fast{0};
  callers.clear();
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        auto got = f.calls->Invoke(test::EchoRequest("gone"), absl::Seconds(10));
        if (got.status().code() == absl::StatusCode::kUnavailable) failed_fast++;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(failed_fast.load() == kThreads * 100);
}

}  // namespace cohort::internal
