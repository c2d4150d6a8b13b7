// Client pipelining (issue 7): every invocation of a cohort::Client travels on one InvokeStream to
// its daemon, many in flight at once, results matched by call number.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include <grpcpp/grpcpp.h>

#include "invocation/client.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
)";

// Starts the cluster and a counter replica on each of its three daemons (`local` false: the
// servants' streams go over gRPC).
void StartCounters(test::Cluster* cluster,
                   std::vector<std::unique_ptr<test::CounterReplica>>* replicas,
                   bool local = true) {
  REQUIRE(cluster->Start());
  for (int i = 1; i <= 3; ++i) {
    replicas->push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas->back()->Start(cluster->ClientAddress(i), "counter", local).ok());
    REQUIRE(std::string(replicas->back()->servant->via()) == (local ? "local" : "grpc"));
  }
}

}  // namespace

TEST_CASE("pipelining: many callers share one client; a broken stream fails its calls", "[e2e]") {
  // Both ways to the daemon: its local fast path (Unix socket), and gRPC (InvokeStream for the
  // client, Serve for the servants).
  ConnectOptions options;
  options.client_name = "pipelined";
  options.local = GENERATE(true, false);
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas, options.local);
  auto client = Client::Connect(cluster.ClientAddress(2), options);
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == (options.local ? "local" : "grpc"));
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));

  // 32 callers x 10 increments in flight together on the client's one stream: each gets its
  // own result (every value 1..320 exactly once from each replica: the results were not mixed up
  // between calls, and every replica executed the same order).
  constexpr int kThreads = 32;
  constexpr int kCalls = 10;
  absl::Mutex mu;
  std::map<std::string, std::multiset<std::string>> values;  // by member
  std::atomic<int> failures{0};
  std::string first_failure;
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto result = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
        if (!result.ok() || result->replies.size() != 3) {
          failures++;
          absl::MutexLock lock(&mu);
          if (first_failure.empty()) {
            first_failure = result.ok() ? absl::StrCat(result->replies.size(), " replies")
                                        : result.status().ToString();
          }
          continue;
        }
        absl::MutexLock lock(&mu);
        for (const Reply& reply : result->replies) values[reply.member].insert(reply.payload);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  INFO("first failure: " << first_failure);
  INFO((failures.load() == 0 ? "" : cluster.LogTails(40)));
  REQUIRE(failures.load() == 0);
  std::multiset<std::string> expected;
  for (int v = 1; v <= kThreads * kCalls; ++v) expected.insert(std::to_string(v));
  REQUIRE(values.size() == 3);
  for (const auto& [member, seen] : values) {
    INFO("member " << member);
    CHECK(seen == expected);
  }

  // The client's daemon dies: the call on the stream fails UNAVAILABLE, it does not wait out its
  // deadline; once the daemon is back, the next call opens a new stream, learns that its NSO is
  // gone with the old daemon, attaches again and is sent again (answered by n1's and n3's
  // replicas: n2's died with its daemon).
  const uint64_t old_nso = (*client)->nso();
  cluster.Kill(2);
  auto broken = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(30));
  REQUIRE_FALSE(broken.ok());
  CHECK(broken.status().code() == absl::StatusCode::kUnavailable);
  REQUIRE(cluster.StartNode(2));
  absl::Status last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto again = (*client)->Invoke("counter", "get", "", Mode::kFirst, absl::Seconds(2));
    last = again.status();
    if (last.code() != absl::StatusCode::kUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(last.ok());
  CHECK((*client)->nso() != old_nso);  // attached again: a new daemon answered
  replicas.clear();
}

}  // namespace cohort

namespace cohort {

TEST_CASE("pipelining: a frozen daemon cannot hold a caller; the stream starts afresh after it",
          "[e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  // Both ways to the daemon: its local fast path (Unix socket) and the gRPC InvokeStream.
  ConnectOptions options;
  options.client_name = "frozen-daemon";
  options.local = GENERATE(true, false);
  auto client = Client::Connect(cluster.ClientAddress(2), options);
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == (options.local ? "local" : "grpc"));
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));
  REQUIRE((*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(5)).ok());

  // The client's own daemon stops (SIGSTOP): nothing answers, not even the deadline. The call
  // ends by its deadline plus the stub's 2 s of slack, not never.
  cluster.Pause(2);
  auto frozen = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Milliseconds(200));
  REQUIRE_FALSE(frozen.ok());
  CHECK(frozen.status().code() == absl::StatusCode::kDeadlineExceeded);
  cluster.Resume(2);
  // The stream was reset; the next calls go on a new one, to the same NSO.
  absl::Status last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto again = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(2));
    last = again.status();
    if (last.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(last.ok());
  replicas.clear();
}

}  // namespace cohort

namespace cohort {

// The daemon's side of InvokeStream, driven by a raw gRPC client (as a client in another
// language would): results still due when the client closes its side are all written before the
// stream ends; a client that cancels with calls in flight leaves the daemon serving.
TEST_CASE("pipelining: the daemon writes every result due after the client's side closes",
          "[e2e]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  auto channel = grpc::CreateChannel(cluster.ClientAddress(2), grpc::InsecureChannelCredentials());
  auto stub = api::Cohort::NewStub(channel);
  uint64_t nso = 0;
  {
    grpc::ClientContext context;
    api::AttachRequest request;
    request.set_client_name("raw-stream");
    api::AttachReply reply;
    REQUIRE(stub->Attach(&context, request, &reply).ok());
    nso = reply.nso();
  }
  {
    auto client = Client::Connect(cluster.ClientAddress(2), "health");
    REQUIRE(client.ok());
    REQUIRE(test::WaitHealthy(client->get(), "counter"));
  }
  auto call = [nso](uint64_t id, const std::string& method, const std::string& payload) {
    api::PipelinedCall out;
    out.set_call(id);
    api::InvokeRequest* invoke = out.mutable_invoke();
    invoke->set_nso(nso);
    invoke->set_group("counter");
    invoke->set_method(method);
    invoke->set_payload(payload);
    invoke->set_mode(api::WAIT_ALL);
    invoke->set_deadline_ms(10000);
    return out;
  };

  // 40 calls (and one for an unknown group) written in one burst, then the client's side closes
  // at once: every one gets its own result, and the stream ends OK.
  constexpr uint64_t kCalls = 40;
  {
    grpc::ClientContext context;
    auto stream = stub->InvokeStream(&context);
    for (uint64_t id = 1; id <= kCalls; ++id) REQUIRE(stream->Write(call(id, "add", "1")));
    api::PipelinedCall unknown = call(kCalls + 1, "add", "1");
    unknown.mutable_invoke()->set_group("no-such-group");
    REQUIRE(stream->Write(unknown));
    REQUIRE(stream->WritesDone());
    std::set<uint64_t> ok_calls;
    std::set<std::string> values;
    api::PipelinedResult result;
    int unknown_code = -1;
    while (stream->Read(&result)) {
      if (result.call() == kCalls + 1) {
        unknown_code = result.status_code();
        CHECK_THAT(result.error(), Catch::Contains("no-such-group"));
        continue;
      }
      INFO("call " << result.call() << ": " << result.error());
      REQUIRE(result.status_code() == 0);
      REQUIRE(result.reply().replies_size() == 3);
      ok_calls.insert(result.call());
      values.insert(result.reply().replies(0).payload());
    }
    CHECK(stream->Finish().ok());
    CHECK(ok_calls.size() == kCalls);
    CHECK(values.size() == kCalls);  // each call its own increment: 1..40
    CHECK(unknown_code == static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }

  // A client that cancels its stream with calls in flight: the daemon drops their results and
  // goes on serving (the calls themselves still execute: they were ordered).
  for (int round = 0; round < 5; ++round) {
    grpc::ClientContext context;
    auto stream = stub->InvokeStream(&context);
    for (uint64_t id = 1; id <= 20; ++id) stream->Write(call(id, "add", "1"));
    context.TryCancel();
    stream->Finish();
  }
  auto client = Client::Connect(cluster.ClientAddress(2), "after-cancel");
  REQUIRE(client.ok());
  absl::StatusOr<GroupReplies> after;
  for (int attempt = 0; attempt < 50; ++attempt) {
    after = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    if (after.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(after.ok());
  REQUIRE(after->replies.size() == 3);
  const int64_t value = std::stoll(after->replies[0].payload);
  CHECK(value >= static_cast<int64_t>(kCalls));
  CHECK(value <= static_cast<int64_t>(kCalls) + 5 * 20);
  for (const Reply& reply : after->replies) CHECK(reply.payload == after->replies[0].payload);
  replicas.clear();
}

}  // namespace cohort

namespace cohort {

// The daemon's side of Serve (a servant's stream over gRPC, as a servant in another language
// uses), driven by a raw gRPC client: registration errors are named; a registered servant gets
// its acknowledgement first, then deliveries, and its answers reach the caller; a servant that
// goes away is unregistered, and the daemon goes on serving.
TEST_CASE("servant stream over gRPC: errors named, deliveries answered, a leaving servant is "
          "unregistered",
          "[e2e]") {
  constexpr char kSolo[] = R"(groups:
  - name: solo
    members: [n2]
    ordering: consensus
)";
  test::Cluster cluster{{3, kSolo, "", "warn"}};
  REQUIRE(cluster.Start());
  auto channel = grpc::CreateChannel(cluster.ClientAddress(2), grpc::InsecureChannelCredentials());
  auto stub = api::Cohort::NewStub(channel);
  auto attach = [&stub]() {
    grpc::ClientContext context;
    api::AttachRequest request;
    request.set_client_name("raw-servant");
    api::AttachReply reply;
    REQUIRE(stub->Attach(&context, request, &reply).ok());
    return reply.nso();
  };
  auto registration = [](uint64_t nso, const std::string& group) {
    api::ServantMessage message;
    message.mutable_register_()->set_nso(nso);
    message.mutable_register_()->set_group(group);
    return message;
  };

  {  // the first message is not a register
    grpc::ClientContext context;
    auto stream = stub->Serve(&context);
    api::ServantMessage answer;
    answer.mutable_answer()->set_delivery(1);
    REQUIRE(stream->Write(answer));
    api::ServantEvent event;
    CHECK_FALSE(stream->Read(&event));
    grpc::Status status = stream->Finish();
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("must be a register"));
  }
  {  // a group this daemon does not know
    grpc::ClientContext context;
    auto stream = stub->Serve(&context);
    REQUIRE(stream->Write(registration(attach(), "no-such-group")));
    api::ServantEvent event;
    CHECK_FALSE(stream->Read(&event));
    grpc::Status status = stream->Finish();
    CHECK(status.error_code() == grpc::StatusCode::NOT_FOUND);
    CHECK_THAT(status.error_message(), Catch::Contains("no-such-group"));
  }
  {  // the servant closes its side without a word
    grpc::ClientContext context;
    auto stream = stub->Serve(&context);
    REQUIRE(stream->WritesDone());
    api::ServantEvent event;
    CHECK_FALSE(stream->Read(&event));
    CHECK(stream->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }

  auto client = Client::Connect(cluster.ClientAddress(1), "caller");
  REQUIRE(client.ok());
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    grpc::ClientContext context;
    auto stream = stub->Serve(&context);
    REQUIRE(stream->Write(registration(attach(), "solo")));
    api::ServantEvent event;
    REQUIRE(stream->Read(&event));
    CHECK(event.registered());  // the acknowledgement comes first
    CHECK(event.group() == "solo");
    // The servant answers each call with "echo:" and its payload, in another thread.
    std::thread answering([&stream] {
      api::ServantEvent delivery;
      while (stream->Read(&delivery)) {
        if (delivery.method().empty() || delivery.one_way()) continue;
        api::ServantMessage answer;
        answer.mutable_answer()->set_delivery(delivery.delivery());
        answer.mutable_answer()->set_payload("echo:" + delivery.payload());
        if (!stream->Write(answer)) break;
      }
    });
    for (int i = 0; i < 20; ++i) {
      const std::string payload = absl::StrCat("r", round, "-", i);
      absl::StatusOr<GroupReplies> got;
      for (int attempt = 0; attempt < 100; ++attempt) {  // until the group's view has formed
        got = (*client)->Invoke("solo", "echo", payload, Mode::kFirst, absl::Seconds(5));
        if (got.ok() && !got->replies.empty() && got->replies[0].status.ok()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      INFO(got.status().ToString());
      REQUIRE(got.ok());
      REQUIRE(got->replies.size() == 1);
      CHECK(got->replies[0].payload == "echo:" + payload);
    }
    // The servant goes away; the next round registers a new one at the same daemon (the old
    // registration is gone, or this one would get no deliveries).
    context.TryCancel();
    answering.join();
    stream->Finish();
  }
}

}  // namespace cohort
