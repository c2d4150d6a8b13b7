// The peer transport: how one daemon hands an envelope to another. Implemented by the gRPC peer
// streams (nso/grpc_transport.h) and by the in-process simulated network (nso/sim_network.h).
// Best effort: a message may be lost, duplicated or reordered; the protocols above retransmit.
#ifndef COHORT_NSO_TRANSPORT_H_
#define COHORT_NSO_TRANSPORT_H_

#include <cstdint>
#include <functional>

#include "proto/wire.pb.h"

namespace cohort::nso {

using NodeId = uint32_t;

class Transport {
 public:
  using Receiver = std::function<void(NodeId from, wire::Envelope envelope)>;

  virtual ~Transport() = default;

  // Best effort: never blocks on the peer, may drop.
  virtual void Send(NodeId to, wire::Envelope envelope) = 0;

  // The callback that receives every envelope addressed to this node.
  virtual void SetReceiver(Receiver receiver) = 0;

  // False when the transport knows `peer` is unreachable now (its stream is down). A hint only:
  // true does not mean a message will arrive.
  virtual bool Reachable(NodeId peer) const { return true; }
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TRANSPORT_H_
