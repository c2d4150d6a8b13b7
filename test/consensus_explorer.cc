#include "test/consensus_explorer.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cohort::explore {
namespace {

using consensus::ChandraToueg;
using consensus::ConsensusSends;
using consensus::NodeId;
using Kind = wire::ConsensusMessage;

// A message on its way. `key` identifies it for the state's fingerprint: its route and content
// without `steps` (which only counts, see ChandraToueg::StateKey).
struct InFlight {
  NodeId from = 0;
  NodeId to = 0;
  wire::ConsensusMessage message;
  std::string key;
};

struct World {
  std::vector<ChandraToueg> members;  // index i is member i + 1
  std::vector<bool> crashed;
  std::vector<std::vector<bool>> suspects;  // suspects[i][j]: member i + 1 suspects j + 1
  std::vector<uint64_t> clock_ms;
  std::vector<InFlight> network;  // sorted by key: equal messages side by side
  std::vector<std::optional<std::string>> decided;  // each member's decision once it decides
  uint32_t crashes = 0, suspicion_changes = 0, ticks = 0, drops = 0, corruptions = 0;
};

std::string KindName(int kind) { return Kind::Kind_Name(static_cast<Kind::Kind>(kind)); }

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

class Explorer {
 public:
  explicit Explorer(const Bounds& bounds) : bounds_(bounds) {
    for (uint32_t i = 1; i <= bounds_.n; ++i) {
      initial_.push_back(InitialValue(i).SerializeAsString());
    }
  }

  Report Run() {
    World world;
    std::vector<NodeId> ids;
    for (uint32_t i = 1; i <= bounds_.n; ++i) ids.push_back(i);
    for (uint32_t i = 1; i <= bounds_.n; ++i) {
      world.members.emplace_back(i, ids, /*instance=*/1, bounds_.consensus, std::set<NodeId>{},
                                 /*counters=*/nullptr, /*first_coordinator=*/0);
    }
    world.crashed.assign(bounds_.n, false);
    world.suspects.assign(bounds_.n, std::vector<bool>(bounds_.n, false));
    world.clock_ms.assign(bounds_.n, 0);
    world.decided.assign(bounds_.n, std::nullopt);
    report_.complete = Visit(world);
    return report_;
  }

 private:
  // Depth first; false once the exploration stops (a violation, or max_states).
  bool Visit(const World& world) {
    if (!report_.violation.empty()) return false;
    if (!visited_.insert(Fingerprint(world)).second) return true;
    if (++report_.states > bounds_.max_states) return false;
    if (std::any_of(world.decided.begin(), world.decided.end(),
                    [](const auto& value) { return value.has_value(); })) {
      ++report_.decided_states;
    }
    if (world.network.empty() || report_.states % bounds_.completion_every == 0) {
      if (!CheckTermination(world)) return false;
    }
    bool all_decided = true;  // every member up: nothing left to decide, only to repeat
    for (uint32_t i = 0; i < bounds_.n; ++i) {
      all_decided = all_decided && (world.crashed[i] || world.decided[i].has_value());
    }
    if (all_decided) return true;
    if (std::any_of(world.members.begin(), world.members.end(),
                    [this](const ChandraToueg& m) { return m.round() > bounds_.max_round; })) {
      ++report_.cut_states;
      return true;
    }
    const uint32_t n = bounds_.n;
    for (size_t k = 0; k < world.network.size(); ++k) {
      if (k > 0 && world.network[k].key == world.network[k - 1].key) continue;  // same outcome
      const InFlight& message = world.network[k];
      const std::string what = absl::StrCat(KindName(message.message.kind()), " r",
                                            message.message.round(), " ", message.from, "->",
                                            message.to);
      if (!Act(world, "deliver " + what, [k](World& w, Explorer& e) { e.Deliver(w, k, false); })) {
        return false;
      }
      if (world.drops < bounds_.drops &&
          !Act(world, "drop " + what, [k](World& w, Explorer&) {
            w.network.erase(w.network.begin() + k);
            ++w.drops;
          })) {
        return false;
      }
      if (world.corruptions < bounds_.corruptions && message.message.kind() == Kind::PROPOSAL &&
          !Act(world, "deliver corrupted " + what,
               [k](World& w, Explorer& e) { e.Deliver(w, k, true); })) {
        return false;
      }
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (world.crashed[i]) continue;
      const NodeId id = i + 1;
      if (world.ticks < bounds_.ticks && Started(world, i) &&
          !Act(world, absl::StrCat("tick ", id), [i](World& w, Explorer& e) { e.Tick(w, i); })) {
        return false;
      }
      if (!Started(world, i) &&
          !Act(world, absl::StrCat("propose ", id),
               [i](World& w, Explorer& e) { e.Start(w, i); })) {
        return false;
      }
      if (world.suspicion_changes < bounds_.suspicion_changes) {
        for (uint32_t j = 0; j < n; ++j) {
          if (j == i) continue;
          const bool now = !world.suspects[i][j];
          if (!Act(world, absl::StrCat(id, now ? " suspects " : " trusts ", j + 1),
                   [i, j, now](World& w, Explorer& e) {
                     ++w.suspicion_changes;
                     e.SetSuspicion(w, i, j, now);
                   })) {
            return false;
          }
        }
      }
      if (world.crashes < bounds_.crashes &&
          !Act(world, absl::StrCat("crash ", id), [i](World& w, Explorer& e) { e.Crash(w, i); })) {
        return false;
      }
    }
    return true;
  }

  bool Act(const World& world, const std::string& action,
           const std::function<void(World&, Explorer&)>& apply) {
    World next = world;
    apply(next, *this);
    ++report_.transitions;
    trace_.push_back(action);
    const bool go_on = CheckSafety(next) && Visit(next);
    trace_.pop_back();
    return go_on;
  }

  static bool Started(const World& world, uint32_t i) {
    // A member that has not started is in round 0 (Propose enters round 1 at least).
    return world.members[i].round() > 0 || world.members[i].decided();
  }

  void Start(World& world, uint32_t i) {
    ConsensusSends out;
    world.members[i].Propose(InitialValue(i + 1), world.clock_ms[i], &out);
    Send(world, i + 1, out);
  }

  void Deliver(World& world, size_t k, bool corrupt) {
    InFlight message = std::move(world.network[k]);
    world.network.erase(world.network.begin() + k);
    const uint32_t i = message.to - 1;
    if (corrupt) {
      ++world.corruptions;
      // Another member's initial value, not the proposer's nor (if it can be) the receiver's.
      const std::string current = message.message.value().SerializeAsString();
      for (uint32_t m = 1; m <= bounds_.n; ++m) {
        if (initial_[m - 1] != current && m != message.to) {
          *message.message.mutable_value() = InitialValue(m);
          break;
        }
      }
    }
    // consensus/consensus_order.cc: the first message of an instance starts it at its receiver.
    if (!Started(world, i)) Start(world, i);
    ConsensusSends out;
    world.members[i].SetNow(world.clock_ms[i]);
    world.members[i].Step(message.from, message.message, &out);
    Send(world, message.to, out);
  }

  void Tick(World& world, uint32_t i) {
    ++world.ticks;
    world.clock_ms[i] += bounds_.tick_ms;
    ConsensusSends out;
    world.members[i].Tick(world.clock_ms[i], &out);
    Send(world, i + 1, out);
  }

  void SetSuspicion(World& world, uint32_t i, uint32_t j, bool suspected) {
    world.suspects[i][j] = suspected;
    ConsensusSends out;
    world.members[i].Suspect(j + 1, suspected, &out);
    Send(world, i + 1, out);
  }

  void Crash(World& world, uint32_t i) {
    ++world.crashes;
    world.crashed[i] = true;
    const NodeId id = i + 1;
    world.network.erase(std::remove_if(world.network.begin(), world.network.end(),
                                       [id](const InFlight& m) { return m.to == id; }),
                        world.network.end());
  }

  void Send(World& world, NodeId from, ConsensusSends& out) {
    for (auto& [to, message] : out) {
      if (to < 1 || to > bounds_.n || world.crashed[to - 1]) continue;  // lost with its receiver
      InFlight sent{from, to, std::move(message), {}};
      wire::ConsensusMessage content = sent.message;
      content.clear_steps();
      sent.key = absl::StrCat(to, ",", from, ",", content.SerializeAsString());
      auto at = std::upper_bound(
          world.network.begin(), world.network.end(), sent.key,
          [](const std::string& key, const InFlight& m) { return key < m.key; });
      world.network.insert(at, std::move(sent));
    }
    out.clear();
  }

  std::pair<uint64_t, uint64_t> Fingerprint(const World& world) const {
    std::string key;
    for (uint32_t i = 0; i < bounds_.n; ++i) {
      const std::string member = world.members[i].StateKey();
      absl::StrAppend(&key, member.size(), ":", member, world.crashed[i] ? "x" : "-",
                      world.clock_ms[i], ";");
      for (bool s : world.suspects[i]) key.push_back(s ? '1' : '0');
    }
    for (const InFlight& message : world.network) absl::StrAppend(&key, message.key.size(), ":",
                                                                   message.key);
    absl::StrAppend(&key, "|", world.crashes, ",", world.suspicion_changes, ",", world.ticks, ",",
                    world.drops, ",", world.corruptions);
    return {std::hash<std::string>{}(key), absl::Hash<std::string>{}(key)};
  }

  std::string Trace() const {
    return absl::StrCat("after: ", trace_.empty() ? "(start)" : absl::StrJoin(trace_, "; "));
  }

  bool Fail(const std::string& what) {
    report_.violation = absl::StrCat(what, "\n", Trace());
    return false;
  }

  bool CheckSafety(World& world) {
    for (uint32_t i = 0; i < bounds_.n; ++i) {
      const ChandraToueg& member = world.members[i];
      if (world.decided[i].has_value()) {
        if (!member.decided() || member.decision().SerializeAsString() != *world.decided[i]) {
          return Fail(absl::StrCat("integrity: member ", i + 1, " changed its decision"));
        }
        continue;
      }
      if (!member.decided()) continue;
      const std::string value = member.decision().SerializeAsString();
      if (std::find(initial_.begin(), initial_.end(), value) == initial_.end()) {
        return Fail(absl::StrCat("validity: member ", i + 1,
                                 " decided a value no member proposed"));
      }
      for (uint32_t j = 0; j < bounds_.n; ++j) {
        if (world.decided[j].has_value() && *world.decided[j] != value) {
          return Fail(absl::StrCat("agreement: member ", i + 1, " decided ",
                                   ValueName(value), " in round ", member.decision_round(),
                                   ", member ", j + 1, " decided ", ValueName(*world.decided[j])));
        }
      }
      world.decided[i] = value;
      report_.max_decision_round = std::max(report_.max_decision_round, member.decision_round());
    }
    return true;
  }

  std::string ValueName(const std::string& value) const {
    for (uint32_t m = 0; m < bounds_.n; ++m) {
      if (initial_[m] == value) return absl::StrCat("v", m + 1);
    }
    return "(unknown)";
  }

  // With no more faults: every member up suspects exactly the crashed ones, every message is
  // delivered, the clocks move on; each member up must decide (a majority being up).
  bool CheckTermination(const World& from) {
    const uint32_t n = bounds_.n;
    const auto up = static_cast<uint32_t>(std::count(from.crashed.begin(), from.crashed.end(),
                                                     false));
    if (up < n / 2 + 1) return true;  // no termination without a majority (and ◇S)
    ++report_.completions;
    World world = from;
    for (uint32_t i = 0; i < n; ++i) {
      if (world.crashed[i]) continue;
      for (uint32_t j = 0; j < n; ++j) {
        if (j != i && world.suspects[i][j] != world.crashed[j]) {
          SetSuspicion(world, i, j, world.crashed[j]);
        }
      }
      if (!Started(world, i)) Start(world, i);
    }
    constexpr int kRounds = 400;  // of delivering everything, then a tick at every member
    for (int round = 0; round < kRounds; ++round) {
      while (!world.network.empty()) Deliver(world, 0, false);
      if (!CheckSafety(world)) return false;
      bool all = true;
      for (uint32_t i = 0; i < n; ++i) all = all && (world.crashed[i] || world.decided[i]);
      if (all) return true;
      for (uint32_t i = 0; i < n; ++i) {
        if (!world.crashed[i]) Tick(world, i);
      }
    }
    std::vector<std::string> undecided;
    for (uint32_t i = 0; i < n; ++i) {
      if (!world.crashed[i] && !world.decided[i]) {
        undecided.push_back(absl::StrCat(i + 1, " (round ", world.members[i].round(), ")"));
      }
    }
    return Fail(absl::StrCat("termination: with no more faults and ", up, " of ", n,
                             " members up, undecided after ", kRounds, " rounds of delivery: ",
                             absl::StrJoin(undecided, ", ")));
  }

  const Bounds bounds_;
  std::vector<std::string> initial_;  // serialised initial values, by member - 1
  absl::flat_hash_set<std::pair<uint64_t, uint64_t>> visited_;
  std::vector<std::string> trace_;
  Report report_;
};

}  // namespace

Report Explore(const Bounds& bounds) { return Explorer(bounds).Run(); }

}  // namespace cohort::explore
