#include "nso/kept_envelopes.h"

#include "nso/spare_payloads.h"

namespace cohort::nso {
namespace {

// Envelope::Clear() would delete the body (a oneof's object goes with it), and a consensus
// message's Clear() its batch (a proto3 submessage's object goes with it): each is taken out,
// emptied on its own (a batch keeps its data messages and their strings), and put back. The body
// is set again before the merge, as the envelope's bytes have it (ReadEnvelopeFrame's first body
// field), so the parsed envelope is the one a fresh parse gives: a later body field in the bytes
// replaces it as it would. A consensus or sequencer message's batch is left present but empty:
// no reader asks whether one has a batch (a DECIDED, an ACK has none), only what it holds.
void EmptyKeepingReply(wire::Envelope* envelope) {
  wire::Reply* reply = envelope->has_reply() ? envelope->release_reply() : new wire::Reply;
  envelope->Clear();
  reply->Clear();
  SparePayloads().Refill(reply->mutable_payload());  // the last one's went on with its call
  envelope->set_allocated_reply(reply);
}

// A request from outside, moved on to be ordered: the objects of one already ordered instead
// (SpareOutsideRequests), its payload refilled if it has none.
void EmptyKeepingForward(wire::Envelope* envelope) {
  wire::Request* forward = envelope->has_forward() ? envelope->release_forward() : new wire::Request;
  envelope->Clear();
  SpareOutsideRequests().Refill(forward);
  forward->Clear();
  SparePayloads().Refill(forward->mutable_payload());
  envelope->set_allocated_forward(forward);
}

void EmptyKeepingManagedReply(wire::Envelope* envelope) {
  wire::ManagedReply* managed =
      envelope->has_managed_reply() ? envelope->release_managed_reply() : new wire::ManagedReply;
  envelope->Clear();
  // Each reply's payload went on with the call's result: refilled before the repeated field is
  // cleared (it keeps its cleared replies, and their strings, for the next parse).
  for (wire::Reply& reply : *managed->mutable_replies()) {
    reply.Clear();
    SparePayloads().Refill(reply.mutable_payload());
  }
  managed->Clear();
  envelope->set_allocated_managed_reply(managed);
}

// A body's batch emptied apart: the body's Clear() would delete it.
template <typename Body>
void EmptyKeepingBatch(Body* body, bool has_batch, wire::MessageBatch* (Body::*release)(),
                       void (Body::*set_allocated)(wire::MessageBatch*)) {
  wire::MessageBatch* batch = has_batch ? (body->*release)() : nullptr;
  body->Clear();
  if (batch == nullptr) return;
  batch->Clear();  // its data messages and their strings are kept for the next (a repeated field)
  (body->*set_allocated)(batch);
}

void EmptyKeepingConsensus(wire::Envelope* envelope) {
  wire::ConsensusMessage* consensus =
      envelope->has_consensus() ? envelope->release_consensus() : new wire::ConsensusMessage;
  envelope->Clear();
  EmptyKeepingBatch(consensus, consensus->has_value(), &wire::ConsensusMessage::release_value,
                    &wire::ConsensusMessage::set_allocated_value);
  envelope->set_allocated_consensus(consensus);
}

void EmptyKeepingSequencer(wire::Envelope* envelope) {
  wire::SequencerMessage* sequencer =
      envelope->has_sequencer() ? envelope->release_sequencer() : new wire::SequencerMessage;
  envelope->Clear();
  EmptyKeepingBatch(sequencer, sequencer->has_batch(), &wire::SequencerMessage::release_batch,
                    &wire::SequencerMessage::set_allocated_batch);
  envelope->set_allocated_sequencer(sequencer);
}

}  // namespace

wire::Envelope* KeptEnvelopes::For(uint32_t body_field) {
  switch (body_field) {
    case wire::Envelope::kReplyFieldNumber:
      EmptyKeepingReply(&reply_);
      return &reply_;
    case wire::Envelope::kConsensusFieldNumber:
      EmptyKeepingConsensus(&consensus_);
      return &consensus_;
    case wire::Envelope::kSequencerFieldNumber:
      EmptyKeepingSequencer(&sequencer_);
      return &sequencer_;
    case wire::Envelope::kForwardFieldNumber:
      EmptyKeepingForward(&forward_);
      return &forward_;
    case wire::Envelope::kManagedReplyFieldNumber:
      EmptyKeepingManagedReply(&managed_reply_);
      return &managed_reply_;
    default:
      return nullptr;
  }
}

}  // namespace cohort::nso
