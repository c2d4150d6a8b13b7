// The explorer's Model (test/explorer_engine.h) for a total order (atomic broadcast) among n
// members, whatever the order: Bounds::broadcasts messages, each broadcast by any member at any
// point. The order's own parts (how members are made, what a message is called, how it is
// corrupted, what bounds its rounds) come from Traits: test/sequencer_explorer.cc (the
// sequencer order), test/consensus_order_explorer.cc (the sequence of consensus instances).
//
// Checked in every state reached (atomic broadcast, Chandra & Toueg 1996, section 6):
//   total order: of any two members' delivery sequences one is a prefix of the other (a crashed
//     member's deliveries count: uniform);
//   integrity: a member delivers a message once, and only a message that was broadcast;
//   FIFO: a member delivers each origin's messages in the order they were broadcast, none
//     skipped;
//   end of view: a member whose order was frozen (Bounds::freezes) delivers nothing more.
// And termination, while no member is frozen (a member reported as asking beyond another's
// decided log is left out: it needs the state, membership's part): with no more faults (suspicions then exact), every member up delivers every
// message broadcast by a member up and every message any member delivered, if a majority is up.
#ifndef COHORT_TEST_BROADCAST_MODEL_H_
#define COHORT_TEST_BROADCAST_MODEL_H_

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "consensus/total_order.h"
#include "test/explorer_engine.h"

namespace cohort::explore {

// (origin, seq, payload) of a message broadcast or delivered.
using Sent = std::tuple<NodeId, uint64_t, std::string>;

struct Observed {
  static constexpr size_t kNotFrozen = static_cast<size_t>(-1);
  std::vector<Sent> broadcast;                // in the order they were broadcast
  std::vector<std::vector<Sent>> delivered;   // by member - 1, in delivery order
  std::vector<size_t> frozen_at;  // by member - 1: its deliveries when frozen, or kNotFrozen
  uint32_t freezes = 0;
  std::set<NodeId> need_state;  // reported as asking beyond a member's decided log

  bool Frozen(uint32_t i) const { return i < frozen_at.size() && frozen_at[i] != kNotFrozen; }
};

// Members 1..n of an order, each made with `options` (a Traits' Create).
template <class Order, class Options>
std::vector<Order> MakeMembers(uint32_t n, const Options& options) {
  std::vector<NodeId> ids;
  for (NodeId id = 1; id <= n; ++id) ids.push_back(id);
  std::vector<Order> members;
  for (NodeId id = 1; id <= n; ++id) members.emplace_back(id, ids, options);
  return members;
}

// Traits: type Order (a consensus::TotalOrder, copyable, with StateKey()), and static
//   std::vector<Order> Create(const Bounds&);
//   std::string MessageKey(const wire::Envelope&), Label(const wire::Envelope&);
//   bool Corrupt(wire::Envelope*);                  // false: left as it is
//   bool PastBound(const Order&, const Bounds&);
//   bool Decided(const Order&); uint32_t DecisionRound(const Order&);
template <class Traits>
class BroadcastModel {
 public:
  using Member = typename Traits::Order;
  using Message = wire::Envelope;
  using Record = Observed;
  using Sends = std::vector<std::pair<NodeId, Message>>;

  explicit BroadcastModel(const Bounds& bounds) : bounds_(bounds) {}

  std::vector<Member> Create() const { return Traits::Create(bounds_); }

  void Step(Member& member, Record& record, uint32_t i, NodeId from, const Message& message,
            uint64_t, Sends* out) const {
    consensus::Outbox outbox;
    member.Step(from, message, &outbox);
    Take(outbox, record, i, out);
  }
  void Tick(Member& member, Record& record, uint32_t i, uint64_t now_ms, Sends* out) const {
    consensus::Outbox outbox;
    member.Tick(now_ms, &outbox);
    Take(outbox, record, i, out);
  }
  void Suspect(Member& member, Record& record, uint32_t i, NodeId node, bool suspected,
               Sends* out) const {
    consensus::Outbox outbox;
    member.Suspect(node, suspected, &outbox);
    Take(outbox, record, i, out);
  }
  // Its own actions, while the bounds allow and its view goes on: broadcasting the next
  // message, and the end of its view (the runtime broadcasts nothing in a frozen order).
  std::vector<std::string> Actions(const Member&, const Record& record, uint32_t i) const {
    std::vector<std::string> actions;
    if (CanBroadcast(record, i)) {
      actions.push_back(absl::StrCat("broadcast m", record.broadcast.size() + 1, " at ", i + 1));
    }
    if (!record.Frozen(i) && record.freezes < bounds_.freezes) {
      actions.push_back(absl::StrCat("freeze ", i + 1));
    }
    return actions;
  }
  void Act(Member& member, Record& record, uint32_t i, size_t action, uint64_t,
           Sends* out) const {
    if (action == 0 && CanBroadcast(record, i)) {
      std::string payload = absl::StrCat("m", record.broadcast.size() + 1);
      consensus::Outbox outbox;
      const uint64_t seq = member.Broadcast(payload, &outbox);
      record.broadcast.emplace_back(i + 1, seq, std::move(payload));
      Take(outbox, record, i, out);
      return;
    }
    member.Freeze();
    ++record.freezes;
    record.delivered.resize(std::max<size_t>(record.delivered.size(), i + 1));
    record.frozen_at.resize(bounds_.n, Observed::kNotFrozen);
    record.frozen_at[i] = record.delivered[i].size();
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
    for (size_t at : record.frozen_at) absl::StrAppend(&key, "/", at);
    for (NodeId node : record.need_state) absl::StrAppend(&key, "s", node);
    return key;
  }
  std::string MessageKey(const Message& message) const { return Traits::MessageKey(message); }
  std::string Label(const Message& message) const { return Traits::Label(message); }
  bool Corrupt(Message* message, NodeId) const { return Traits::Corrupt(message); }

  std::string CheckSafety(const MemberView<Member>& members, Record& record) const {
    record.delivered.resize(members.size());
    for (uint32_t i = 0; i < members.size(); ++i) {
      const std::vector<Sent>& mine = record.delivered[i];
      if (record.Frozen(i) && mine.size() != record.frozen_at[i]) {
        return absl::StrCat("end of view: member ", i + 1, " delivered ", Name(mine.back()),
                            " after its order was frozen");
      }
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
  // message any member delivered. Not asked once a view ended (the next view's order would
  // take over).
  bool Terminated(const MemberView<Member>& members, const Record& record,
                  const std::vector<bool>& crashed) const {
    return record.freezes > 0 || Missing(members, record, crashed).empty();
  }
  bool Done(const MemberView<Member>& members, const Record& record,
            const std::vector<bool>& crashed) const {
    return record.broadcast.size() >= bounds_.broadcasts && record.freezes == 0 &&
           Missing(members, record, crashed).empty();
  }
  std::string Undone(const MemberView<Member>& members, const Record& record,
                     const std::vector<bool>& crashed) const {
    return absl::StrCat("not delivered: ", absl::StrJoin(Missing(members, record, crashed), ", "));
  }
  bool PastBound(const Member& member) const { return Traits::PastBound(member, bounds_); }
  bool CanTick(const Member&) const { return true; }
  bool Decided(const Member& member) const { return Traits::Decided(member); }
  uint32_t DecisionRound(const Member& member) const { return Traits::DecisionRound(member); }

 private:
  bool CanBroadcast(const Record& record, uint32_t i) const {
    return !record.Frozen(i) && record.broadcast.size() < bounds_.broadcasts;
  }
  static std::string Name(const Sent& sent) {
    return absl::StrCat(std::get<2>(sent), " (", std::get<0>(sent), ".", std::get<1>(sent), ")");
  }
  static std::string Names(const std::vector<Sent>& sents) {
    std::vector<std::string> names;
    for (const Sent& sent : sents) names.push_back(std::get<2>(sent));
    return absl::StrCat("[", absl::StrJoin(names, " "), "]");
  }
  static void Take(consensus::Outbox& outbox, Record& record, uint32_t i, Sends* out) {
    record.delivered.resize(std::max<size_t>(record.delivered.size(), i + 1));
    for (auto& delivery : outbox.deliveries) {
      record.delivered[i].emplace_back(delivery.origin, delivery.seq, delivery.payload);
    }
    for (auto& send : outbox.sends) out->emplace_back(send.to, send.TakeWhole());
    record.need_state.insert(outbox.beyond_log.begin(), outbox.beyond_log.end());
  }
  std::vector<std::string> Missing(const MemberView<Member>& members, const Record& record,
                                   const std::vector<bool>& crashed) const {
    std::set<Sent> wanted;
    for (const Sent& sent : record.broadcast) {
      if (!crashed[std::get<0>(sent) - 1]) wanted.insert(sent);
    }
    for (const auto& delivered : record.delivered) wanted.insert(delivered.begin(), delivered.end());
    std::vector<std::string> missing;
    for (uint32_t i = 0; i < members.size(); ++i) {
      if (crashed[i] || record.need_state.count(i + 1) > 0) continue;  // state transfer's part
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

}  // namespace cohort::explore

#endif  // COHORT_TEST_BROADCAST_MODEL_H_
