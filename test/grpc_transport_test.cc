// The gRPC peer transport (peer_transport: grpc, the one TLS uses): two transports in this
// process, each with its own protocol thread and gRPC server, over loopback; and raw gRPC clients
// that speak to a transport's peer service the way a broken or foreign peer would.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "nso/event_loop.h"
#include "nso/grpc_transport.h"
#include "proto/wire.grpc.pb.h"
#include "test/transport_test_util.h"
#include "tools/subprocess.h"

namespace cohort::nso {
namespace {

using test::BothConnected;
using test::CheckExchange;
using test::Eventually;
using test::Range;

// One daemon's peer transport and peer server, as cohortd runs them.
class Endpoint {
 public:
  Endpoint(NodeId self, int port, NodeId peer, int peer_port) : loop_(2, 1 << 16, [](uint64_t) {}) {
    GrpcTransportOptions options;
    options.self = self;
    options.cluster = "test";
    options.peer_addresses[peer] = "127.0.0.1:" + std::to_string(peer_port);
    transport_ = std::make_unique<GrpcTransport>(options, &loop_);
    loop_.AddFlush([this] { transport_->Flush(); });
    log_ = std::make_unique<test::HeartbeatLog>(&loop_, transport_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials());
    builder.RegisterService(transport_.get());
    server_ = builder.BuildAndStart();
    loop_.Start();
    transport_->Start();
  }
  ~Endpoint() {  // in cohortd's order (Daemon::Shutdown)
    loop_.Stop();
    transport_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  }

  bool serving() const { return server_ != nullptr; }
  GrpcTransport& transport() { return *transport_; }
  void SendHeartbeats(NodeId self, NodeId to, int first, int count, NodeId claimed_sender = 0,
                      size_t pad_bytes = 0) {
    log_->Send(self, to, first, count, claimed_sender, pad_bytes);
  }
  std::vector<uint64_t> Received() { return log_->Received(); }
  std::vector<std::string> LinkEvents() { return log_->LinkEvents(); }

 private:
  EventLoop loop_;
  std::unique_ptr<GrpcTransport> transport_;
  std::unique_ptr<test::HeartbeatLog> log_;
  std::unique_ptr<grpc::Server> server_;  // destroyed before the transport it serves
};

// Nodes 1 and 2 on fresh ports, connected to each other.
struct ConnectedPair {
  ConnectedPair() { REQUIRE(test::BothConnected(one, two)); }
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  Endpoint one{1, port1, 2, port2};
  Endpoint two{2, port2, 1, port1};
};

wire::PeerFrame Hello(NodeId node, const std::string& cluster) { return HelloFrame(node, cluster); }

// A raw client: opens a peer stream to `port`, writes `first`, reads until the stream ends, and
// returns its status; `answered` says whether the transport answered with a hello.
grpc::Status Dial(int port, const wire::PeerFrame& first, bool* answered = nullptr) {
  auto stub = wire::Peer::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                      grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Exchange(&context);
  stream->Write(first);
  wire::PeerFrame answer;
  bool hello = false;
  while (stream->Read(&answer)) hello = hello || answer.has_hello();
  if (answered != nullptr) *answered = hello;
  return stream->Finish();
}

}  // namespace

TEST_CASE("grpc transport: both directions in order, batched, impostor envelopes dropped, "
          "reconnect after either side restarts",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  auto one = std::make_unique<Endpoint>(1, port1, 2, port2);  // node 1 dials node 2
  auto two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(one->serving());
  REQUIRE(two->serving());
  REQUIRE(BothConnected(*one, *two));

  // Envelopes arrive once each, in the order sent, both ways (the dialer's and the acceptor's).
  CheckExchange(*one, *two, 1, 200);
  CHECK(one->transport().counters().envelopes_sent.load() == 200);
  CHECK(one->transport().counters().bytes_sent.load() > 200 * 4);
  CHECK(two->transport().counters().envelopes_received.load() == 200);

  // An envelope claiming another sender is dropped and counted.
  one->SendHeartbeats(1, 2, 1000, 1, /*claimed_sender=*/7);
  one->SendHeartbeats(1, 2, 201, 1);
  REQUIRE(Eventually([&] { return two->Received().size() >= 201; }));
  CHECK(two->Received().back() == 201);
  CHECK(two->transport().counters().envelopes_rejected.load() == 1);

  // Node 2 (the acceptor) restarts on the same port: node 1 notices, redials, traffic flows.
  two.reset();
  REQUIRE(Eventually([&] { return !one->transport().Connected(2); }));
  two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(two->serving());
  REQUIRE(BothConnected(*one, *two));
  one->SendHeartbeats(1, 2, 300, 5);
  REQUIRE(Eventually([&] { return two->Received().size() >= 5; }));
  CHECK(two->Received() == Range(300, 5));

  // Node 1 (the dialer) restarts: node 2 sees its stream end and serves the new one.
  one.reset();
  REQUIRE(Eventually([&] { return !two->transport().Connected(1); }));
  one = std::make_unique<Endpoint>(1, port1, 2, port2);
  REQUIRE(BothConnected(*one, *two));
  two->SendHeartbeats(2, 1, 400, 5);
  REQUIRE(Eventually([&] { return one->Received().size() >= 5; }));
  CHECK(one->Received() == Range(400, 5));
}

// A backlog of large envelopes goes in frames of at most frame_bytes_max bytes (one envelope
// alone when larger), under the peer server's message size limit (gRPC's 4 MiB by default here):
// one frame of them all, 15 MiB, failed the stream, and they were lost.
TEST_CASE("grpc transport: a batch of large envelopes goes in several frames, none lost",
          "[transport]") {
  ConnectedPair pair;
  pair.one.SendHeartbeats(1, 2, 1, 5, 0, /*pad_bytes=*/3 << 20);
  pair.two.SendHeartbeats(2, 1, 1, 5, 0, /*pad_bytes=*/3 << 20);
  REQUIRE(Eventually([&] { return pair.two.Received().size() >= 5; }));
  REQUIRE(Eventually([&] { return pair.one.Received().size() >= 5; }));
  CHECK(pair.two.Received() == Range(1, 5));
  CHECK(pair.one.Received() == Range(1, 5));
  CHECK(pair.one.transport().counters().frames_sent.load() >= 5);
}

TEST_CASE("grpc transport: a stream without a proper hello is refused, naming why; the peers' "
          "stream goes on",
          "[transport]") {
  ConnectedPair pair;
  Endpoint& one = pair.one;
  Endpoint& two = pair.two;

  wire::PeerFrame not_hello;
  not_hello.mutable_frame();
  const int port1 = pair.port1;
  const int port2 = pair.port2;
  grpc::Status status = Dial(port2, not_hello);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message() == "first frame must be a hello");

  bool answered = true;
  status = Dial(port2, Hello(9, "test"), &answered);
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message() == "node 9 is not a configured peer");
  CHECK_FALSE(answered);

  status = Dial(port2, Hello(1, "elsewhere"));
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message() == "cluster \"elsewhere\" is not \"test\"");

  wire::PeerFrame future = Hello(1, "test");
  future.mutable_hello()->set_version(static_cast<wire::Version>(wire::VERSION_1 + 7));
  status = Dial(port2, future);
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message().find("unsupported wire version") == 0);

  status = Dial(port1, Hello(2, "test"));  // the higher id never dials
  CHECK(status.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(status.error_message() == "node 2 must not dial node 1 (the lower id dials)");

  // None of it disturbed the peers' own stream.
  CHECK(one.transport().Connected(2));
  CHECK(two.transport().Connected(1));
  CheckExchange(one, two, 1, 10);
}

TEST_CASE("grpc transport: the link watcher hears at once that a peer's stream ended, and that "
          "it is back", "[transport]") {
  test::CheckLinkEvents<Endpoint>();
}

TEST_CASE("grpc transport: what is sent while the peer is down arrives once it is up; a second "
          "stream from a peer supersedes the first",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  Endpoint one(1, port1, 2, port2);
  one.SendHeartbeats(1, 2, 1, 50);  // node 2 is not there yet: queued
  CHECK_FALSE(one.transport().Connected(2));
  Endpoint two(2, port2, 1, port1);
  REQUIRE(Eventually([&] { return two.Received().size() >= 50; }));
  CHECK(two.Received() == Range(1, 50));

  // A stream that says it is node 1 takes node 2's link over and the old one is cancelled (a
  // restarted peer's new stream must not wait for the old one to time out). Node 1's dialer then
  // sees its stream end and dials again, which supersedes the impostor in turn.
  bool answered = false;
  grpc::Status status = Dial(port2, Hello(1, "test"), &answered);
  CHECK(answered);
  CHECK(status.error_code() == grpc::StatusCode::CANCELLED);
  REQUIRE(BothConnected(one, two));
  // Node 2's traffic reaches node 1 again (sent until one arrives: the first may have gone to the
  // impostor just before it was superseded).
  int next = 100;
  REQUIRE(Eventually([&] {
    two.SendHeartbeats(2, 1, next++, 1);
    return !one.Received().empty();
  }));
}

TEST_CASE("grpc transport: 20,000 envelopes each way at once, in bursts, arrive once each, in "
          "order",
          "[transport]") {
  ConnectedPair pair;
  Endpoint& one = pair.one;
  Endpoint& two = pair.two;
  for (int burst = 0; burst < 200; ++burst) {
    one.SendHeartbeats(1, 2, 1 + burst * 100, 100);
    two.SendHeartbeats(2, 1, 1 + burst * 100, 100);
  }
  REQUIRE(Eventually([&] { return two.Received().size() >= 20000 && one.Received().size() >= 20000; }));
  CHECK(two.Received() == Range(1, 20000));
  CHECK(one.Received() == Range(1, 20000));
  CHECK(one.transport().counters().frames_sent.load() < 20000);
}

}  // namespace cohort::nso
