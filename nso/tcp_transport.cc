#include "nso/tcp_transport.h"

#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nso/event_loop.h"
#include "nso/framing.h"
#include "nso/peer_frame_codec.h"
#include "nso/scratch_arena.h"
#include "nso/slot_queue.h"
#include "nso/log_every.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

constexpr size_t kLengthBytes = kFrameLengthBytes;
constexpr size_t kReadChunk = 64 * 1024;

// "host:port" resolved to an IPv4 socket address; empty on failure (*error says why).
bool Resolve(const std::string& address, bool passive, sockaddr_storage* out, socklen_t* length,
             std::string* error) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    *error = absl::StrCat("\"", address, "\" is not host:port");
    return false;
  }
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  int code = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (code != 0 || found == nullptr) {
    *error = absl::StrCat("cannot resolve \"", address, "\": ", gai_strerror(code));
    return false;
  }
  std::memcpy(out, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  freeaddrinfo(found);
  return true;
}

// Every peer connection: no Nagle delay (issue 7), and a peer gone without a word (its machine
// lost power, a partition) is found by TCP itself: data unacknowledged for kPeerSilenceMs, or an
// idle connection whose probes go unanswered as long, ends the connection, and the link dials
// again (Flush). Without it the old connection lived on until a retransmission, backed off to a
// minute or more, met the returned host's reset (16 s after the heal of a 40 s outage here,
// netlab_peer_return_test).
constexpr int kPeerSilenceMs = 15000;

void PeerSocketOptions(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle_s = 5, interval_s = 2, probes = 5;  // within kPeerSilenceMs, which bounds them
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
  unsigned int silence_ms = kPeerSilenceMs;
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &silence_ms, sizeof(silence_ms));
}

}  // namespace

struct TcpTransport::Connection {
  int fd = -1;
  uint64_t opened_ms = 0;   // accepted or dialed
  NodeId peer = 0;          // 0: an inbound connection before its Hello
  bool connecting = false;  // dialed, connect() not finished
  bool hello_done = false;  // Hello received (and, inbound, answered)
  bool want_write = false;  // EPOLLOUT watched
  std::string in;           // bytes read, not yet a complete frame
  std::string out;          // bytes to write, from out_offset
  size_t out_offset = 0;
  std::unique_ptr<TlsChannel> tls;  // options.tls: the session over fd
  bool read_wants_write = false;    // TLS: a read waits for the socket to be writable
  bool write_wants_read = false;    // TLS: a write waits for the socket to be readable
};

struct TcpTransport::Link {
  NodeId peer = 0;
  std::string address;
  bool dialer = false;      // this node has the lower id: it dials
  int fd = -1;              // the connection serving the link (dialing or established)
  bool established = false;
  struct Pending {
    // The envelope, serialised when sent: a slot's string keeps its memory for the next
    // envelopes (SlotQueue), and the sender's object is free at once (transport.h).
    std::string envelope;
    size_t bytes = 0;  // its serialized size (the shared batch included)
    // Held apart, shared by the sends of one step (transport.h, SendWithBatch); null: none.
    consensus::SharedBatch shared;
    size_t batch_bytes = 0;  // the shared batch alone
  };
  // Sent since the last flush, or while down or not reading (bounded: Send).
  SlotQueue<Pending> pending;
  size_t pending_bytes = 0;
  uint64_t retry_at_ms = 0;
  uint32_t backoff_ms = 0;
  std::string last_failure;  // logged once per distinct failure
  std::atomic<bool> connected{false};
  LogEvery dropped;      // envelopes dropped from a full queue
  LogEvery not_reading;  // flushes that found the peer not reading
};

TcpTransport::TcpTransport(TcpTransportOptions options, EventLoop* loop)
    : options_(std::move(options)),
      loop_(loop),
      sweep_every_ms_(std::min<uint64_t>(
          {1000, options_.hello_timeout_ms / 2, options_.connect_timeout_ms / 2})),
      tls_(options_.tls),
      read_arena_(ArenaOn(read_block_, sizeof(read_block_))) {
  for (const auto& [peer, address] : options_.peer_addresses) {
    auto link = std::make_unique<Link>();
    link->peer = peer;
    link->address = address;
    link->dialer = options_.self < peer;
    link->backoff_ms = options_.backoff_min_ms;
    links_[peer] = std::move(link);
  }
}

TcpTransport::~TcpTransport() { Shutdown(); }

absl::Status TcpTransport::Listen() {
  sockaddr_storage address{};
  socklen_t length = 0;
  std::string error;
  if (!Resolve(options_.listen, /*passive=*/true, &address, &length, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("listen.peer: ", error));
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listen_fd_, 128) != 0) {
    std::string why = std::strerror(errno);
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return absl::UnavailableError(
        absl::StrCat("cannot listen on listen.peer ", options_.listen, ": ", why));
  }
  return absl::OkStatus();
}

void TcpTransport::Start() {
  loop_->Post([this] {
    if (listen_fd_ >= 0) loop_->Watch(listen_fd_, EPOLLIN, [this](uint32_t) { Accept(); });
    uint64_t now_ms = MonotonicNowMs();
    for (auto& [peer, link] : links_) {
      if (link->dialer) Dial(link.get(), now_ms);
    }
  });
}

void TcpTransport::Shutdown() {
  for (auto& [fd, connection] : connections_) close(fd);
  connections_.clear();
  for (auto& [peer, link] : links_) {
    link->fd = -1;
    link->established = false;
    link->connected = false;
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void TcpTransport::SetTls(std::shared_ptr<TlsContext> tls) {
  if (tls_ && tls) tls_ = std::move(tls);
}

bool TcpTransport::LinkUp(NodeId peer) const {
  auto it = links_.find(peer);
  return it != links_.end() && it->second->connected.load();
}

bool TcpTransport::Connected(NodeId peer) const {
  absl::ReaderMutexLock lock(&links_mu_);
  return LinkUp(peer);
}

void TcpTransport::SetPeers(const std::map<NodeId, std::string>& peers) {
  for (auto it = links_.begin(); it != links_.end();) {
    if (peers.count(it->first)) {
      ++it;
      continue;
    }
    const NodeId peer = it->first;
    if (it->second->fd >= 0) Close(it->second->fd, "removed from the peers");
    {
      absl::MutexLock lock(&links_mu_);
      it = links_.erase(it);
    }
    Log("peer")->info("node {} removed from the peers", peer);
  }
  for (const auto& [peer, address] : peers) {
    if (peer == options_.self) continue;
    auto found = links_.find(peer);
    if (found == links_.end()) {
      auto link = std::make_unique<Link>();
      link->peer = peer;
      link->address = address;
      link->dialer = options_.self < peer;
      link->backoff_ms = options_.backoff_min_ms;  // retry_at_ms 0: dialed at the next Flush
      absl::MutexLock lock(&links_mu_);
      links_[peer] = std::move(link);
      Log("peer")->info("node {} added to the peers at {}", peer, address);
      continue;
    }
    Link* link = found->second.get();
    if (link->address == address) continue;
    Log("peer")->info("node {} moves from {} to {}", peer, link->address, address);
    link->address = address;
    link->last_failure.clear();
    link->backoff_ms = options_.backoff_min_ms;
    if (link->fd >= 0) Close(link->fd, "its address changed");
    link->retry_at_ms = 0;
  }
}

void TcpTransport::Send(NodeId to, const wire::Envelope& envelope) {
  SendWithBatch(to, envelope, {});
}

void TcpTransport::SendWithBatch(NodeId to, const wire::Envelope& envelope,
                                 consensus::SharedBatch shared) {
  auto it = links_.find(to);
  if (it == links_.end()) {
    // (A peer removed by a reload while still in a group's view: once per 10000.)
    if (unknown_dropped_++ % 10000 == 0) Log("peer")->warn("send to unknown node {} dropped", to);
    return;
  }
  Link* link = it->second.get();
  Link::Pending& queued = link->pending.emplace_back();
  envelope.SerializeToString(&queued.envelope);  // into the slot's memory: no allocation once warm
  queued.bytes = queued.envelope.size();
  if (shared) {
    queued.batch_bytes = shared.batch->ByteSizeLong();  // the same for every peer it goes to
    queued.bytes += AppendedBatchBytes(queued.batch_bytes);
    queued.shared = std::move(shared);
  }
  const size_t bytes = queued.bytes;
  while (link->pending.size() > 1 &&
         (link->pending.size() > options_.link_queue_max ||
          link->pending_bytes + bytes > options_.pending_bytes_max)) {
    link->pending_bytes -= link->pending.front().bytes;
    link->pending.pop_front();
    if (const uint64_t dropped = link->dropped.Count(MonotonicNowMs()); dropped > 0) {
      Log("peer")->warn("queue to node {} full ({} envelopes, {} bytes): dropping oldest ({} "
                        "dropped since the last such line, at most one in 10 s)", to,
                        link->pending.size(), link->pending_bytes + bytes, dropped);
    }
  }
  link->pending_bytes += bytes;
}

void TcpTransport::Flush() {
  uint64_t now_ms = 0;
  if (accept_paused_until_ms_ != 0 || !connections_.empty()) now_ms = MonotonicNowMs();
  if (accept_paused_until_ms_ != 0 && now_ms >= accept_paused_until_ms_) {
    accept_paused_until_ms_ = 0;
    loop_->Rewatch(listen_fd_, EPOLLIN);
  }
  if (!connections_.empty()) SweepStalled(now_ms);
  for (auto& [peer, owned] : links_) {
    Link* link = owned.get();
    if (!link->established) {
      if (link->dialer && link->fd < 0) {
        if (now_ms == 0) now_ms = MonotonicNowMs();
        if (now_ms >= link->retry_at_ms) Dial(link, now_ms);
      }
      continue;
    }
    if (link->pending.empty()) continue;
    auto found = connections_.find(link->fd);
    if (found == connections_.end()) continue;
    Connection* connection = found->second.get();
    // What the batch sent to this peer in as few frames and writes as kFrameBytesTarget allows
    // (004 section 3.2). While the peer does not read, the rest waits in `pending`.
    bool written = true;
    while (!link->pending.empty() && written) {
      if (Unsent(*connection) >= options_.write_buffer_max) {
        if (link->not_reading.Count(MonotonicNowMs()) > 0) {
          Log("peer")->warn("node {} is not reading ({} bytes unsent): {} envelopes wait", peer,
                            Unsent(*connection), link->pending.size());
        }
        break;
      }
      size_t count = 0;
      size_t bytes = 0;
      size_t body_bytes = 0;
      for (size_t i = 0; i < link->pending.size(); ++i) {
        const Link::Pending& next = link->pending[i];
        if (count > 0 && bytes + next.bytes > kFrameBytesTarget) break;
        bytes += next.bytes;
        body_bytes += EnvelopeFieldBytes(next.bytes);
        ++count;
      }
      // Straight from the queue into the write buffer (peer_frame_codec.h): no frame object.
      PrepareQueue(connection);
      const size_t frame_bytes = BeginEnvelopeFrame(body_bytes, &connection->out);
      for (size_t i = 0; i < count; ++i) {
        Link::Pending& next = link->pending.front();
        if (next.shared) {
          const auto [envelope_field, batch_field] = next.shared.FieldNumbers();
          const AppendedBatch appended{next.shared.batch.get(), next.batch_bytes, envelope_field,
                                       batch_field};
          AppendEnvelope(next.envelope, &connection->out, &appended);
        } else {
          AppendEnvelope(next.envelope, &connection->out);
        }
        link->pending_bytes -= next.bytes;
        link->pending.pop_front();
      }
      counters_.frames_sent++;
      counters_.envelopes_sent += count;
      counters_.bytes_sent += frame_bytes + kLengthBytes;
      written = WriteSome(connection);
    }
    if (!written) Close(connection->fd, "write failed");
  }
}

void TcpTransport::Dial(Link* link, uint64_t now_ms) {
  sockaddr_storage address{};
  socklen_t length = 0;
  std::string error;
  int fd = -1;
  if (Resolve(link->address, /*passive=*/false, &address, &length, &error)) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      PeerSocketOptions(fd);
      if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 &&
          errno != EINPROGRESS) {
        error = std::strerror(errno);
        close(fd);
        fd = -1;
      }
    } else {
      error = std::strerror(errno);
    }
  }
  if (fd < 0) {
    if (error != link->last_failure) {
      link->last_failure = error;
      Log("peer")->info("cannot reach node {} at {}: {}", link->peer, link->address, error);
    }
    link->retry_at_ms = now_ms + link->backoff_ms;
    link->backoff_ms = std::min(link->backoff_ms * 2, options_.backoff_max_ms);
    return;
  }
  auto connection = std::make_unique<Connection>();
  connection->fd = fd;
  connection->opened_ms = now_ms;
  connection->peer = link->peer;
  connection->connecting = true;
  connection->want_write = true;
  Connection* raw = connection.get();
  connections_[fd] = std::move(connection);
  link->fd = fd;
  Queue(raw, HelloFrame(options_.self, options_.cluster));
  loop_->Watch(fd, EPOLLIN | EPOLLOUT, [this, fd](uint32_t events) { OnEvents(fd, events); });
  if (tls_ && !StartTls(raw, /*dialer=*/true, link->address)) Close(fd, nullptr);
}

bool TcpTransport::StartTls(Connection* connection, bool dialer, const std::string& address) {
  std::string name = dialer ? PeerCertificateName(address, options_.tls_server_name) : std::string();
  absl::StatusOr<std::unique_ptr<TlsChannel>> channel =
      TlsChannel::Create(*tls_, connection->fd, dialer, name);
  if (!channel.ok()) {
    TlsFailure(connection, std::string(channel.status().message()));
    return false;
  }
  connection->tls = *std::move(channel);
  return true;
}

void TcpTransport::TlsFailure(Connection* connection, const std::string& error) {
  // An operator's problem (a certificate not from our CA, a plaintext peer): a warning, once per
  // distinct failure of a peer this node dials, and for inbound connections once per 100.
  auto link = links_.find(connection->peer);
  if (connection->peer != 0 && link != links_.end()) {
    if (link->second->last_failure == error) return;
    link->second->last_failure = error;
    Log("peer")->warn("TLS failure with node {} at {}: {}", connection->peer,
                      link->second->address, error);
    return;
  }
  if (inbound_tls_failures_++ % 100 != 0) return;
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[INET6_ADDRSTRLEN] = "?";
  if (getpeername(connection->fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
      address.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, host, sizeof(host));
  }
  Log("peer")->warn("TLS failure with a peer connecting from {}: {}", host, error);
}

void TcpTransport::Accept() {
  uint64_t now_ms = MonotonicNowMs();
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      // Out of descriptors: the pending connection stays and the socket stays readable; stop
      // watching it for a while rather than spin the protocol thread (Flush resumes), as
      // LocalApi::Accept does. (Until session 52 the thread spun at 100% of a core.)
      if (accept_pauses_++ % 100 == 0) {
        Log("peer")->warn("cannot accept a peer's connection ({}): pausing accepts for {} ms "
                          "({} such pauses so far)",
                          std::strerror(errno), kAcceptPauseMs, accept_pauses_);
      }
      loop_->Rewatch(listen_fd_, 0);
      accept_paused_until_ms_ = now_ms + kAcceptPauseMs;
      return;
    }
    if (fd < 0) return;  // EAGAIN: all taken; other errors: try on the next event
    if (tls_ && !TakeAcceptToken(now_ms)) {
      if (accepts_refused_++ % 1000 == 0) {
        Log("peer")->warn("more than {} TLS connections a second: connection refused ({} so far)",
                          options_.tls_accepts_per_second, accepts_refused_);
      }
      close(fd);
      continue;
    }
    PeerSocketOptions(fd);
    auto connection = std::make_unique<Connection>();
    connection->fd = fd;
    connection->opened_ms = now_ms;
    Connection* raw = connection.get();
    connections_[fd] = std::move(connection);
    loop_->Watch(fd, EPOLLIN, [this, fd](uint32_t events) { OnEvents(fd, events); });
    if (tls_ && !StartTls(raw, /*dialer=*/false, "")) Close(fd, nullptr);
  }
}

bool TcpTransport::TakeAcceptToken(uint64_t now_ms) {
  double rate = options_.tls_accepts_per_second;
  if (accept_tokens_at_ms_ == 0) accept_tokens_ = rate;  // a full bucket at first
  accept_tokens_ = std::min(rate, accept_tokens_ + (now_ms - accept_tokens_at_ms_) * rate / 1000);
  accept_tokens_at_ms_ = now_ms;
  if (accept_tokens_ < 1) return false;
  accept_tokens_ -= 1;
  return true;
}

void TcpTransport::SweepStalled(uint64_t now_ms) {
  if (now_ms < sweep_at_ms_ + sweep_every_ms_) return;
  sweep_at_ms_ = now_ms;
  std::vector<int> silent;
  std::vector<int> unconnected;
  for (const auto& [fd, connection] : connections_) {
    if (connection->peer == 0 && !connection->hello_done &&
        now_ms >= connection->opened_ms + options_.hello_timeout_ms) {
      silent.push_back(fd);
    }
    if (connection->connecting && now_ms >= connection->opened_ms + options_.connect_timeout_ms) {
      unconnected.push_back(fd);
    }
  }
  if (!silent.empty()) {
    Log("peer")->info("{} inbound connection(s) without a hello for {} ms: closed", silent.size(),
                      options_.hello_timeout_ms);
  }
  for (int fd : silent) Close(fd, nullptr);
  for (int fd : unconnected) {
    auto link = links_.find(connections_.at(fd)->peer);
    std::string why = absl::StrCat("connect timed out after ", options_.connect_timeout_ms, " ms");
    if (link != links_.end() && link->second->last_failure != why) {
      link->second->last_failure = why;
      Log("peer")->info("cannot reach node {} at {}: {}", link->first, link->second->address, why);
    }
    Close(fd, nullptr);  // the link redials after its backoff
  }
}

void TcpTransport::OnEvents(int fd, uint32_t events) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection* connection = it->second.get();
  if (connection->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      auto link = links_.find(connection->peer);
      if (link != links_.end() && link->second->last_failure != std::strerror(error)) {
        link->second->last_failure = std::strerror(error);
        Log("peer")->info("cannot reach node {} at {}: {}", connection->peer,
                          link->second->address, std::strerror(error));
      }
      return Close(fd, nullptr);
    }
    connection->connecting = false;
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ||
      (connection->read_wants_write && (events & EPOLLOUT))) {
    if (!ReadSome(connection)) return Close(fd, "closed");
    // Handling frames may have closed this connection (a newer one from the same peer).
    if (connections_.find(fd) == connections_.end()) return;
  }
  // TLS: what a read did (the handshake's progress) may let a waiting write go on.
  bool write = (events & EPOLLOUT) || (connection->tls && connection->out_offset < connection->out.size());
  if (write && !WriteSome(connection)) return Close(fd, "write failed");
}

bool TcpTransport::ReadSome(Connection* connection) {
  // Into one reused buffer, then appended: no zero-filling of a fresh chunk per read (perf).
  read_buffer_.resize(kReadChunk);
  if (connection->tls) {
    // Until OpenSSL has nothing more: it may hold decrypted bytes the socket no longer signals.
    while (true) {
      TlsWait wait = TlsWait::kNone;
      std::string error;
      ssize_t got = connection->tls->Read(read_buffer_.data(), read_buffer_.size(), &wait, &error);
      if (got > 0) {
        connection->in.append(read_buffer_.data(), static_cast<size_t>(got));
        // Drained: the buffer was not filled and OpenSSL holds nothing more (saves an EAGAIN).
        if (static_cast<size_t>(got) < read_buffer_.size() && !connection->tls->HasPending()) {
          break;
        }
        continue;
      }
      if (got == 0) {
        HandleFrames(connection);
        return false;  // the peer closed
      }
      if (wait == TlsWait::kNone) {
        if (!error.empty()) TlsFailure(connection, error);
        return false;
      }
      bool wants_write = wait == TlsWait::kWritable;
      if (wants_write != connection->read_wants_write) {
        connection->read_wants_write = wants_write;
        UpdateWatch(connection);
      }
      break;
    }
    return HandleFrames(connection);
  }
  while (true) {
    ssize_t got = read(connection->fd, read_buffer_.data(), read_buffer_.size());
    if (got > 0) {
      connection->in.append(read_buffer_.data(), static_cast<size_t>(got));
      if (static_cast<size_t>(got) < read_buffer_.size()) break;  // drained (saves an EAGAIN)
      continue;
    }
    if (got == 0) {
      HandleFrames(connection);
      return false;  // the peer closed
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  return HandleFrames(connection);
}

bool TcpTransport::HandleFrames(Connection* connection) {
  size_t offset = 0;
  std::string& in = connection->in;
  bool ok = true;
  while (in.size() - offset >= kLengthBytes) {
    uint32_t length = GetFrameLength(in.data() + offset);
    if (length > options_.frame_bytes_max) {
      Log("peer")->warn("frame of {} bytes from node {} refused", length, connection->peer);
      ok = false;
      break;
    }
    if (in.size() - offset - kLengthBytes < length) break;
    const char* data = in.data() + offset + kLengthBytes;
    offset += kLengthBytes + length;
    if (connection->hello_done) {
      if (!Deliver(connection, data, length)) {
        ok = false;
        break;
      }
      continue;
    }
    wire::PeerFrame frame;
    if (!frame.ParseFromArray(data, static_cast<int>(length))) {
      Log("peer")->warn("undecodable frame from node {}: connection closed", connection->peer);
      ok = false;
      break;
    }
    if (!frame.has_hello() || !OnHello(connection, frame.hello())) {
      ok = false;
      break;
    }
  }
  in.erase(0, offset);
  return ok;
}

bool TcpTransport::OnHello(Connection* connection, const wire::Hello& hello) {
  std::string why;
  NodeId peer = hello.node();
  if (hello.version() != wire::VERSION_1) {
    why = absl::StrCat("unsupported wire version ", hello.version());
  } else if (hello.cluster() != options_.cluster) {
    why = absl::StrCat("cluster \"", hello.cluster(), "\" is not \"", options_.cluster, "\"");
  } else if (links_.count(peer) == 0) {
    why = absl::StrCat("node ", peer, " is not a configured peer");
  } else if (connection->peer != 0 && peer != connection->peer) {
    why = absl::StrCat("dialed node ", connection->peer, " but node ", peer, " answered");
  } else if (connection->peer == 0 && peer >= options_.self) {
    why = absl::StrCat("node ", peer, " must not dial node ", options_.self,
                       " (the lower id dials)");
  }
  if (why.empty() && connection->peer == 0 && connection->tls) {
    // Inbound over TLS: the certificate must be the claimed node's (the name the dialers check
    // the acceptor's against), or any node of the cluster could speak as any other.
    absl::Status named = connection->tls->CheckPeerName(
        PeerCertificateName(links_.at(peer)->address, options_.tls_server_name));
    if (!named.ok()) why = absl::StrCat("node ", peer, ": ", named.message());
  }
  if (!why.empty()) {
    Log("peer")->warn("refused peer connection: {}", why);
    return false;
  }
  Link* link = links_.at(peer).get();
  if (connection->peer == 0) {  // inbound: a newer connection from the peer replaces the old one
    if (link->fd >= 0 && link->fd != connection->fd) Close(link->fd, "replaced", /*replaced=*/true);
    connection->peer = peer;
    link->fd = connection->fd;
    Queue(connection, HelloFrame(options_.self, options_.cluster));
    if (!WriteSome(connection)) return false;
  }
  connection->hello_done = true;
  link->established = true;
  link->connected = true;
  link->backoff_ms = options_.backoff_min_ms;
  link->last_failure.clear();
  Log("peer")->info("connected to node {} (tcp)", peer);
  if (link_watcher_) link_watcher_(peer, true);
  return true;
}

bool TcpTransport::Deliver(Connection* connection, const char* data, size_t size) {
  const NodeId peer = connection->peer;
  // One envelope at a time: a reply or a consensus message in a kept envelope, any other in the
  // arena (a parse does not shrink it).
  auto scratch = [this](uint32_t body_field) {
    read_arena_.Reset();
    if (wire::Envelope* kept = kept_envelopes_.For(body_field)) return EnvelopeTarget{kept, true};
    return EnvelopeTarget{google::protobuf::Arena::CreateMessage<wire::Envelope>(&read_arena_)};
  };
  absl::Status read = ReadEnvelopeFrame(data, size, scratch, [&](wire::Envelope& envelope) {
    if (!AcceptEnvelope(peer, envelope)) return;
    counters_.envelopes_received++;
    if (receiver_) receiver_(peer, std::move(envelope));
  });
  read_arena_.Reset();  // the last envelope's strings go now, not at the next frame
  if (read.ok()) return true;
  Log("peer")->warn("undecodable frame from node {}: {}; connection closed", peer,
                    std::string(read.message()));
  return false;
}

bool TcpTransport::AcceptEnvelope(NodeId peer, const wire::Envelope& envelope) {
  std::string why;
  if (envelope.version() != wire::VERSION_1) {
    why = absl::StrCat("unsupported version ", envelope.version());
  } else if (envelope.sender_node() != peer) {
    why = absl::StrCat("claims to be node ", envelope.sender_node());
  } else if (envelope.body_case() == wire::Envelope::BODY_NOT_SET) {
    why = "empty body";
  }
  if (why.empty()) return true;
  if (counters_.envelopes_rejected++ % 1000 == 0) {
    Log("peer")->warn("dropped envelope from node {} (group \"{}\"): {}", peer, envelope.group(),
                      why);
  }
  return false;
}

size_t TcpTransport::Unsent(const Connection& connection) {
  return connection.out.size() - connection.out_offset;
}

void TcpTransport::PrepareQueue(Connection* connection) {
  if (connection->out_offset > 0 && connection->out_offset == connection->out.size()) {
    connection->out.clear();
    connection->out_offset = 0;
  }
}

void TcpTransport::Queue(Connection* connection, const wire::PeerFrame& frame) {
  size_t bytes = frame.ByteSizeLong();
  PrepareQueue(connection);
  PutFrameLength(static_cast<uint32_t>(bytes), &connection->out);
  frame.AppendToString(&connection->out);
  counters_.bytes_sent += bytes + kLengthBytes;
}

bool TcpTransport::WriteSome(Connection* connection) {
  if (connection->connecting) return true;  // EPOLLOUT will say when connect() is done
  std::string& out = connection->out;
  connection->write_wants_read = false;
  while (connection->out_offset < out.size()) {
    ssize_t sent;
    if (connection->tls) {
      TlsWait wait = TlsWait::kNone;
      std::string error;
      sent = connection->tls->Write(out.data() + connection->out_offset,
                                    out.size() - connection->out_offset, &wait, &error);
      if (sent <= 0) {
        if (wait == TlsWait::kNone) {
          if (!error.empty()) TlsFailure(connection, error);
          return false;
        }
        // The handshake waits for the peer: the next read goes on with it (OnEvents).
        connection->write_wants_read = wait == TlsWait::kReadable;
        break;
      }
    } else {
      sent = send(connection->fd, out.data() + connection->out_offset,
                  out.size() - connection->out_offset, MSG_NOSIGNAL);
    }
    if (sent > 0) {
      connection->out_offset += sent;
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  DropSent(&out, &connection->out_offset);
  UpdateWatch(connection);
  return true;
}

void TcpTransport::UpdateWatch(Connection* connection) {
  if (connection->connecting) return;  // EPOLLOUT watched until connect() is done
  bool want_write = (!connection->out.empty() && !connection->write_wants_read) ||
                    connection->read_wants_write;
  if (want_write != connection->want_write) {
    connection->want_write = want_write;
    loop_->Rewatch(connection->fd, EPOLLIN | (want_write ? EPOLLOUT : 0));
  }
}

void TcpTransport::Close(int fd, const char* why, bool replaced) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  NodeId peer = it->second->peer;
  loop_->Unwatch(fd);
  close(fd);
  connections_.erase(it);
  auto link_it = links_.find(peer);
  if (link_it == links_.end() || link_it->second->fd != fd) return;
  Link* link = link_it->second.get();
  bool was_established = link->established;
  link->fd = -1;
  link->established = false;
  link->connected = false;
  if (link->dialer) {
    link->retry_at_ms = MonotonicNowMs() + link->backoff_ms;
    link->backoff_ms = std::min(link->backoff_ms * 2, options_.backoff_max_ms);
  }
  if (was_established && why != nullptr) {
    Log("peer")->info("connection to node {} closed ({})", peer, why);
  }
  if (was_established && !replaced && link_watcher_) link_watcher_(peer, false);
}

}  // namespace cohort::nso
