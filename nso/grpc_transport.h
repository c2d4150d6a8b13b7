// The gRPC peer transport: one long-lived bidirectional stream per pair of daemons (the lower node
// id dials, the stream carries both directions), reconnecting with exponential backoff, and
// messages coalesced into frames (004 section 3.2: batching; 001 section 5: reuse connections).
// The streams are callback reactors (nso/peer_reactors.h): Send queues, and Flush, called by the
// owner after a batch of Sends (the daemon: the event loop's flush), starts the writes on the
// calling thread; frames arrive on gRPC's threads. A thread per peer dials and waits.
#ifndef COHORT_NSO_GRPC_TRANSPORT_H_
#define COHORT_NSO_GRPC_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/event_loop.h"
#include "nso/framing.h"
#include "nso/peer_link.h"
#include "nso/peer_reactors.h"
#include "nso/transport.h"
#include "proto/wire.grpc.pb.h"

namespace cohort::nso {

struct GrpcTransportOptions {
  NodeId self = 0;
  std::string cluster;
  std::map<NodeId, std::string> peer_addresses;  // every peer but self
  size_t link_queue_max = 65536;                  // envelopes queued per peer while it is down
  // Bytes of envelopes per frame (a larger envelope goes alone): below the peers' gRPC message
  // size limit (cohortd: half of it), or a frame of a backlog of large envelopes fails the stream.
  size_t frame_bytes_max = kFrameBytesTarget;
  // Redial backoff (this loop's and gRPC's channel backoff both): doubling from min to max. The
  // max must stay well below the smallest exclusion timeout: with 1000 ms, a peer that started
  // 0.6 s after this daemon was first reached 1.25 s after start-up, and this daemon had already
  // excluded it (exclusion timeout 1000 ms; kv nemesis, a 3-member group shrunk to 2 at start).
  uint32_t backoff_min_ms = 20;
  uint32_t backoff_max_ms = 200;
  // Credentials of the dialer (mutual TLS: grpc::SslCredentials with this daemon's certificate);
  // nullptr: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // When non-empty, peers' certificates are checked against this name instead of the host of
  // their address (tls.server_name).
  std::string ssl_target_name;
};

class GrpcTransport final : public PeerTransport,
                            public wire::Peer::CallbackService,
                            public PeerStreamHost {
 public:
  // Each frame read is handed to `loop`, the protocol thread, whole (one hand-off per frame, not
  // per envelope): the receiver runs there.
  GrpcTransport(GrpcTransportOptions options, EventLoop* loop);
  ~GrpcTransport() override;

  // Starts the dialers towards peers with a higher node id. Register `this` as a service on the
  // peer gRPC server before calling it.
  void Start() override;
  void Shutdown() override;

  // Queues; Flush writes.
  void Send(NodeId to, const wire::Envelope& envelope) override;
  // Starts a write to every peer with envelopes queued and no write in progress.
  void Flush();
  void SetReceiver(Receiver receiver) override;
  void SetLinkWatcher(LinkWatcher watcher) override;

  // Loop thread: the peers are now `peers` (every peer but self: id -> address; a SIGHUP'd
  // peers list). A new peer gets a link (and a dialer, if its id is higher); a peer whose
  // address changed has its streams cancelled and is dialed at the new address (its certificate
  // is checked against it); a peer no longer listed has its streams cancelled and its link
  // retired.
  void SetPeers(const std::map<NodeId, std::string>& peers);

  // True while a stream to `peer` is up (any thread).
  bool Connected(NodeId peer) const override;
  // The same on the loop thread (the node's calls ask it), where the link table changes: no lock.
  bool Reachable(NodeId peer) const override { return LinkUp(peer); }
  const TransportCounters& counters() const override { return counters_; }

  // wire::Peer::CallbackService: an inbound stream from a lower-id peer.
  grpc::ServerBidiReactor<wire::PeerFrame, wire::PeerFrame>* Exchange(
      grpc::CallbackServerContext* context) override;

 private:
  void DialLoop(NodeId peer);
  bool AcceptEnvelope(NodeId peer, const wire::Envelope& envelope);
  // PeerStreamHost.
  const wire::PeerFrame& Hello() const override { return hello_; }
  absl::StatusOr<PeerLink*> AcceptInbound(const wire::PeerFrame& hello,
                                          grpc::CallbackServerContext* context) override;
  void InboundEnded(NodeId peer, grpc::CallbackServerContext* context) override;
  // Posted to the loop; a stream that ends while another is attached changes nothing.
  void LinkChanged(NodeId peer, bool up) override;
  void Deliver(NodeId peer, wire::Frame* frame) override;
  // On the loop: the frame's valid envelopes to the receiver.
  void DeliverNow(NodeId peer, wire::Frame* frame);

  // Whether a stream to `peer` is attached (loop thread, or under links_mu_).
  bool LinkUp(NodeId peer) const;
  // The current address of `peer` ("" if it is no peer any more).
  std::string AddressOf(NodeId peer) const ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the dialer of a peer with a higher id.
  void StartDialer(NodeId peer) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels the streams to and from `peer` (it moved or was removed).
  void CancelStreams(NodeId peer) ABSL_LOCKS_EXCLUDED(mu_);

  const GrpcTransportOptions options_;
  EventLoop* const loop_;
  const wire::PeerFrame hello_;
  TransportCounters counters_;
  // Changed only on the loop thread (SetPeers), which reads it without links_mu_; gRPC's threads
  // and the metrics read it under links_mu_. A removed peer's link is retired, not destroyed:
  // streams may still hold it.
  mutable absl::Mutex links_mu_;
  std::map<NodeId, std::unique_ptr<PeerLink>> links_;
  std::vector<std::unique_ptr<PeerLink>> retired_links_;  // loop thread
  mutable absl::Mutex mu_;
  std::map<NodeId, std::string> addresses_ ABSL_GUARDED_BY(mu_);  // every peer but self
  Receiver receiver_ ABSL_GUARDED_BY(mu_);
  LinkWatcher link_watcher_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> frames_dropped_{0};  // the loop's queue was full
  uint64_t unknown_dropped_ = 0;  // loop thread: envelopes sent to no known peer
  // The context of each dialer's stream, while it runs (Shutdown cancels them).
  std::map<NodeId, grpc::ClientContext*> dial_contexts_ ABSL_GUARDED_BY(mu_);
  // The inbound stream serving each lower-id peer; a newer stream from the same peer cancels it
  // (a restarted peer, or one that reconnected: the old stream must not linger half-attached).
  std::map<NodeId, grpc::CallbackServerContext*> inbound_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> dialers_ ABSL_GUARDED_BY(mu_);
  std::set<NodeId> dialing_ ABSL_GUARDED_BY(mu_);  // peers whose dialer runs
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_GRPC_TRANSPORT_H_
