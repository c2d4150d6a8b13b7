#include "test/consensus_order_explorer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "consensus/consensus_order.h"
#include "test/broadcast_model.h"

namespace cohort::explore {
namespace {

using Kind = wire::ConsensusMessage;

// The consensus order's parts of the broadcast model (test/broadcast_model.h).
struct ConsensusOrderTraits {
  using Order = consensus::ConsensusOrder;

  static std::vector<Order> Create(const Bounds& bounds) {
    consensus::ConsensusOrderOptions options;
    options.consensus = bounds.consensus;
    if (bounds.decided_log_max > 0) options.decided_log_max = bounds.decided_log_max;
    return MakeMembers<Order>(bounds.n, options);
  }
  static std::string MessageKey(const wire::Envelope& message) {
    if (!message.has_consensus()) return message.SerializeAsString();
    wire::Envelope content = message;
    content.mutable_consensus()->clear_steps();  // only counts (ChandraToueg::StateKey)
    return content.SerializeAsString();
  }
  static std::string Label(const wire::Envelope& message) {
    if (message.has_data()) {
      return absl::StrCat("DIFFUSION x", message.data().batch().messages_size());
    }
    if (!message.has_consensus()) return "(not an order message)";
    const Kind& body = message.consensus();
    return absl::StrCat(Kind::Kind_Name(body.kind()), " i", body.instance(), " r", body.round(),
                        " x", body.value().messages_size());
  }
  // A PROPOSAL's first message rewritten: no member broadcast it.
  static bool Corrupt(wire::Envelope* message) {
    if (!message->has_consensus() || message->consensus().kind() != Kind::PROPOSAL ||
        message->consensus().value().messages_size() == 0) {
      return false;
    }
    message->mutable_consensus()->mutable_value()->mutable_messages(0)->set_payload("forged");
    return true;
  }
  static bool PastBound(const Order& member, const Bounds& bounds) {
    return member.round() > bounds.max_round || member.next_instance() > bounds.max_instances;
  }
  static bool Decided(const Order& member) { return member.next_instance() > 1; }
  // The round in which the last instance this member decided was decided (0: no longer kept).
  static uint32_t DecisionRound(const Order& member) {
    const consensus::ChandraToueg* last = member.instance(member.next_instance() - 1);
    return last == nullptr ? 0 : last->decision_round();
  }
};

}  // namespace

Report ExploreConsensusOrder(const Bounds& bounds) {
  return Engine<BroadcastModel<ConsensusOrderTraits>>(bounds,
                                                      BroadcastModel<ConsensusOrderTraits>(bounds))
      .Run();
}

}  // namespace cohort::explore
