#include "test/sequencer_explorer.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "consensus/sequencer_order.h"

namespace cohort::explore {
namespace {

using consensus::Outbox;
using consensus::SequencerOrder;
using Kind = wire::SequencerMessage;

// (origin, seq, payload) of a message broadcast or delivered.
using Sent = std::tuple<NodeId, uint64_t, std::string>;

struct Observed {
  std::vector<Sent> broadcast;                // in the order they were broadcast
  std::vector<std::vector<Sent>> delivered;   // by member - 1, in delivery order
};

// The sequencer order at every member (test/explorer_engine.h's Model).
class SequencerModel {
 public:
  using Member = SequencerOrder;
  using Message = wire::Envelope;
  using Record = Observed;
  using Sends = std::vector<std::pair<NodeId, Message>>;

  explicit SequencerModel(const Bounds& bounds) : bounds_(bounds) {}

  std::vector<Member> Create() const {
    consensus::SequencerOrderOptions options;
    options.optimisation_3 = bounds_.consensus.optimisation_3;
    options.retransmit_ms = bounds_.consensus.retransmit_ms;
    std::vector<NodeId> ids;
    for (uint32_t i = 1; i <= bounds_.n; ++i) ids.push_back(i);
    std::vector<Member> members;
    for (uint32_t i = 1; i <= bounds_.n; ++i) members.emplace_back(i, ids, options);
    return members;
  }

  void Step(Member& member, Record& record, uint32_t i, NodeId from, const Message& message,
            uint64_t, Sends* out) const {
    Outbox outbox;
    member.Step(from, message, &outbox);
    Take(outbox, record, i, out);
  }
  void Tick(Member& member, Record& record, uint32_t i, uint64_t now_ms, Sends* out) const {
    Outbox outbox;
    member.Tick(now_ms, &outbox);
    Take(outbox, record, i, out);
  }
  void Suspect(Member& member, Record& record, uint32_t i, NodeId node, bool suspected,
               Sends* out) const {
    Outbox outbox;
    member.Suspect(node, suspected, &outbox);
    Take(outbox, record, i, out);
  }
  // Its own action: broadcasting the next message, while the bound allows.
  std::vector<std::string> Actions(const Member&, const Record& record, uint32_t i) const {
    if (record.broadcast.size() >= bounds_.broadcasts) return {};
    return {absl::StrCat("broadcast m", record.broadcast.size() + 1, " at ", i + 1)};
  }
  void Act(Member& member, Record& record, uint32_t i, size_t, uint64_t, Sends* out) const {
    std::string payload = absl::StrCat("m", record.broadcast.size() + 1);
    Outbox outbox;
    const uint64_t seq = member.Broadcast(payload, &outbox);
    record.broadcast.emplace_back(i + 1, seq, std::move(payload));
    Take(outbox, record, i, out);
  }
  void Settle(Member&, Record&, uint32_t, uint64_t, Sends*) const {}

  std::string Key(const Member& member) const { return member.StateKey(); }
  std::string RecordKey(const Record& record) const {
    std::string key;
    auto put = [&key](const Sent& sent) {
      absl::StrAppend(&key, std::get<0>(sent), ".", std::get<1>(sent), ".", std::get<2>(sent),
                      ",");
    };
    for (const Sent& sent : record.broadcast) put(sent);
    for (const auto& delivered : record.delivered) {
      key.push_back('|');
      for (const Sent& sent : delivered) put(sent);
    }
    return key;
  }
  std::string MessageKey(const Message& message) const { return message.SerializeAsString(); }
  std::string Label(const Message& message) const {
    if (!message.has_sequencer()) return "(not a sequencer message)";
    const Kind& body = message.sequencer();
    return absl::StrCat(Kind::Kind_Name(body.kind()), " e", body.epoch(), " @",
                        body.first_order(), " x", body.batch().messages_size());
  }
  // An ORDERED entry's payload rewritten: no member broadcast it.
  bool Corrupt(Message* message, NodeId) const {
    if (!message->has_sequencer() || message->sequencer().kind() != Kind::ORDERED ||
        message->sequencer().batch().messages_size() == 0) {
      return false;
    }
    message->mutable_sequencer()->mutable_batch()->mutable_messages(0)->set_payload("forged");
    return true;
  }

  std::string CheckSafety(const std::vector<Member>& members, Record& record) const {
    record.delivered.resize(members.size());
    for (uint32_t i = 0; i < members.size(); ++i) {
      const std::vector<Sent>& mine = record.delivered[i];
      std::set<std::pair<NodeId, uint64_t>> seen;
      std::map<NodeId, uint64_t> last_seq;
      for (const Sent& sent : mine) {
        const auto id = std::make_pair(std::get<0>(sent), std::get<1>(sent));
        if (!seen.insert(id).second) {
          return absl::StrCat("integrity: member ", i + 1, " delivered ", Name(sent), " twice");
        }
        if (std::find(record.broadcast.begin(), record.broadcast.end(), sent) ==
            record.broadcast.end()) {
          return absl::StrCat("integrity: member ", i + 1, " delivered ", Name(sent),
                              ", never broadcast");
        }
        if (std::get<1>(sent) != last_seq[std::get<0>(sent)] + 1) {
          return absl::StrCat("FIFO: member ", i + 1, " delivered ", Name(sent), " after seq ",
                              last_seq[std::get<0>(sent)], " of its origin");
        }
        last_seq[std::get<0>(sent)] = std::get<1>(sent);
      }
      for (uint32_t j = 0; j < i; ++j) {
        const std::vector<Sent>& theirs = record.delivered[j];
        const size_t common = std::min(mine.size(), theirs.size());
        if (!std::equal(mine.begin(), mine.begin() + common, theirs.begin())) {
          return absl::StrCat("total order: member ", i + 1, " delivered ", Names(mine),
                              ", member ", j + 1, " delivered ", Names(theirs));
        }
      }
    }
    return {};
  }
  // Every member up delivered what it must: each message broadcast by a member up, and each
  // message any member delivered.
  bool Terminated(const std::vector<Member>& members, const Record& record,
                  const std::vector<bool>& crashed) const {
    return Missing(members, record, crashed).empty();
  }
  bool Done(const std::vector<Member>& members, const Record& record,
            const std::vector<bool>& crashed) const {
    return record.broadcast.size() >= bounds_.broadcasts && Terminated(members, record, crashed);
  }
  std::string Undone(const std::vector<Member>& members, const Record& record,
                     const std::vector<bool>& crashed) const {
    return absl::StrCat("not delivered: ", absl::StrJoin(Missing(members, record, crashed), ", "));
  }
  bool PastBound(const Member& member) const { return member.epoch() > bounds_.max_round; }
  bool CanTick(const Member&) const { return true; }
  bool Decided(const Member& member) const { return member.committed() > 0; }
  uint32_t DecisionRound(const Member& member) const { return member.epoch(); }

 private:
  static std::string Name(const Sent& sent) {
    return absl::StrCat(std::get<2>(sent), " (", std::get<0>(sent), ".", std::get<1>(sent), ")");
  }
  static std::string Names(const std::vector<Sent>& sents) {
    std::vector<std::string> names;
    for (const Sent& sent : sents) names.push_back(std::get<2>(sent));
    return absl::StrCat("[", absl::StrJoin(names, " "), "]");
  }
  static void Take(Outbox& outbox, Record& record, uint32_t i, Sends* out) {
    record.delivered.resize(std::max<size_t>(record.delivered.size(), i + 1));
    for (auto& delivery : outbox.deliveries) {
      record.delivered[i].emplace_back(delivery.origin, delivery.seq, delivery.payload);
    }
    for (auto& send : outbox.sends) out->push_back(std::move(send));
  }
  std::vector<std::string> Missing(const std::vector<Member>& members, const Record& record,
                                   const std::vector<bool>& crashed) const {
    std::set<Sent> wanted;
    for (const Sent& sent : record.broadcast) {
      if (!crashed[std::get<0>(sent) - 1]) wanted.insert(sent);
    }
    for (const auto& delivered : record.delivered) wanted.insert(delivered.begin(), delivered.end());
    std::vector<std::string> missing;
    for (uint32_t i = 0; i < members.size(); ++i) {
      if (crashed[i]) continue;
      const std::vector<Sent> none;
      const std::vector<Sent>& mine = i < record.delivered.size() ? record.delivered[i] : none;
      for (const Sent& sent : wanted) {
        if (std::find(mine.begin(), mine.end(), sent) == mine.end()) {
          missing.push_back(absl::StrCat(Name(sent), " at ", i + 1));
        }
      }
    }
    return missing;
  }

  const Bounds bounds_;
};

}  // namespace

Report ExploreSequencer(const Bounds& bounds) {
  return Engine<SequencerModel>(bounds, SequencerModel(bounds)).Run();
}

}  // namespace cohort::explore
