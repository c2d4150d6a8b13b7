#include "nso/daemon.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

constexpr uint32_t kTickMs = 2;
constexpr size_t kLoopQueueMax = 1 << 20;

std::unique_ptr<grpc::Server> StartServer(const std::string& address,
                                          std::vector<grpc::Service*> services,
                                          int max_message_bytes) {
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (bound_port == 0) return nullptr;
  return server;
}

}  // namespace

Daemon::Daemon(Config config) : config_(std::move(config)) {}

Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::Start() {
  GrpcTransportOptions options;
  options.self = config_.node_id;
  options.cluster = config_.cluster;
  for (const PeerConfig& peer : config_.peers) {
    if (peer.id != config_.node_id) options.peer_addresses[peer.id] = peer.address;
  }
  transport_ = std::make_unique<GrpcTransport>(options);
  node_ = std::make_unique<Node>(config_, transport_.get(), MonotonicNowMs());
  loop_ = std::make_unique<EventLoop>(kTickMs, kLoopQueueMax,
                                      [this](uint64_t now_ms) { node_->Tick(now_ms); });
  transport_->SetReceiver([this](NodeId from, wire::Envelope envelope) {
    loop_->Post([this, from, envelope = std::move(envelope)] { node_->Receive(from, envelope); });
  });
  api_ = std::make_unique<ApiService>(node_.get(), loop_.get());
  // Frames carry batches of payloads: allow the payload limit plus room for headers.
  int max_message_bytes = static_cast<int>(
      std::min<int64_t>(config_.limits.max_payload_bytes * 2 + (1 << 20), INT32_MAX));
  peer_server_ = StartServer(config_.listen_peer, {transport_.get()}, max_message_bytes);
  if (!peer_server_) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on listen.peer ", config_.listen_peer, " (address in use?)"));
  }
  client_server_ = StartServer(config_.listen_client, {api_.get()}, max_message_bytes);
  if (!client_server_) {
    peer_server_->Shutdown();
    return absl::UnavailableError(absl::StrCat("cannot listen on listen.client ",
                                               config_.listen_client, " (address in use?)"));
  }
  loop_->Start();
  transport_->Start();
  Log("daemon")->info("node {} (id {}) serving peers on {} and clients on {}", config_.node,
                      config_.node_id, config_.listen_peer, config_.listen_client);
  return absl::OkStatus();
}

void Daemon::Shutdown() {
  if (stopped_ || !loop_) return;
  stopped_ = true;
  Log("daemon")->info("node {} shutting down", config_.node);
  auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  // The protocol thread finishes its queue and stops; then the Node answers the calls still in
  // flight with CANCELLED, so the servers below have no handler left waiting for it.
  loop_->Stop();
  node_.reset();
  if (client_server_) client_server_->Shutdown(deadline);
  transport_->Shutdown();
  if (peer_server_) peer_server_->Shutdown(deadline);
}

}  // namespace cohort::nso
