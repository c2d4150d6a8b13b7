#include "nso/grpc_transport.h"

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

#include "nso/keepalive.h"
#include "nso/logging.h"
#include "nso/peer_names.h"

namespace cohort::nso {
namespace {

constexpr size_t kFrameMaxEnvelopes = 4096;

}  // namespace

GrpcTransport::GrpcTransport(GrpcTransportOptions options, EventLoop* loop)
    : options_(std::move(options)),
      loop_(loop),
      hello_(HelloFrame(options_.self, options_.cluster)) {
  absl::MutexLock lock(&mu_);
  addresses_ = options_.peer_addresses;
  for (const auto& [peer, address] : options_.peer_addresses) {
    links_[peer] =
        std::make_unique<PeerLink>(peer, options_.link_queue_max, kFrameMaxEnvelopes,
                                   options_.frame_bytes_max, &counters_);
  }
}

GrpcTransport::~GrpcTransport() { Shutdown(); }

void GrpcTransport::Start() {
  for (const auto& [peer, address] : options_.peer_addresses) {
    if (peer > options_.self) StartDialer(peer);
  }
}

void GrpcTransport::StartDialer(NodeId peer) {
  absl::MutexLock lock(&mu_);
  // (Removed and added again before its dialer noticed: that dialer goes on with the new link.)
  if (stopping_ || !dialing_.insert(peer).second) return;
  dialers_.emplace_back([this, peer] { DialLoop(peer); });
}

void GrpcTransport::Shutdown() {
  if (stopping_.exchange(true)) return;
  std::vector<std::thread> dialers;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [peer, context] : dial_contexts_) context->TryCancel();
    dialers = std::move(dialers_);
  }
  {
    absl::ReaderMutexLock lock(&links_mu_);
    for (auto& [peer, link] : links_) link->DetachAll();
  }
  for (std::thread& dialer : dialers) dialer.join();
}

std::string GrpcTransport::AddressOf(NodeId peer) const {
  absl::MutexLock lock(&mu_);
  auto it = addresses_.find(peer);
  return it == addresses_.end() ? "" : it->second;
}

void GrpcTransport::CancelStreams(NodeId peer) {
  absl::MutexLock lock(&mu_);
  if (auto dial = dial_contexts_.find(peer); dial != dial_contexts_.end()) dial->second->TryCancel();
  if (auto in = inbound_.find(peer); in != inbound_.end()) in->second->TryCancel();
}

void GrpcTransport::SetPeers(const std::map<NodeId, std::string>& peers) {
  std::vector<NodeId> removed, moved, added;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [peer, address] : addresses_) {
      if (!peers.count(peer)) removed.push_back(peer);
    }
    for (const auto& [peer, address] : peers) {
      if (peer == options_.self) continue;
      auto it = addresses_.find(peer);
      if (it == addresses_.end()) {
        added.push_back(peer);
      } else if (it->second != address) {
        moved.push_back(peer);
      }
    }
    addresses_ = peers;
    addresses_.erase(options_.self);
  }
  for (NodeId peer : removed) {
    std::unique_ptr<PeerLink> link;
    {
      absl::MutexLock lock(&links_mu_);
      auto it = links_.find(peer);
      if (it == links_.end()) continue;
      link = std::move(it->second);
      links_.erase(it);
    }
    link->DetachAll();
    retired_links_.push_back(std::move(link));
    CancelStreams(peer);  // its dialer, if any, sees no address and ends
    Log("peer")->info("node {} removed from the peers", peer);
  }
  for (NodeId peer : moved) {
    CancelStreams(peer);  // the dialer redials at the new address
    Log("peer")->info("node {} moves to {}", peer, peers.at(peer));
  }
  for (NodeId peer : added) {
    {
      absl::MutexLock lock(&links_mu_);
      links_[peer] = std::make_unique<PeerLink>(peer, options_.link_queue_max, kFrameMaxEnvelopes,
                                                options_.frame_bytes_max, &counters_);
    }
    if (peer > options_.self) StartDialer(peer);
    Log("peer")->info("node {} added to the peers at {}", peer, peers.at(peer));
  }
}

void GrpcTransport::Send(NodeId to, const wire::Envelope& envelope) {
  auto it = links_.find(to);
  if (it == links_.end()) {
    // (A peer removed by a reload while still in a group's view: once per 10000.)
    if (unknown_dropped_++ % 10000 == 0) Log("peer")->warn("send to unknown node {} dropped", to);
    return;
  }
  it->second->Enqueue(envelope);  // a copy: the link's writer thread sends it later
}

void GrpcTransport::Flush() {
  for (auto& [peer, link] : links_) link->Kick();
}

void GrpcTransport::SetReceiver(Receiver receiver) {
  absl::MutexLock lock(&mu_);
  receiver_ = std::move(receiver);
}

void GrpcTransport::SetLinkWatcher(LinkWatcher watcher) {
  absl::MutexLock lock(&mu_);
  link_watcher_ = std::move(watcher);
}

void GrpcTransport::LinkChanged(NodeId peer, bool up) {
  loop_->Post([this, peer, up] {
    if (stopping_ || (!up && Connected(peer))) return;  // a newer stream took over
    LinkWatcher watcher;
    {
      absl::MutexLock lock(&mu_);
      watcher = link_watcher_;
    }
    if (watcher) watcher(peer, up);
  });
}

bool GrpcTransport::LinkUp(NodeId peer) const {
  auto it = links_.find(peer);
  return it != links_.end() && it->second->attached();
}

bool GrpcTransport::Connected(NodeId peer) const {
  absl::ReaderMutexLock lock(&links_mu_);
  return LinkUp(peer);
}

void GrpcTransport::DialLoop(NodeId peer) {
  // gRPC's own reconnect backoff starts at 1 s; a peer that starts a moment later must be
  // reached in milliseconds, or the failure detector sees a second of silence at start-up.
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_min_ms));
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_min_ms));
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.backoff_max_ms));
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  AddKeepalive(&arguments);
  if (!options_.ssl_target_name.empty()) {
    arguments.SetSslTargetNameOverride(options_.ssl_target_name);
  }
  std::string last_failure;  // logged once per distinct failure
  std::string address;       // the channel's (a reload may move the peer)
  std::unique_ptr<wire::Peer::Stub> stub;
  PeerLink* link = nullptr;
  uint32_t backoff_ms = options_.backoff_min_ms;
  while (!stopping_) {
    std::string now_at;
    {
      absl::MutexLock lock(&mu_);
      auto it = addresses_.find(peer);
      if (it == addresses_.end()) {  // removed from the peers
        dialing_.erase(peer);
        break;
      }
      now_at = it->second;
    }
    if (now_at != address) {
      address = now_at;
      stub = wire::Peer::NewStub(grpc::CreateCustomChannel(
          address, options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(),
          arguments));
      last_failure.clear();
    }
    {
      // The link of this peer now (removed and added again: a new one). SetPeers publishes the
      // address before it makes the link: a moment without one is waited out.
      absl::ReaderMutexLock lock(&links_mu_);
      auto it = links_.find(peer);
      link = it == links_.end() ? nullptr : it->second.get();
    }
    if (link == nullptr) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    auto stream = std::make_unique<OutboundPeerStream>(this, peer, link);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      dial_contexts_[peer] = stream->context();
    }
    stream->Start(stub.get());
    grpc::Status status = stream->Await();
    {
      absl::MutexLock lock(&mu_);
      dial_contexts_.erase(peer);
    }
    if (stream->was_attached()) {
      Log("peer")->info("stream to node {} at {} closed", peer, address);
      backoff_ms = options_.backoff_min_ms;
      last_failure.clear();
    }
    if (!status.ok() && status.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      Log("peer")->error("node {} refused us: {}", peer, status.error_message());
    } else if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED &&
               status.error_message() != last_failure && !stopping_) {
      // A TLS failure (the peer's certificate is not from our CA, or it refused ours) is an
      // operator's problem: a warning. Connection refused while a peer starts is routine.
      last_failure = status.error_message();
      std::string lower = absl::AsciiStrToLower(last_failure);
      bool tls = absl::StrContains(lower, "ssl") || absl::StrContains(lower, "handshake") ||
                 absl::StrContains(lower, "certificate") || absl::StrContains(lower, "tls");
      if (tls) {
        Log("peer")->warn("TLS failure with node {} at {}: {}", peer, address, last_failure);
      } else {
        Log("peer")->info("cannot reach node {} at {}: {}", peer, address, last_failure);
      }
    }
    for (uint32_t slept_ms = 0; slept_ms < backoff_ms && !stopping_; slept_ms += 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
  }
}

grpc::ServerBidiReactor<wire::PeerFrame, wire::PeerFrame>* GrpcTransport::Exchange(
    grpc::CallbackServerContext* context) {
  return new InboundPeerStream(this, context);  // deletes itself when done
}

absl::StatusOr<PeerLink*> GrpcTransport::AcceptInbound(const wire::PeerFrame& first,
                                                       grpc::CallbackServerContext* context) {
  const wire::Hello& hello = first.hello();
  NodeId peer = hello.node();
  const std::string address = AddressOf(peer);  // "": not a peer (now)
  std::string why;
  if (hello.version() != wire::VERSION_1) {
    why = "unsupported wire version " + std::to_string(hello.version());
  } else if (hello.cluster() != options_.cluster) {
    why = "cluster \"" + hello.cluster() + "\" is not \"" + options_.cluster + "\"";
  } else if (address.empty()) {
    why = "node " + std::to_string(peer) + " is not a configured peer";
  } else if (peer >= options_.self) {
    why = "node " + std::to_string(peer) + " must not dial node " + std::to_string(options_.self) +
          " (the lower id dials)";
  }
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (why.empty() && auth != nullptr && auth->IsPeerAuthenticated()) {
    // Over TLS: the certificate must be the claimed node's (the name the dialers check the
    // acceptor's against), or any node of the cluster could speak as any other.
    std::vector<std::string> names;
    for (const grpc::string_ref& name : auth->FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME)) {
      names.emplace_back(name.data(), name.size());
    }
    const std::string wanted = PeerCertificateName(address, options_.ssl_target_name);
    if (!CertificateCarries(names, wanted)) {
      why = "node " + std::to_string(peer) + ": its certificate is not for \"" + wanted + "\"";
    }
  }
  if (!why.empty()) {
    Log("peer")->warn("refused peer stream from {}: {}", context->peer(), why);
    return absl::PermissionDeniedError(why);
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("shutting down");
  auto [it, fresh] = inbound_.try_emplace(peer, context);
  if (!fresh) {
    // A restarted peer, or one that reconnected: the old stream must not linger half-attached.
    it->second->TryCancel();
    it->second = context;
  }
  Log("peer")->info("node {} connected from {}", peer, context->peer());
  absl::ReaderMutexLock links_lock(&links_mu_);
  auto link = links_.find(peer);
  if (link == links_.end()) return absl::PermissionDeniedError("removed from the peers");
  return link->second.get();
}

void GrpcTransport::InboundEnded(NodeId peer, grpc::CallbackServerContext* context) {
  absl::MutexLock lock(&mu_);
  auto it = inbound_.find(peer);
  if (it != inbound_.end() && it->second == context) inbound_.erase(it);
}

void GrpcTransport::Deliver(NodeId peer, wire::Frame* frame) {
  auto whole = std::make_shared<wire::Frame>();
  whole->Swap(frame);
  size_t envelopes = whole->envelopes_size();
  if (!loop_->Post([this, peer, whole] { DeliverNow(peer, whole.get()); })) {
    // The protocol thread is far behind: lost, as on a congested link (protocols retransmit).
    counters_.envelopes_rejected += envelopes;
    if (frames_dropped_++ % 1000 == 0) {
      Log("peer")->warn("frame from node {} dropped: the protocol thread's queue is full", peer);
    }
  }
}

void GrpcTransport::DeliverNow(NodeId peer, wire::Frame* frame) {
  Receiver receiver;
  {
    absl::MutexLock lock(&mu_);
    receiver = receiver_;
  }
  for (wire::Envelope& envelope : *frame->mutable_envelopes()) {
    if (stopping_) return;
    if (!AcceptEnvelope(peer, envelope)) continue;
    counters_.envelopes_received++;
    if (receiver) receiver(peer, std::move(envelope));
  }
}

bool GrpcTransport::AcceptEnvelope(NodeId peer, const wire::Envelope& envelope) {
  std::string why;
  if (envelope.version() != wire::VERSION_1) {
    why = "unsupported version " + std::to_string(envelope.version());
  } else if (envelope.sender_node() != peer) {
    why = "claims to be node " + std::to_string(envelope.sender_node());
  } else if (envelope.body_case() == wire::Envelope::BODY_NOT_SET) {
    why = "empty body";
  }
  if (why.empty()) return true;
  if (counters_.envelopes_rejected++ % 1000 == 0) {
    Log("peer")->warn("dropped envelope from node {} (group \"{}\"): {}", peer, envelope.group(), why);
  }
  return false;
}

}  // namespace cohort::nso
