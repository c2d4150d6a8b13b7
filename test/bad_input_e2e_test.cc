// Bad input over real gRPC (issue 6): malformed and oversized messages, peers that are not
// configured or claim another node's id, messages for unknown groups, other versions and old
// views, a client that disconnects mid-call. Each gets a clear status or is dropped and logged;
// the daemon keeps serving and its state stays consistent.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "invocation/client.h"
#include "proto/api.grpc.pb.h"
#include "proto/wire.grpc.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(limits:
  max_payload_bytes: 1024
groups:
  - name: counter
    members: [n1, n2, n3]
)";

std::string ReadLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Opens a peer stream to `address` introducing itself as `node`; returns the final status after
// sending `frames`.
grpc::Status FakePeer(const std::string& address, uint32_t node,
                      const std::vector<wire::Envelope>& envelopes) {
  auto stub = wire::Peer::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub->Exchange(&context);
  wire::PeerFrame hello;
  hello.mutable_hello()->set_version(wire::VERSION_1);
  hello.mutable_hello()->set_node(node);
  hello.mutable_hello()->set_cluster("cohort");
  stream->Write(hello);
  wire::PeerFrame answer;
  if (!stream->Read(&answer)) return stream->Finish();  // refused: the daemon's status
  {
    wire::PeerFrame frame;
    for (const wire::Envelope& envelope : envelopes) *frame.mutable_frame()->add_envelopes() = envelope;
    stream->Write(frame);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  stream->WritesDone();
  context.TryCancel();
  return stream->Finish();
}

wire::Envelope Heartbeat(const std::string& group, uint32_t sender, uint64_t view) {
  wire::Envelope envelope;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(group);
  envelope.set_sender_node(sender);
  envelope.set_view_id(view);
  envelope.mutable_heartbeat()->set_sent_ms(1);
  return envelope;
}

}  // namespace

TEST_CASE("bad input over real gRPC: clear statuses, dropped and logged, the daemon serves on",
          "[e2e][bad-input]") {
  // The gRPC peer service is what this test feeds bad input (the raw TCP transport has its own
  // test, tcp_transport_test).
  test::Cluster cluster({3, kGroups, "peer_transport: grpc\n", "info"});
  REQUIRE(cluster.Start());
  auto started = test::StartCounterGroup(cluster, 3);
  REQUIRE(started.ok());
  auto& replicas = started->replicas;
  auto& client = started->client;

  SECTION("peers") {
    // Not a configured node.
    grpc::Status unknown = FakePeer(cluster.PeerAddress(3), 9, {});
    CHECK(unknown.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_THAT(unknown.error_message(), Catch::Contains("not a configured peer"));
    // A higher id may not dial a lower one.
    grpc::Status upward = FakePeer(cluster.PeerAddress(2), 3, {});
    CHECK(upward.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    // A stream introduced as n1 whose envelopes claim another sender, another version, an
    // unknown group, no body, or a view from the future.
    wire::Envelope wrong_sender = Heartbeat("counter", 2, 1);
    wire::Envelope wrong_version = Heartbeat("counter", 1, 1);
    wrong_version.set_version(static_cast<wire::Version>(7));
    wire::Envelope unknown_group = Heartbeat("nosuch", 1, 1);
    wire::Envelope empty = Heartbeat("counter", 1, 1);
    empty.clear_heartbeat();
    wire::Envelope future_view = Heartbeat("counter", 1, 99);
    FakePeer(cluster.PeerAddress(3), 1,
             {wrong_sender, wrong_version, unknown_group, empty, future_view});
    std::string log = ReadLog(cluster.LogPath(3));
    CHECK_THAT(log, Catch::Contains("claims to be node 2"));
    // An unknown group is noted at info at first (normal while daemons create a group one
    // after another), and warned of once it lasts 2 s.
    CHECK_THAT(log, Catch::Contains("unknown group \"nosuch\" dropped (1 in 0 ms; normal while"));
    CHECK_THAT(log, !Catch::Contains("is the group in this daemon's configuration?"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2100));
    FakePeer(cluster.PeerAddress(3), 1, {unknown_group});
    log = ReadLog(cluster.LogPath(3));
    CHECK_THAT(log, Catch::Contains("unknown group \"nosuch\" dropped (2 in "));
    CHECK_THAT(log, Catch::Contains("ms; is the group in this daemon's configuration?)"));
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (absl::StrContains(line, "nosuch")) {
        INFO(line);
        CHECK(absl::StrContains(line, " warning ") ==
              absl::StrContains(line, "is the group in this daemon's configuration?"));
      }
    }
  }

  SECTION("application API") {
    // Bytes that are not an InvokeRequest.
    auto channel = grpc::CreateChannel(cluster.ClientAddress(2), grpc::InsecureChannelCredentials());
    grpc::GenericStub generic(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Slice garbage(std::string("\x0a\xff\xff\xff\xff\x0f\x12", 7));
    grpc::ByteBuffer request(&garbage, 1);
    grpc::ByteBuffer response;
    grpc::Status status;
    bool done = false;
    std::mutex mu;
    std::condition_variable cv;
    generic.UnaryCall(&context, "/cohort.api.Cohort/Invoke", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = s;
                        done = true;
                        cv.notify_one();
                      });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return done; });
    }
    CHECK_FALSE(status.ok());
    // A method name, or a calling group's name, far longer than any (they travel outside
    // limits.max_payload_bytes): refused naming the bound (until session 52 ordered and sent to
    // every member, and the servants' UNIMPLEMENTED errors echoed the name back).
    auto long_method = (*client)->Invoke("counter", std::string(4096, 'm'), "1", Mode::kAll);
    CHECK(long_method.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(long_method.status().message()),
               Catch::Contains("method name of 4096 bytes is longer than 1024"));
    {
      auto stub = api::Cohort::NewStub(  // the client's daemon, which holds its NSO
          grpc::CreateChannel(cluster.ClientAddress(1), grpc::InsecureChannelCredentials()));
      grpc::ClientContext group_call;
      api::InvokeRequest invoke;
      invoke.set_nso((*client)->nso());
      invoke.set_group("counter");
      invoke.set_method("add");
      invoke.set_payload("1");
      invoke.set_mode(api::WAIT_ALL);
      invoke.set_caller_group(std::string(4096, 'g'));
      api::InvokeReply reply;
      grpc::Status refused = stub->Invoke(&group_call, invoke, &reply);
      CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK_THAT(refused.error_message(),
                 Catch::Contains("caller group name of 4096 bytes is longer than 1024"));
    }
    // A message far over the limits.
    auto oversized = (*client)->Invoke("counter", "add", std::string(3 << 20, '1'), Mode::kAll);
    CHECK((oversized.status().code() == absl::StatusCode::kResourceExhausted ||
           oversized.status().code() == absl::StatusCode::kInvalidArgument));
    // A client that gives up mid-call: the daemon finishes the call and serves on.
    for (auto& replica : replicas) replica->slow_ms = 500;
    auto stub = api::Cohort::NewStub(channel);
    grpc::ClientContext impatient;
    impatient.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    api::InvokeRequest invoke;
    invoke.set_nso((*client)->nso());  // an NSO of another daemon: answered NOT_FOUND or cut off
    invoke.set_group("counter");
    invoke.set_method("add");
    invoke.set_payload("1");
    invoke.set_mode(api::WAIT_ALL);
    invoke.set_deadline_ms(3000);
    api::InvokeReply reply;
    grpc::Status gave_up = stub->Invoke(&impatient, invoke, &reply);
    CHECK_FALSE(gave_up.ok());
    for (auto& replica : replicas) replica->slow_ms = 0;
  }

  // Whatever came before, the group serves and the replicas agree.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  auto get = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
  REQUIRE(get.ok());
  REQUIRE(get->replies.size() == 3);
  for (const Reply& reply : get->replies) CHECK(reply.payload == get->replies[0].payload);
}

}  // namespace cohort
