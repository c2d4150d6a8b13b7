#include "test/consensus_explorer.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::explore {
namespace {

using consensus::ChandraToueg;
using consensus::ConsensusSends;
using Kind = wire::ConsensusMessage;

wire::MessageBatch InitialValue(uint32_t member) {
  wire::MessageBatch value;
  for (uint32_t seq = 1; seq <= member; ++seq) {
    wire::DataMessage* message = value.add_messages();
    message->set_origin(member);
    message->set_seq(seq);
    message->set_payload(absl::StrCat("v", member));
  }
  return value;
}

// One Chandra-Toueg instance per member (test/explorer_engine.h's Model).
class ConsensusModel {
 public:
  using Member = ChandraToueg;
  using Message = wire::ConsensusMessage;
  using Record = std::vector<std::optional<std::string>>;  // each member's decision, once made
  using Sends = std::vector<std::pair<NodeId, Message>>;

  explicit ConsensusModel(const Bounds& bounds) : bounds_(bounds) {
    for (uint32_t i = 1; i <= bounds_.n; ++i) {
      initial_.push_back(InitialValue(i).SerializeAsString());
    }
  }

  std::vector<Member> Create() const {
    std::vector<NodeId> ids;
    for (uint32_t i = 1; i <= bounds_.n; ++i) ids.push_back(i);
    std::vector<Member> members;
    for (uint32_t i = 1; i <= bounds_.n; ++i) {
      members.emplace_back(i, ids, /*instance=*/1, bounds_.consensus, std::set<NodeId>{},
                           /*first_coordinator=*/0);
    }
    return members;
  }

  void Step(Member& member, Record&, uint32_t i, NodeId from, const Message& message,
            uint64_t now_ms, Sends* out) const {
    // consensus/consensus_order.cc: the first message of an instance starts it at its receiver.
    Start(member, i, now_ms, out);
    ConsensusSends sends;
    member.SetNow(now_ms);
    member.Step(from, message, &sends);
    Append(sends, out);
  }
  void Tick(Member& member, Record&, uint32_t, uint64_t now_ms, Sends* out) const {
    ConsensusSends sends;
    member.Tick(now_ms, &sends);
    Append(sends, out);
  }
  void Suspect(Member& member, Record&, uint32_t, NodeId node, bool suspected,
               Sends* out) const {
    ConsensusSends sends;
    member.Suspect(node, suspected, &sends);
    Append(sends, out);
  }
  // Its own action: proposing its initial value, until it has started.
  std::vector<std::string> Actions(const Member& member, const Record&, uint32_t i) const {
    if (Started(member)) return {};
    return {absl::StrCat("propose ", i + 1)};
  }
  void Act(Member& member, Record&, uint32_t i, size_t, uint64_t now_ms, Sends* out) const {
    Start(member, i, now_ms, out);
  }
  void Settle(Member& member, Record&, uint32_t i, uint64_t now_ms, Sends* out) const {
    Start(member, i, now_ms, out);
  }

  std::string Key(const Member& member) const { return member.StateKey(); }
  std::string RecordKey(const Record&) const { return {}; }  // the members' decisions
  std::string MessageKey(const Message& message) const {
    Message content = message;
    content.clear_steps();  // only counts (ChandraToueg::StateKey)
    return content.SerializeAsString();
  }
  std::string Label(const Message& message) const {
    return absl::StrCat(Kind::Kind_Name(message.kind()), " r", message.round());
  }
  // Another member's initial value, not the proposer's nor (if it can be) the receiver's.
  bool Corrupt(Message* message, NodeId to) const {
    if (message->kind() != Kind::PROPOSAL) return false;
    const std::string current = message->value().SerializeAsString();
    for (uint32_t m = 1; m <= bounds_.n; ++m) {
      if (initial_[m - 1] != current && m != to) {
        *message->mutable_value() = InitialValue(m);
        return true;
      }
    }
    return false;
  }

  std::string CheckSafety(const MemberView<Member>& members, Record& decided) const {
    decided.resize(members.size());
    for (uint32_t i = 0; i < members.size(); ++i) {
      const ChandraToueg& member = members[i];
      if (decided[i].has_value()) {
        if (!member.decided() || member.decision().SerializeAsString() != *decided[i]) {
          return absl::StrCat("integrity: member ", i + 1, " changed its decision");
        }
        continue;
      }
      if (!member.decided()) continue;
      const std::string value = member.decision().SerializeAsString();
      if (std::find(initial_.begin(), initial_.end(), value) == initial_.end()) {
        return absl::StrCat("validity: member ", i + 1, " decided a value no member proposed");
      }
      for (uint32_t j = 0; j < members.size(); ++j) {
        if (decided[j].has_value() && *decided[j] != value) {
          return absl::StrCat("agreement: member ", i + 1, " decided ", ValueName(value),
                              " in round ", member.decision_round(), ", member ", j + 1,
                              " decided ", ValueName(*decided[j]));
        }
      }
      decided[i] = value;
    }
    return {};
  }
  // Every member up decided: nothing left to decide, only to repeat.
  bool Done(const MemberView<Member>& members, const Record& record,
            const std::vector<bool>& crashed) const {
    return Terminated(members, record, crashed);
  }
  bool Terminated(const MemberView<Member>& members, const Record&,
            const std::vector<bool>& crashed) const {
    for (uint32_t i = 0; i < members.size(); ++i) {
      if (!crashed[i] && !members[i].decided()) return false;
    }
    return true;
  }
  std::string Undone(const MemberView<Member>& members, const Record&,
                     const std::vector<bool>& crashed) const {
    std::vector<std::string> undecided;
    for (uint32_t i = 0; i < members.size(); ++i) {
      if (!crashed[i] && !members[i].decided()) {
        undecided.push_back(absl::StrCat(i + 1, " (round ", members[i].round(), ")"));
      }
    }
    return absl::StrCat("undecided: ", absl::StrJoin(undecided, ", "));
  }
  bool PastBound(const Member& member) const { return member.round() > bounds_.max_round; }
  bool CanTick(const Member& member) const { return Started(member); }
  bool Decided(const Member& member) const { return member.decided(); }
  uint32_t DecisionRound(const Member& member) const { return member.decision_round(); }

 private:
  static bool Started(const Member& member) {
    // A member that has not started is in round 0 (Propose enters round 1 at least).
    return member.round() > 0 || member.decided();
  }
  static void Start(Member& member, uint32_t i, uint64_t now_ms, Sends* out) {
    if (Started(member)) return;
    ConsensusSends sends;
    member.Propose(InitialValue(i + 1), now_ms, &sends);
    Append(sends, out);
  }
  static void Append(ConsensusSends& sends, Sends* out) {
    for (auto& send : sends) out->emplace_back(send.to, send.WithValue());
  }
  std::string ValueName(const std::string& value) const {
    for (uint32_t m = 0; m < bounds_.n; ++m) {
      if (initial_[m] == value) return absl::StrCat("v", m + 1);
    }
    return "(unknown)";
  }

  const Bounds bounds_;
  std::vector<std::string> initial_;  // serialised initial values, by member - 1
};

}  // namespace

Report Explore(const Bounds& bounds) {
  return Engine<ConsensusModel>(bounds, ConsensusModel(bounds)).Run();
}

}  // namespace cohort::explore
