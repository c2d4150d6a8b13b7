// The peer transport: how one daemon hands an envelope to another. Implemented by the gRPC peer
// streams (nso/grpc_transport.h) and by the in-process simulated network (nso/sim_network.h).
// Best effort: a message may be lost, duplicated or reordered; the protocols above retransmit.
#ifndef COHORT_NSO_TRANSPORT_H_
#define COHORT_NSO_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "consensus/total_order.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

using NodeId = uint32_t;

// The first frame a daemon sends on a peer connection (gRPC stream or TCP): who is calling.
inline wire::PeerFrame HelloFrame(NodeId self, const std::string& cluster) {
  wire::PeerFrame frame;
  frame.mutable_hello()->set_version(wire::VERSION_1);
  frame.mutable_hello()->set_node(self);
  frame.mutable_hello()->set_cluster(cluster);
  return frame;
}

class Transport {
 public:
  // The envelope lives only during the call (the raw TCP transport parses it into an arena):
  // what is kept of it is copied.
  // The receiver takes the envelope: it may move strings out of it (a reply's payload, issue 7).
  using Receiver = std::function<void(NodeId from, wire::Envelope&& envelope)>;

  virtual ~Transport() = default;

  // Best effort: never blocks on the peer, may drop. The envelope is only read during the call
  // (the raw TCP transport serialises it at once): a caller may reuse one object for its sends,
  // or build it on an arena (issue 7: no allocation per message).
  virtual void Send(NodeId to, const wire::Envelope& envelope) = 0;

  // The same for an envelope whose batch is held apart, shared by the sends to several peers
  // (consensus::SharedBatch). This default copies it in; the raw TCP transport serialises it
  // into each peer's bytes instead, after the envelope's own, as a second occurrence of the
  // envelope's field that holds it, which the receiver's parser merges (protobuf's rule for a
  // message field seen twice): one copy of a proposal for n - 1 peers (issue 7).
  virtual void SendWithBatch(NodeId to, const wire::Envelope& envelope,
                             consensus::SharedBatch shared) {
    wire::Envelope whole = envelope;
    shared.CopyInto(&whole);
    Send(to, whole);
  }

  // The callback that receives every envelope addressed to this node.
  virtual void SetReceiver(Receiver receiver) = 0;

  // Told, on the protocol thread, when the connection to a peer closes (up = false: the peer's
  // process died, its host reset the connection, or this side gave up on it) and when one is
  // established again (up = true). The failure detector suspects a peer whose connection closed
  // at once (membership/failure_detector.h, LinkDown). A partition closes nothing.
  using LinkWatcher = std::function<void(NodeId peer, bool up)>;
  virtual void SetLinkWatcher(LinkWatcher watcher) {}

  // False when the transport knows `peer` is unreachable now (its stream is down). A hint only:
  // true does not mean a message will arrive.
  virtual bool Reachable(NodeId peer) const { return true; }
};

// Counters of a daemon's peer transport (metrics).
struct TransportCounters {
  std::atomic<uint64_t> frames_sent{0};
  std::atomic<uint64_t> envelopes_sent{0};
  std::atomic<uint64_t> envelopes_received{0};
  std::atomic<uint64_t> envelopes_rejected{0};
  std::atomic<uint64_t> bytes_sent{0};
};

// A transport between daemons as a daemon runs it: gRPC streams (nso/grpc_transport.h) or raw
// TCP on the protocol thread (nso/tcp_transport.h), chosen by peer_transport in the YAML.
class PeerTransport : public Transport {
 public:
  virtual void Start() = 0;
  virtual void Shutdown() = 0;
  // True while a connection to `peer` is up; any thread.
  virtual bool Connected(NodeId peer) const = 0;
  virtual const TransportCounters& counters() const = 0;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TRANSPORT_H_
