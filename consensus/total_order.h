// The interface of a group's total-order protocol (atomic broadcast), as a pure state machine.
//
// Two implementations: symmetric order on a sequence of Chandra-Toueg consensus instances that each
// decide a batch (004 sections 2.3 and 3.2), and asymmetric order through a sequencer (003 section 3).
// Neither touches sockets, threads, clocks or randomness: time arrives through Tick(now_ms), failure
// suspicions through Suspect(), messages through Step(). Everything to do comes back in an Outbox.
#ifndef COHORT_CONSENSUS_TOTAL_ORDER_H_
#define COHORT_CONSENSUS_TOTAL_ORDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "consensus/spare.h"
#include "proto/wire.pb.h"

namespace cohort::consensus {

using NodeId = uint32_t;

// A message A-delivered in total order. (origin, seq) identifies it.
struct Delivery {
  NodeId origin = 0;
  uint64_t seq = 0;
  std::string payload;
};

// A batch held apart from its envelope and shared by several sends (a proposal to n - 1
// members, the sequencer's ORDERED to each member, a diffusion): one copy, not one per peer. The
// envelope its receiver parses has the batch at `field` (CopyInto). The raw TCP transport writes
// it into each peer's bytes from the shared copy (nso/transport.h, SendWithBatch; issue 7).
struct SharedBatch {
  enum class Field { kConsensusValue, kSequencerBatch, kDiffusionBatch };

  std::shared_ptr<const wire::MessageBatch> batch;  // null: none
  Field field = Field::kConsensusValue;

  explicit operator bool() const { return batch != nullptr; }
  // Where the batch goes: (the envelope's field, that message's batch field), protobuf numbers.
  std::pair<uint32_t, uint32_t> FieldNumbers() const {
    switch (field) {
      case Field::kSequencerBatch:
        return {wire::Envelope::kSequencerFieldNumber, wire::SequencerMessage::kBatchFieldNumber};
      case Field::kDiffusionBatch:
        return {wire::Envelope::kDataFieldNumber, wire::Diffusion::kBatchFieldNumber};
      case Field::kConsensusValue:
        break;
    }
    return {wire::Envelope::kConsensusFieldNumber, wire::ConsensusMessage::kValueFieldNumber};
  }
  // Copies the batch into `envelope` at its place.
  void CopyInto(wire::Envelope* envelope) const {
    if (batch == nullptr) return;
    switch (field) {
      case Field::kSequencerBatch: *envelope->mutable_sequencer()->mutable_batch() = *batch; break;
      case Field::kDiffusionBatch: *envelope->mutable_data()->mutable_batch() = *batch; break;
      case Field::kConsensusValue: *envelope->mutable_consensus()->mutable_value() = *batch; break;
    }
  }
};

// An envelope to one member, with its batch held apart when shared (SharedBatch). A consensus
// or sequencer message, the order's usual sends, is held as the body alone, not in an envelope
// object (whose body would be allocated per message): the runtime sends it in an envelope it
// reuses (nso/group.cc, Group::SendInView; issue 7). The envelope's header is the runtime's.
struct OutboxSend {
  enum class Body { kEnvelope, kConsensus, kSequencer };

  OutboxSend(NodeId to, wire::Envelope envelope, SharedBatch shared = {})
      : to(to), envelope(std::move(envelope)), shared(std::move(shared)) {}
  OutboxSend(NodeId to, wire::ConsensusMessage&& consensus, SharedBatch shared = {})
      : to(to), body(Body::kConsensus), consensus(std::move(consensus)), shared(std::move(shared)) {}
  OutboxSend(NodeId to, wire::SequencerMessage&& sequencer, SharedBatch shared = {})
      : to(to), body(Body::kSequencer), sequencer(std::move(sequencer)), shared(std::move(shared)) {}

  // Puts a body held alone into `envelope` (Body::kEnvelope after).
  void PutBodyInEnvelope() {
    if (body == Body::kConsensus) *envelope.mutable_consensus() = std::move(consensus);
    if (body == Body::kSequencer) *envelope.mutable_sequencer() = std::move(sequencer);
    body = Body::kEnvelope;
  }
  // The envelope as its receiver parses it (the body and the shared batch in it).
  wire::Envelope TakeWhole() {
    PutBodyInEnvelope();
    shared.CopyInto(&envelope);
    shared = {};
    return std::move(envelope);
  }
  bool has_consensus() const {
    return body == Body::kConsensus || (body == Body::kEnvelope && envelope.has_consensus());
  }
  const wire::ConsensusMessage& consensus_message() const {
    return body == Body::kConsensus ? consensus : envelope.consensus();
  }
  bool has_sequencer() const {
    return body == Body::kSequencer || (body == Body::kEnvelope && envelope.has_sequencer());
  }
  const wire::SequencerMessage& sequencer_message() const {
    return body == Body::kSequencer ? sequencer : envelope.sequencer();
  }

  NodeId to;
  Body body = Body::kEnvelope;
  wire::Envelope envelope;           // Body::kEnvelope
  wire::ConsensusMessage consensus;  // Body::kConsensus
  wire::SequencerMessage sequencer;  // Body::kSequencer
  SharedBatch shared;
};

// Deliveries of one step: a sequential call's step delivers one or two, inline (issue 7: no
// per-message allocation, omniORB2, 001 sections 5-6).
using Deliveries = absl::InlinedVector<Delivery, 2>;

// What a protocol step asks the runtime to do. The runtime sends `sends` (each envelope body is
// one of consensus / sequencer / data; the runtime fills version, group, sender and view), then
// hands `deliveries` to the application in this order.
struct Outbox {
  // Inline up to a proposal's or a DECISION's sends at n = 9: no allocation per step.
  absl::InlinedVector<OutboxSend, 8> sends;
  Deliveries deliveries;
  // Members that asked for decisions this member no longer holds: they cannot catch up from the
  // order and need the state (the runtime re-admits them by a view change with state transfer).
  std::vector<NodeId> beyond_log;
};

// Counters kept per group (issue: counters for every consensus).
struct OrderCounters {
  uint64_t instances_decided = 0;
  uint64_t rounds_total = 0;             // sum over decided instances of the deciding round
  uint64_t messages_sent_estimate = 0;
  uint64_t messages_sent_proposal = 0;
  uint64_t messages_sent_ack = 0;
  uint64_t messages_sent_nack = 0;
  uint64_t messages_sent_decision = 0;
  uint64_t messages_sent_decided = 0;    // DECISIONs without the value, to members that ACKed
  uint64_t messages_sent_data = 0;       // diffusion / forward / ordered
  uint64_t messages_delivered = 0;

  // Field by field: a group's counts over its views' orders (Group::order_counters), and a
  // daemon's over the groups it removed (Node::removed_group_totals).
  OrderCounters& operator+=(const OrderCounters& more) {
    instances_decided += more.instances_decided;
    rounds_total += more.rounds_total;
    messages_sent_estimate += more.messages_sent_estimate;
    messages_sent_proposal += more.messages_sent_proposal;
    messages_sent_ack += more.messages_sent_ack;
    messages_sent_nack += more.messages_sent_nack;
    messages_sent_decision += more.messages_sent_decision;
    messages_sent_decided += more.messages_sent_decided;
    messages_sent_data += more.messages_sent_data;
    messages_delivered += more.messages_delivered;
    return *this;
  }
};
// (A field added above must be added to operator+= too.)
static_assert(sizeof(OrderCounters) == 10 * sizeof(uint64_t), "OrderCounters::operator+=");

class TotalOrder {
 public:
  virtual ~TotalOrder() = default;

  // A-broadcast `payload` from this node. Returns the seq assigned to it (origin = self).
  virtual uint64_t Broadcast(const std::string& payload, Outbox* out) = 0;

  // A protocol message from `from` (its envelope's body). Malformed or stale messages are ignored.
  virtual void Step(NodeId from, const wire::Envelope& message, Outbox* out) = 0;

  // Time passes; `now_ms` never decreases. Retransmissions and optimisation-1 delays happen here.
  virtual void Tick(uint64_t now_ms, Outbox* out) = 0;

  // The failure detector's aggressive (suspicion) timeout fired for `node`, or was withdrawn.
  virtual void Suspect(NodeId node, bool suspected, Outbox* out) = 0;

  // The view ended (membership ordered a view change): from now on the protocol decides nothing
  // new. It only answers lagging members with what it already decided, so that they too reach
  // the end of the view; a frozen order taking part in new decisions could let a set of stale or
  // restarted members order messages no current view knows about.
  virtual void Freeze() = 0;

  // True while messages wait to be ordered or delivered (event-driven groups use it, 003 section 3).
  virtual bool HasPending() const = 0;

  virtual const OrderCounters& counters() const = 0;

  // One line on where the protocol stands (for the daemon's "ordering stalled" warning).
  virtual std::string Describe() const = 0;

  // The runtime is done with these deliveries (it parsed them): their payloads' memory holds the
  // next deliveries' copies (issue 7: no per-message allocation). Their contents are dropped.
  void GiveBack(Deliveries* done) {
    for (Delivery& delivery : *done) GiveBack(&delivery);
  }
  void GiveBack(Delivery* done) { spare_payloads_.Keep(std::move(done->payload)); }
  // Strings whose memory the order and its runtime reuse for payloads (memory, not state: a
  // copy of the order starts without them).
  SpareStrings& spare_payloads() { return spare_payloads_; }

 protected:
  SpareStrings spare_payloads_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_TOTAL_ORDER_H_
