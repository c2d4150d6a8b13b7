// The raw TCP peer transport (issue 7; 001 sections 5-6 and 000: no thread switch, no copy per
// message beyond the one serialisation, many messages per write): one TCP connection per pair of
// daemons (the lower node id dials, the connection carries both directions), served ON THE
// PROTOCOL THREAD through its epoll (nso/event_loop.h). Frames are a 4-byte little-endian length
// and a wire::PeerFrame, the same messages as the gRPC peer stream: a Hello each way first, then
// Frames of envelopes. Everything a batch of protocol work sends to one peer leaves in one Frame
// and one write when the batch ends (EventLoop::AddFlush), so there is batching without any delay.
//
// With options.tls, every connection is mutual TLS (nso/tls_channel.h), driven on the same
// thread. Best effort like every Transport: a broken connection loses what was in flight; the
// protocols retransmit.
//
// Threads: Send, SetReceiver's receiver, Reachable and everything else run on the loop thread;
// Connected and counters may be read from any thread. Listen before the loop starts; Shutdown
// after it stopped.
#ifndef COHORT_NSO_TCP_TRANSPORT_H_
#define COHORT_NSO_TCP_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "nso/event_loop.h"
#include "nso/kept_envelopes.h"
#include "nso/framing.h"
#include "nso/peer_names.h"
#include "nso/tls_channel.h"
#include "nso/transport.h"
#include "google/protobuf/arena.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

struct TcpTransportOptions {
  NodeId self = 0;
  std::string cluster;
  std::string listen;                            // host:port (listen.peer)
  std::map<NodeId, std::string> peer_addresses;  // every peer but self
  // Envelopes kept per peer while it is not connected or not reading (a frozen peer), at most
  // this many and pending_bytes_max bytes: beyond, the oldest go (the protocols retransmit).
  size_t link_queue_max = 65536;
  size_t pending_bytes_max = 64 << 20;
  size_t write_buffer_max = 64 << 20;  // bytes unsent to a peer beyond which envelopes wait
  size_t frame_bytes_max = kPeerFrameBytesMax;  // a longer frame closes the connection
  uint32_t backoff_min_ms = 20;
  uint32_t backoff_max_ms = 250;  // a refused dial costs nothing: a restarted peer is found fast
  // An inbound connection that has not said hello within this long is closed (a port scanner,
  // a stuck peer: each would hold a descriptor for good).
  uint32_t hello_timeout_ms = 5000;
  // A dial whose connect() has not finished within this long is abandoned and redialed (a host
  // behind a cut drops SYNs; the kernel's own retries back off to tens of seconds, and would
  // keep the link down that long after the cut heals).
  uint32_t connect_timeout_ms = 1000;
  // Mutual TLS (tls: in the YAML); nullptr: plaintext.
  std::shared_ptr<TlsContext> tls;
  // TLS handshakes run on the protocol thread (~0.4 ms of CPU each for the acceptor here): at
  // most this many inbound connections per second start one, in bursts of as many; the others
  // are closed at once, so a flood of connections cannot starve the protocol (a peer redials).
  uint32_t tls_accepts_per_second = 100;
  // When non-empty, peers' certificates are checked against this name instead of the host of
  // their address (tls.server_name).
  std::string tls_server_name;
};

class TcpTransport final : public PeerTransport {
 public:
  TcpTransport(TcpTransportOptions options, EventLoop* loop);
  ~TcpTransport() override;

  // Binds and listens on options.listen; call before the loop starts.
  absl::Status Listen();
  // Starts accepting and dialing (posted to the loop).
  void Start() override;
  // Closes every connection; call once the loop has stopped.
  void Shutdown() override;

  // Serialises the envelope into the link's queue at once (loop thread).
  void Send(NodeId to, const wire::Envelope& envelope) override;
  // The batch is serialised into each peer's bytes from the one shared copy at the flush (loop
  // thread).
  void SendWithBatch(NodeId to, const wire::Envelope& envelope,
                     consensus::SharedBatch shared) override;
  void SetReceiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  void SetLinkWatcher(LinkWatcher watcher) override { link_watcher_ = std::move(watcher); }
  // Loop thread (the node's calls ask it): the link table changes on this thread only, so no lock.
  bool Reachable(NodeId peer) const override { return LinkUp(peer); }
  // Any thread.
  bool Connected(NodeId peer) const override;
  const TransportCounters& counters() const override { return counters_; }

  // Loop thread: the peers are now `peers` (every peer but self: id -> address; a SIGHUP'd
  // peers list). A new peer is dialed (or awaited); a peer whose address changed loses its
  // connection and is dialed at the new address (its certificate is checked against it); a
  // peer no longer listed loses its connection and its queue.
  void SetPeers(const std::map<NodeId, std::string>& peers);

  // Loop thread: connections made from now on use `tls` (a rotated certificate, nso/tls_files.h);
  // those up keep their session. Only with options.tls (plaintext stays plaintext).
  void SetTls(std::shared_ptr<TlsContext> tls);

  // Loop thread, after every batch of work: one frame per peer with what the batch sent, written
  // at once; redials peers whose backoff has passed.
  void Flush();

 private:
  struct Connection;  // one socket, before or after its Hello
  struct Link;        // one peer

  // Whether the link to `peer` is up (loop thread, or under links_mu_).
  bool LinkUp(NodeId peer) const;

  void Accept();
  // TLS: whether an inbound connection may start a handshake now (token bucket).
  bool TakeAcceptToken(uint64_t now_ms);
  // Closes inbound connections older than hello_timeout_ms without a hello, and dials not
  // connected after connect_timeout_ms (looked at every half of the shorter timeout, at most
  // once a second).
  void SweepStalled(uint64_t now_ms);
  void Dial(Link* link, uint64_t now_ms);
  void OnEvents(int fd, uint32_t events);
  // Reads what is there; false when the connection must close.
  bool ReadSome(Connection* connection);
  // Handles the complete frames at the start of connection->in; false to close.
  bool HandleFrames(Connection* connection);
  bool OnHello(Connection* connection, const wire::Hello& hello);
  // Hands each envelope of a frame (after the hello) to the receiver; false if malformed.
  bool Deliver(Connection* connection, const char* data, size_t size);
  bool AcceptEnvelope(NodeId peer, const wire::Envelope& envelope);
  // Appends a length-prefixed frame to the connection's output (Flush bounds what waits there).
  void Queue(Connection* connection, const wire::PeerFrame& frame);
  // Empties the connection's output buffer once all of it was written, before more is queued.
  static void PrepareQueue(Connection* connection);
  // Bytes queued on the connection and not yet written.
  static size_t Unsent(const Connection& connection);
  // Writes what it can; watches EPOLLOUT while something is left. False on error.
  bool WriteSome(Connection* connection);
  // Watches EPOLLOUT exactly while the connection has something to write that waits for it.
  void UpdateWatch(Connection* connection);
  // Starts TLS on a new connection (options_.tls); false (logged) if it cannot.
  bool StartTls(Connection* connection, bool dialer, const std::string& address);
  void TlsFailure(Connection* connection, const std::string& error);
  // `replaced`: a newer connection from the same peer takes over (the link stays up).
  void Close(int fd, const char* why, bool replaced = false);

  const TcpTransportOptions options_;
  EventLoop* const loop_;
  const uint64_t sweep_every_ms_;  // SweepStalled: half the shorter timeout, at most 1 s
  Receiver receiver_;
  LinkWatcher link_watcher_;
  std::shared_ptr<TlsContext> tls_;  // loop thread: options.tls, or the last SetTls
  TransportCounters counters_;
  int listen_fd_ = -1;
  // Changed only on the loop thread (SetPeers), which reads it without links_mu_; other threads
  // (Connected, for the metrics) read it under links_mu_.
  mutable absl::Mutex links_mu_;
  std::map<NodeId, std::unique_ptr<Link>> links_;
  std::map<int, std::unique_ptr<Connection>> connections_;     // by fd, loop thread
  std::vector<char> read_buffer_;                              // loop thread
  // Loop thread: each envelope read is parsed into this arena (its first block `read_block_`),
  // reset for the next, and handed to the receiver by reference: its messages and short strings
  // cost no allocation (omniORB2, 001 sections 5-6).
  alignas(16) char read_block_[8192];
  google::protobuf::Arena read_arena_;
  // Loop thread: replies and consensus messages are read into these instead (issue 7).
  KeptEnvelopes kept_envelopes_;
  uint64_t inbound_tls_failures_ = 0;                          // loop thread
  uint64_t unknown_dropped_ = 0;  // loop thread: envelopes sent to no known peer
  double accept_tokens_ = 0;            // loop thread: TLS handshakes allowed now
  uint64_t accept_tokens_at_ms_ = 0;    // when accept_tokens_ was last refilled
  uint64_t accepts_refused_ = 0;        // over tls_accepts_per_second
  uint64_t accept_pauses_ = 0;          // out of descriptors (Accept)
  uint64_t accept_paused_until_ms_ = 0;  // then Flush watches the listening socket again
  static constexpr uint64_t kAcceptPauseMs = 100;
  uint64_t sweep_at_ms_ = 0;            // the last SweepStalled
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TCP_TRANSPORT_H_
