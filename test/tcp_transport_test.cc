// The raw TCP peer transport (peer_transport: tcp, issue 7): two transports in this process, each
// served by its own protocol thread, over loopback.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nso/event_loop.h"
#include "nso/tcp_transport.h"
#include "test/tls_test_util.h"
#include "test/transport_test_util.h"
#include "tools/subprocess.h"

namespace cohort::nso {
namespace {

// One daemon's transport on its own protocol thread; records what it receives.
class Endpoint {
 public:
  Endpoint(NodeId self, int port, NodeId peer, int peer_port,
           std::shared_ptr<TlsContext> tls = nullptr, const std::string& server_name = "",
           std::function<void(TcpTransportOptions*)> tune = nullptr)
      : loop_(2, 1 << 16, [](uint64_t) {}) {
    TcpTransportOptions options;
    options.tls = std::move(tls);
    options.tls_server_name = server_name;
    options.self = self;
    options.cluster = "test";
    options.listen = "127.0.0.1:" + std::to_string(port);
    options.peer_addresses[peer] = "127.0.0.1:" + std::to_string(peer_port);
    if (tune) tune(&options);
    transport_ = std::make_unique<TcpTransport>(options, &loop_);
    listening_ = transport_->Listen();
    loop_.AddFlush([this] { transport_->Flush(); });
    log_ = std::make_unique<test::HeartbeatLog>(&loop_, transport_.get());
    loop_.Start();
    transport_->Start();
  }
  ~Endpoint() {
    loop_.Stop();
    transport_->Shutdown();
  }

  const absl::Status& listening() const { return listening_; }
  TcpTransport& transport() { return *transport_; }
  void SendHeartbeats(NodeId self, NodeId to, int first, int count, NodeId claimed_sender = 0,
                      size_t pad_bytes = 0) {
    log_->Send(self, to, first, count, claimed_sender, pad_bytes);
  }
  std::vector<uint64_t> Received() { return log_->Received(); }
  void SendConsensus(NodeId to, const wire::Envelope& envelope,
                     std::shared_ptr<const wire::MessageBatch> value, int copies, int heartbeat) {
    log_->SendConsensus(to, envelope, std::move(value), copies, heartbeat);
  }
  std::vector<std::string> ConsensusReceived() { return log_->ConsensusReceived(); }
  std::vector<std::string> LinkEvents() { return log_->LinkEvents(); }

 private:
  EventLoop loop_;
  std::unique_ptr<TcpTransport> transport_;
  std::unique_ptr<test::HeartbeatLog> log_;
  absl::Status listening_;
};

using test::BothConnected;
using test::CheckExchange;
using test::Eventually;
using test::Range;

using test::MakeCa;
using test::ReadText;
using test::Tls;

// Whether the other side closes the connection within `wait_ms` (what it sends first, a TLS
// alert, is read and dropped; a reset is a close with our bytes unread).
bool ClosedByPeer(int fd, int wait_ms) {
  timeval timeout{wait_ms / 1000, (wait_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buffer[256];
  while (true) {
    ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0) continue;
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }
}

// Connects to the port, writes `bytes`, and reports whether the other side closed the connection
// (within 5 s).
bool ClosedAfterWriting(int port, const std::string& bytes) {
  int fd = subprocess::ConnectLoopback(port);
  if (fd < 0) return false;
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  bool closed = ClosedByPeer(fd, 5000);
  close(fd);
  return closed;
}

std::string Framed(const wire::PeerFrame& frame) {
  std::string body = frame.SerializeAsString();
  uint32_t length = body.size();
  std::string out = {static_cast<char>(length & 0xff), static_cast<char>((length >> 8) & 0xff),
                     static_cast<char>((length >> 16) & 0xff),
                     static_cast<char>((length >> 24) & 0xff)};
  return out + body;
}

}  // namespace

TEST_CASE("tcp transport: both directions in order, bad input refused, reconnect after restart",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  auto one = std::make_unique<Endpoint>(1, port1, 2, port2);  // node 1 dials node 2
  auto two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(one->listening().ok());
  REQUIRE(two->listening().ok());
  REQUIRE(BothConnected(*one, *two));

  // Envelopes arrive once each, in the order sent, both ways (the dialer's and the acceptor's).
  CheckExchange(*one, *two, 1, 200);
  CHECK(one->transport().counters().envelopes_sent.load() == 200);

  // An envelope claiming another sender is dropped and counted.
  one->SendHeartbeats(1, 2, 1000, 1, /*claimed_sender=*/7);
  one->SendHeartbeats(1, 2, 201, 1);
  REQUIRE(Eventually([&] { return two->Received().size() >= 201; }));
  CHECK(two->Received().back() == 201);
  CHECK(two->transport().counters().envelopes_rejected.load() == 1);

  // Bad input on the peer port closes that connection only.
  CHECK(ClosedAfterWriting(port2, std::string("\xff\xff\xff\xff garbage", 12)));
  CHECK(ClosedAfterWriting(port2, std::string("\x05\x00\x00\x00\x01\x02\x03\x04\x05", 9)));
  wire::PeerFrame stranger;
  stranger.mutable_hello()->set_version(wire::VERSION_1);
  stranger.mutable_hello()->set_node(9);  // not a configured peer
  stranger.mutable_hello()->set_cluster("test");
  CHECK(ClosedAfterWriting(port2, Framed(stranger)));
  wire::PeerFrame other_cluster = stranger;
  other_cluster.mutable_hello()->set_node(1);
  other_cluster.mutable_hello()->set_cluster("elsewhere");
  CHECK(ClosedAfterWriting(port2, Framed(other_cluster)));
  one->SendHeartbeats(1, 2, 202, 1);
  REQUIRE(Eventually([&] { return two->Received().size() >= 202; }));
  CHECK(two->Received().back() == 202);

  // Node 2 restarts on the same port: node 1 notices, redials, and traffic flows again.
  two.reset();
  REQUIRE(Eventually([&] { return !one->transport().Connected(2); }));
  two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(two->listening().ok());
  REQUIRE(Eventually([&] { return one->transport().Connected(2); }));
  one->SendHeartbeats(1, 2, 300, 5);
  REQUIRE(Eventually([&] { return two->Received().size() >= 5; }));
  CHECK(two->Received() == Range(300, 5));
}

// Envelopes sent in one batch of protocol work go in frames of at most kFrameBytesTarget; while the
// peer has write_buffer_max bytes unread they wait, and none is dropped. (One frame of them all,
// 15 MiB here, was once dropped whole for exceeding the bound.)
TEST_CASE("tcp transport: a batch of large envelopes goes in several frames, none dropped",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  auto small_buffer = [](TcpTransportOptions* options) { options->write_buffer_max = 4 << 20; };
  Endpoint one(1, port1, 2, port2, nullptr, "", small_buffer);
  Endpoint two(2, port2, 1, port1, nullptr, "", small_buffer);
  REQUIRE(one.listening().ok());
  REQUIRE(two.listening().ok());
  REQUIRE(BothConnected(one, two));
  one.SendHeartbeats(1, 2, 1, 5, 0, /*pad_bytes=*/3 << 20);
  REQUIRE(Eventually([&] { return two.Received().size() >= 5; }));
  CHECK(two.Received() == Range(1, 5));
  CHECK(one.transport().counters().frames_sent.load() >= 5);  // 3 MiB + 3 MiB > 4 MiB: one each
  // Small ones still share a frame.
  const uint64_t frames = one.transport().counters().frames_sent.load();
  one.SendHeartbeats(1, 2, 6, 100);
  REQUIRE(Eventually([&] { return two.Received().size() >= 105; }));
  CHECK(two.Received() == Range(1, 105));
  CHECK(one.transport().counters().frames_sent.load() == frames + 1);
}

// A proposal's batch is held once for all peers (consensus::OutboxSend) and written into each
// envelope's bytes by the transport: the receiver reads the whole message.
TEST_CASE("tcp transport: a consensus value sent apart arrives inside its consensus message",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  Endpoint one(1, port1, 2, port2);
  Endpoint two(2, port2, 1, port1);
  REQUIRE(one.listening().ok());
  REQUIRE(two.listening().ok());
  REQUIRE(BothConnected(one, two));
  wire::Envelope envelope;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group("g");
  envelope.set_sender_node(1);
  envelope.set_receiver_incarnation(5);
  envelope.mutable_consensus()->set_instance(9);
  envelope.mutable_consensus()->set_round(1);
  envelope.mutable_consensus()->set_kind(wire::ConsensusMessage::PROPOSAL);
  auto value = std::make_shared<wire::MessageBatch>();
  for (uint32_t origin = 1; origin <= 2; ++origin) {
    auto* data = value->add_messages();
    data->set_origin(origin);
    data->set_seq(1);
    data->set_payload(std::string(200 * origin, 'v'));
  }
  wire::Envelope whole = envelope;
  *whole.mutable_consensus()->mutable_value() = *value;
  one.SendConsensus(2, envelope, value, /*copies=*/3, /*heartbeat=*/1);
  REQUIRE(Eventually([&] { return two.ConsensusReceived().size() >= 3; }));
  for (const std::string& received : two.ConsensusReceived()) {
    CHECK(received == whole.SerializeAsString());
  }
  REQUIRE(Eventually([&] { return two.Received().size() >= 3; }));
  CHECK(two.Received() == Range(1, 3));  // the envelopes around them are read as before
  CHECK(value->messages_size() == 2);    // the shared value is not consumed
}

// While a peer is unreachable its queue is bounded (link_queue_max envelopes, pending_bytes_max
// bytes): the oldest go first, and the peer gets the latest, in order, once it is there.
TEST_CASE("tcp transport: a full queue to an absent peer drops its oldest envelopes",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  {
    auto four = [](TcpTransportOptions* options) { options->link_queue_max = 4; };
    Endpoint one(1, port1, 2, port2, nullptr, "", four);  // node 2 is not started yet
    REQUIRE(one.listening().ok());
    one.SendHeartbeats(1, 2, 1, 10);
    Endpoint two(2, port2, 1, port1);
    REQUIRE(two.listening().ok());
    REQUIRE(Eventually([&] { return two.Received().size() >= 4; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // nothing more comes
    CHECK(two.Received() == Range(7, 4));
  }
  // By bytes: heartbeats padded to over 1,000 bytes each, at most 3,500 bytes queued.
  auto bytes = [](TcpTransportOptions* options) { options->pending_bytes_max = 3500; };
  Endpoint one(1, port1, 2, port2, nullptr, "", bytes);
  REQUIRE(one.listening().ok());
  one.SendHeartbeats(1, 2, 1, 10, 0, /*pad_bytes=*/1000);
  Endpoint two(2, port2, 1, port1);
  REQUIRE(two.listening().ok());
  REQUIRE(Eventually([&] { return two.Received().size() >= 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(two.Received() == Range(8, 3));
}

TEST_CASE("tcp transport: the link watcher hears at once that a peer's connection closed, and "
          "that it is back; a connection without a hello tells nothing", "[transport]") {
  test::CheckLinkEvents<Endpoint>([](int port2) {
    CHECK(ClosedAfterWriting(port2, std::string("\xff\xff\xff\xff garbage", 12)));
  });
}

TEST_CASE("tcp transport with mutual TLS: traffic both ways; another CA's certificate, a wrong "
          "name and a plaintext peer are refused",
          "[transport][tls]") {
  const std::string ca = MakeCa();
  std::shared_ptr<TlsContext> good = Tls(ca, "daemon");
  std::shared_ptr<TlsContext> rogue = Tls(ca, "rogue");

  SECTION("the cluster's certificates: connected, in order, batched, restart survived") {
    const int port1 = subprocess::FreePort();
    const int port2 = subprocess::FreePort();
    auto one = std::make_unique<Endpoint>(1, port1, 2, port2, good);
    auto two = std::make_unique<Endpoint>(2, port2, 1, port1, good);
    REQUIRE(BothConnected(*one, *two));
    CheckExchange(*one, *two, 1, 2000);
    // A plaintext peer's hello is not TLS: that connection is closed, the peers' goes on.
    wire::PeerFrame hello = HelloFrame(1, "test");
    CHECK(ClosedAfterWriting(port2, Framed(hello)));
    two.reset();
    // Writing to the dead peer's connection fails (EPIPE) without a SIGPIPE killing this process
    // (an application with an embedded node has not told the kernel to ignore SIGPIPE).
    for (int i = 0; i < 20; ++i) {
      one->SendHeartbeats(1, 2, 2001 + i, 50);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(Eventually([&] { return !one->transport().Connected(2); }));
    two = std::make_unique<Endpoint>(2, port2, 1, port1, good);
    REQUIRE(Eventually([&] { return one->transport().Connected(2); }));
    // What was sent while node 2 was away (not lost on the dead connection) comes first.
    one->SendHeartbeats(1, 2, 3000, 5);
    REQUIRE(Eventually([&] { return !two->Received().empty() && two->Received().back() == 3004; }));
    std::vector<uint64_t> after = two->Received();
    CHECK(std::vector<uint64_t>(after.end() - 5, after.end()) == Range(3000, 5));
  }
  SECTION("tls.server_name: the acceptor's certificate is checked against it") {
    const int port1 = subprocess::FreePort();
    const int port2 = subprocess::FreePort();
    Endpoint one(1, port1, 2, port2, good, "cohort");  // a DNS name in the certificate
    Endpoint two(2, port2, 1, port1, good);
    REQUIRE(BothConnected(one, two));
  }
  // Refusals: given 1.5 s, a pair on fresh ports never connects.
  auto refused = [](std::shared_ptr<TlsContext> tls1, const std::string& name1,
                    std::shared_ptr<TlsContext> tls2) {
    const int port1 = subprocess::FreePort();
    const int port2 = subprocess::FreePort();
    Endpoint one(1, port1, 2, port2, std::move(tls1), name1);
    Endpoint two(2, port2, 1, port1, std::move(tls2));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    one.SendHeartbeats(1, 2, 1, 1);
    two.SendHeartbeats(2, 1, 1, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return !one.transport().Connected(2) && !two.transport().Connected(1) &&
           one.Received().empty() && two.Received().empty();
  };
  SECTION("the acceptor's certificate is from another CA") { CHECK(refused(good, "", rogue)); }
  SECTION("the dialer's certificate is from another CA") { CHECK(refused(rogue, "", good)); }
  SECTION("the acceptor's certificate does not carry the name the dialer expects") {
    CHECK(refused(good, "elsewhere.example", good));
  }
  SECTION("the dialer's certificate is not for the node its hello names") {
    // Node 2 knows node 1 by 127.0.0.2: node 1's certificate (127.0.0.1, localhost, cohort) is
    // not for it, so node 1 could be another node of the cluster speaking as node 1.
    const int port1 = subprocess::FreePort();
    const int port2 = subprocess::FreePort();
    auto known_as = [port1](const std::string& name) {
      return [port1, name](TcpTransportOptions* options) {
        options->peer_addresses[1] = "127.0.0.2:" + std::to_string(port1);
        options->tls_server_name = name;
      };
    };
    {
      Endpoint one(1, port1, 2, port2, good);
      Endpoint two(2, port2, 1, port1, good, "", known_as(""));
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      CHECK_FALSE(one.transport().Connected(2));
      CHECK_FALSE(two.transport().Connected(1));
    }
    // With tls.server_name the certificates are checked against that name instead (every
    // node's carries it): accepted.
    Endpoint one(1, port1, 2, port2, good, "cohort");
    Endpoint two(2, port2, 1, port1, good, "cohort", known_as("cohort"));
    CHECK(BothConnected(one, two));
  }
  SECTION("the acceptor in plaintext") { CHECK(refused(good, "", nullptr)); }
  SECTION("the dialer in plaintext") { CHECK(refused(nullptr, "", good)); }
}

TEST_CASE("TLS context: a broken CA, certificate or key is named", "[transport][tls]") {
  const std::string ca = MakeCa();
  const std::string ca_pem = ReadText(ca + "/ca.pem");
  const std::string cert = ReadText(ca + "/daemon.pem");
  const std::string key = ReadText(ca + "/daemon.key");
  CHECK(TlsContext::Create(ca_pem, cert, key).ok());
  auto no_ca = TlsContext::Create("not a certificate", cert, key);
  REQUIRE_FALSE(no_ca.ok());
  CHECK(std::string(no_ca.status().message()).find("tls.ca_file") != std::string::npos);
  auto bad_cert = TlsContext::Create(ca_pem, "-----BEGIN CERTIFICATE-----\nxx\n", key);
  REQUIRE_FALSE(bad_cert.ok());
  CHECK(std::string(bad_cert.status().message()).find("tls.cert_file") != std::string::npos);
  auto other_key = TlsContext::Create(ca_pem, cert, ReadText(ca + "/rogue.key"));
  REQUIRE_FALSE(other_key.ok());
  CHECK(std::string(other_key.status().message()).find("tls.key_file") != std::string::npos);
}

TEST_CASE("tcp transport: a connection that never says hello is closed; a flood of TLS "
          "connections is cut to the allowed rate, and the peers still connect",
          "[transport][tls]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  SECTION("silent inbound connection") {
    Endpoint two(2, port2, 1, port1, nullptr, "",
                 [](TcpTransportOptions* options) { options->hello_timeout_ms = 300; });
    int fd = subprocess::ConnectLoopback(port2);
    REQUIRE(fd >= 0);
    CHECK_FALSE(ClosedByPeer(fd, 200));  // still open before the timeout
    CHECK(ClosedByPeer(fd, 3000));       // closed by the sweep after it
    close(fd);
  }
  SECTION("TLS accepts over the rate") {
    const std::string ca = MakeCa();
    std::shared_ptr<TlsContext> good = Tls(ca, "daemon");
    auto slow = [](TcpTransportOptions* options) { options->tls_accepts_per_second = 5; };
    Endpoint two(2, port2, 1, port1, good, "", slow);
    std::vector<int> fds;
    for (int i = 0; i < 30; ++i) fds.push_back(subprocess::ConnectLoopback(port2));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int closed = 0;
    for (int fd : fds) {
      REQUIRE(fd >= 0);
      if (ClosedByPeer(fd, 50)) ++closed;  // refused; the others wait for a ClientHello
    }
    CHECK(closed >= 20);  // a burst of 5, and 5 a second after it
    CHECK(closed <= 27);
    for (int fd : fds) close(fd);
    // The real peer gets in once tokens are back (it redials with backoff).
    Endpoint one(1, port1, 2, port2, good, "", slow);
    REQUIRE(BothConnected(one, two));
    CheckExchange(one, two, 1, 20);
  }
}

TEST_CASE("tcp transport: a dial whose SYNs go unanswered is abandoned and redialed, so the peer "
          "is reached soon after it answers again",
          "[transport]") {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  // "Node 2": a listener that does not accept yet, its accept queue full, so the kernel drops
  // further SYNs to it, as a host behind a cut does.
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port2);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(listen(listener, 0) == 0);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Endpoint one(1, port1, 2, port2, nullptr, "",
               [](TcpTransportOptions* options) { options->connect_timeout_ms = 300; });
  // 8 s of silence: the kernel alone would send its next SYN 15 s after the first.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  CHECK_FALSE(one.transport().Connected(2));
  // Node 2 answers again: it accepts and says hello to every connection that says hello.
  for (int fd : fillers) close(fd);
  auto healed = std::chrono::steady_clock::now();
  bool connected = false;
  while (!connected && std::chrono::steady_clock::now() - healed < std::chrono::seconds(3)) {
    int fd = accept4(listener, nullptr, nullptr, 0);
    if (fd >= 0) {
      timeval timeout{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
      char buffer[256];
      if (recv(fd, buffer, sizeof(buffer), 0) > 0) {  // its hello
        std::string hello = Framed(HelloFrame(2, "test"));
        send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
        connected = Eventually([&] { return one.transport().Connected(2); });
      }
      if (!connected) close(fd);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  CHECK(connected);
  CHECK(std::chrono::steady_clock::now() - healed < std::chrono::seconds(3));
  close(listener);
}

}  // namespace cohort::nso
