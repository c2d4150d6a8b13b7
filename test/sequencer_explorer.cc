#include "test/sequencer_explorer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "consensus/sequencer_order.h"
#include "test/broadcast_model.h"

namespace cohort::explore {
namespace {

using Kind = wire::SequencerMessage;

// The sequencer order's parts of the broadcast model (test/broadcast_model.h).
struct SequencerTraits {
  using Order = consensus::SequencerOrder;

  static std::vector<Order> Create(const Bounds& bounds) {
    consensus::SequencerOrderOptions options;
    options.optimisation_3 = bounds.consensus.optimisation_3;
    options.retransmit_ms = bounds.consensus.retransmit_ms;
    return MakeMembers<Order>(bounds.n, options);
  }
  static std::string MessageKey(const wire::Envelope& message) {
    return message.SerializeAsString();
  }
  static std::string Label(const wire::Envelope& message) {
    if (!message.has_sequencer()) return "(not a sequencer message)";
    const Kind& body = message.sequencer();
    return absl::StrCat(Kind::Kind_Name(body.kind()), " e", body.epoch(), " @",
                        body.first_order(), " x", body.batch().messages_size());
  }
  // An ORDERED entry's payload rewritten: no member broadcast it.
  static bool Corrupt(wire::Envelope* message) {
    if (!message->has_sequencer() || message->sequencer().kind() != Kind::ORDERED ||
        message->sequencer().batch().messages_size() == 0) {
      return false;
    }
    message->mutable_sequencer()->mutable_batch()->mutable_messages(0)->set_payload("forged");
    return true;
  }
  static bool PastBound(const Order& member, const Bounds& bounds) {
    return member.epoch() > bounds.max_round;
  }
  static bool Decided(const Order& member) { return member.committed() > 0; }
  static uint32_t DecisionRound(const Order& member) { return member.epoch(); }
};

}  // namespace

Report ExploreSequencer(const Bounds& bounds) {
  return Engine<BroadcastModel<SequencerTraits>>(bounds, BroadcastModel<SequencerTraits>(bounds))
      .Run();
}

}  // namespace cohort::explore
