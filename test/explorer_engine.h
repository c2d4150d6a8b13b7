// The exhaustive explorer's engine: depth-first search over every interleaving of a protocol's
// members within bounds, each distinct state visited once. A Model says what a member is and
// does (test/consensus_explorer.cc: one Chandra-Toueg instance; test/sequencer_explorer.cc:
// the sequencer order); the engine owns the network (any delivery order, duplicates, losses),
// the clocks (ticks), the failure detector (suspicions started or withdrawn, false ones
// included), crashes, the safety check after every action and the termination check: with no
// more faults, every member up suspecting exactly the crashed ones and every message delivered
// while the clocks move, the model must be done, if a majority is up. States share the members
// an action did not touch (copy on write); sleep sets skip transitions whose outcome another
// order of the same actions reaches (Bounds::sleep_sets), and Bounds::shuffle_seed draws the
// order in which each state's actions are taken.
#ifndef COHORT_TEST_EXPLORER_ENGINE_H_
#define COHORT_TEST_EXPLORER_ENGINE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "consensus/chandra_toueg.h"

namespace cohort::explore {

using consensus::NodeId;

struct Bounds {
  uint32_t n = 3;
  consensus::ConsensusOptions consensus;  // the sequencer order takes optimisation_3 from it
  uint32_t crashes = 1;            // crash-stop failures, each at any point
  uint32_t suspicion_changes = 2;  // a member starts or stops suspecting another
  uint32_t ticks = 3;              // a member's clock moves on by tick_ms (its timers fire)
  uint32_t drops = 1;              // in-flight messages lost
  uint64_t tick_ms = 25;           // default options: > round_delay_ms, half retransmit_ms
  // Rounds (epochs for the sequencer order) can go on without end while suspicions are wrong
  // (◇S promises nothing before it stabilises), even with no timer firing: states past this
  // round are checked, not explored.
  uint32_t max_round = 4;
  // The consensus order: instances can go on without end too. While a member is wrongly
  // suspected, instances it would have filled decide empty batches (the others' estimates)
  // and the next starts at once. States past this instance are checked, not explored.
  uint32_t max_instances = 4;
  uint32_t broadcasts = 2;  // the orders: messages broadcast, each by any member
  // The orders: members whose view ends (TotalOrder::Freeze), each at any point. Once one has,
  // termination is not asked (the next view's order takes over); what is checked is that a
  // frozen member delivers nothing more, and the orders' safety among everyone.
  uint32_t freezes = 0;
  // The consensus order: decided instances each member keeps for laggards (0: cohortd's
  // default, more than any exploration reaches). A member that asks beyond them is reported
  // (Outbox::beyond_log) and needs the state (membership re-admits it): termination is then not
  // asked of it, and safety still is.
  uint32_t decided_log_max = 0;
  // A faulty network that rewrites a message (the consensus model: a PROPOSAL's value, by
  // another member's initial value; the sequencer order: an ORDERED entry's payload), at most
  // this many times: outside the fault model, so that the checks are seen to fail.
  uint32_t corruptions = 0;
  // A state the model calls done (Model::Done: nothing left but repetition) is checked, not
  // explored further, unless this is set.
  bool past_done = false;
  // Skip transitions whose outcome another order of the same actions reaches (sleep sets): the
  // same states, fewer transitions. Off: every transition taken, to compare. With sleep sets,
  // no state reachable only past a done state is visited; without, some are, through orders
  // that reach them without passing one (past_done: all are, either way).
  bool sleep_sets = true;
  // 0: actions are taken in a fixed order. Else they are shuffled at every state (this seeds
  // the shuffle): a run stopped at max_states then samples states all over the space, not only
  // the corner a fixed order reaches first, and runs with other seeds sample others (swarm
  // verification). A run that completes visits the same states whatever the order.
  uint64_t shuffle_seed = 0;
  uint64_t max_states = 3000000;  // stop, incomplete, after this many distinct states
  uint32_t completion_every = 8;  // termination checked from 1 in this many states as well
};

struct Report {
  uint64_t states = 0;             // distinct states visited
  uint64_t transitions = 0;        // actions taken (some lead to states visited already)
  uint64_t completions = 0;        // termination checks run
  uint64_t decided_states = 0;     // states in which some member has decided (delivered)
  uint32_t max_decision_round = 0; // the latest round (epoch) any member decided in
                                   // (termination checks included: they run past max_round)
  uint64_t cut_states = 0;         // states past max_round (max_instances), not explored further
  bool complete = false;           // every state within the bounds visited
  std::string violation;           // empty: none; else what broke, and the actions leading to it
};

// A member's state in an explored state. States reached from one another share the members an
// action did not touch (an action copies only the member it changes), and each member's key is
// hashed once, not in every state that has it.
template <class Member>
struct MemberSlot {
  Member member;
  mutable bool hashed = false;
  mutable std::pair<uint64_t, uint64_t> hash;
};

// The members of a state, read-only: what the model's checks see.
template <class Member>
class MemberView {
 public:
  explicit MemberView(const std::vector<std::shared_ptr<MemberSlot<Member>>>& slots)
      : slots_(&slots) {}
  size_t size() const { return slots_->size(); }
  const Member& operator[](size_t i) const { return (*slots_)[i]->member; }

 private:
  const std::vector<std::shared_ptr<MemberSlot<Member>>>* slots_;
};

// Model (a class with these members, all const):
//   types Member, Message, Record (copyable; Record holds what the checks observed);
//   std::vector<Member> Create();                                 // member i + 1 at index i
//   void Step(Member&, Record&, uint32_t i, NodeId from, const Message&, uint64_t now, Sends*);
//   void Tick(Member&, Record&, uint32_t i, uint64_t now, Sends*);
//   void Suspect(Member&, Record&, uint32_t i, NodeId node, bool suspected, Sends*);
//   std::vector<std::string> Actions(const Member&, const Record&, uint32_t i);  // its own
//   void Act(Member&, Record&, uint32_t i, size_t action, uint64_t now, Sends*);
//   void Settle(Member&, Record&, uint32_t i, uint64_t now, Sends*);  // before a completion
//   std::string Key(const Member&), RecordKey(const Record&), MessageKey(const Message&),
//       Label(const Message&);
//   bool Corrupt(Message*, NodeId to);                            // false: left as it is
//   std::string CheckSafety(const MemberView<Member>&, Record&);  // "" or what broke
//   bool Terminated(const MemberView<Member>&, const Record&, const std::vector<bool>& crashed);
//       // what termination asks for (every member up decided, delivered ...)
//   bool Done(same);  // nothing left to explore: terminated, and no action of the model's left
//   bool PastBound(const Member&);
//   bool CanTick(const Member&);                                  // false: a tick is a no-op
//   std::string Undone(const std::vector<Member>&, const Record&, const std::vector<bool>&);
//   bool Decided(const Member&), uint32_t DecisionRound(const Member&);   // for the report
// where Sends = std::vector<std::pair<NodeId, Message>>.
template <class Model>
class Engine {
 public:
  using Member = typename Model::Member;
  using Message = typename Model::Message;
  using Record = typename Model::Record;
  using Sends = std::vector<std::pair<NodeId, Message>>;

  Engine(const Bounds& bounds, Model model)
      : bounds_(bounds), model_(std::move(model)), rng_(bounds.shuffle_seed) {}

  Report Run() {
    World world;
    for (Member& member : model_.Create()) {
      world.members.push_back(std::make_shared<Slot>(Slot{std::move(member)}));
    }
    world.crashed.assign(bounds_.n, false);
    world.suspects.assign(bounds_.n, std::vector<bool>(bounds_.n, false));
    world.clock_ms.assign(bounds_.n, 0);
    bool expanded = false;
    report_.complete = Visit(world, {}, &expanded);
    return report_;
  }

 private:
  using Slot = MemberSlot<Member>;

  // A message on its way; `key` identifies it for the state's fingerprint (`hash` is its hash).
  // Never changed once sent: states share it.
  struct InFlight {
    NodeId from = 0;
    NodeId to = 0;
    Message message;
    std::string key;
    std::pair<uint64_t, uint64_t> hash;
  };

  struct World {
    std::vector<std::shared_ptr<Slot>> members;  // index i is member i + 1; copied on write
    std::vector<bool> crashed;
    std::vector<std::vector<bool>> suspects;  // suspects[i][j]: member i + 1 suspects j + 1
    std::vector<uint64_t> clock_ms;
    std::vector<std::shared_ptr<const InFlight>> network;  // sorted by key: equal ones side by side
    Record record;
    uint32_t crashes = 0, suspicion_changes = 0, ticks = 0, drops = 0, corruptions = 0;

    MemberView<Member> view() const { return MemberView<Member>(members); }
  };

  static std::pair<uint64_t, uint64_t> Hash(const std::string& key) {
    return {std::hash<std::string>{}(key), absl::Hash<std::string>{}(key)};
  }

  // Member i of `world`, to be changed: a copy of its own if another state shares it.
  static Member& Mutable(World& world, uint32_t i) {
    std::shared_ptr<Slot>& slot = world.members[i];
    if (slot.use_count() > 1) slot = std::make_shared<Slot>(Slot{slot->member});
    slot->hashed = false;
    return slot->member;
  }

  // A delivery put to sleep (Godefroid 1996, chapter 5: sleep sets): the message's hash and
  // its receiver. Delivering a message to one member and any action of another member commute
  // and neither disables the other (the budgets of faults are only taken by the faults, and
  // the record's parts are each member's own), so once a state's successor by a delivery is
  // explored, its later siblings by another member's actions need not deliver it again: that
  // state is the successor of the first by their action. Only deliveries are put to sleep.
  // Sleep sets skip transitions, never states: every state is still visited, and checked.
  struct Asleep {
    uint64_t hash;
    NodeId to;
  };
  using Sleep = std::vector<Asleep>;

  struct Seen {
    Sleep sleep;            // the deliveries it was last visited without
    bool expanded = false;  // false: its successors are not explored (done, or past a bound)
  };

  static bool Holds(const Sleep& sleep, uint64_t hash) {
    return std::any_of(sleep.begin(), sleep.end(),
                       [hash](const Asleep& a) { return a.hash == hash; });
  }
  // What stays asleep after an action of member `actor`: the deliveries to the others.
  static Sleep After(const Sleep& sleep, NodeId actor) {
    Sleep kept;
    for (const Asleep& a : sleep) {
      if (a.to != actor) kept.push_back(a);
    }
    return kept;
  }

  // Depth first; false once the exploration stops (a violation, or max_states). `expanded`:
  // whether the state's successors are (or were) explored.
  bool Visit(const World& world, Sleep sleep, bool* expanded) {
    *expanded = false;
    if (!report_.violation.empty()) return false;
    const std::pair<uint64_t, uint64_t> fingerprint = Fingerprint(world);
    // One lookup: nothing is inserted into visited_ before `seen` is last used below.
    auto [seen, first_visit] = visited_.try_emplace(fingerprint, Seen{sleep, false});
    if (!first_visit) {
      // Visited: explore the deliveries it was visited without that are awake now, and keep
      // asleep only what both visits had asleep.
      *expanded = seen->second.expanded;
      if (!seen->second.expanded) return true;
      Sleep awake, both;
      for (const Asleep& a : seen->second.sleep) {
        (Holds(sleep, a.hash) ? both : awake).push_back(a);
      }
      if (awake.empty()) return true;
      seen->second.sleep = std::move(both);
      return Expand(world, std::move(sleep), &awake);
    }
    if (++report_.states > bounds_.max_states) return false;
    const MemberView<Member> members = world.view();
    auto any_member = [&members](auto&& predicate) {
      for (size_t i = 0; i < members.size(); ++i) {
        if (predicate(members[i])) return true;
      }
      return false;
    };
    if (any_member([this](const Member& m) { return model_.Decided(m); })) {
      ++report_.decided_states;
    }
    if (world.network.empty() || report_.states % bounds_.completion_every == 0) {
      if (!CheckTermination(world)) return false;
    }
    if (!bounds_.past_done && model_.Done(members, world.record, world.crashed)) return true;
    if (any_member([this](const Member& m) { return model_.PastBound(m); })) {
      ++report_.cut_states;
      return true;
    }
    seen->second.expanded = true;
    *expanded = true;
    return Expand(world, std::move(sleep), nullptr);
  }

  // An action a state allows: what it is called, which member takes it (a delivery: its
  // receiver), and what it does.
  struct Option {
    std::string label;
    NodeId actor = 0;
    bool delivery = false;
    uint64_t hash = 0;  // a delivery's message
    std::function<void(World&, Engine&)> apply;
  };

  // Takes every action of `world` but the deliveries asleep; `only`: just these deliveries.
  bool Expand(const World& world, Sleep sleep, const Sleep* only) {
    std::vector<Option> options = Options(world, sleep, only);
    if (bounds_.shuffle_seed != 0) std::shuffle(options.begin(), options.end(), rng_);
    for (Option& option : options) {
      bool expanded = false;
      if (!Act(world, option.label, After(sleep, option.actor), &expanded, option.apply)) {
        return false;
      }
      if (option.delivery && expanded && bounds_.sleep_sets) {
        sleep.push_back({option.hash, option.actor});
      }
    }
    return true;
  }

  std::vector<Option> Options(const World& world, const Sleep& sleep, const Sleep* only) const {
    std::vector<Option> options;
    const MemberView<Member> members = world.view();
    const uint32_t n = bounds_.n;
    for (size_t k = 0; k < world.network.size(); ++k) {
      const InFlight& message = *world.network[k];
      if (k > 0 && message.key == world.network[k - 1]->key) continue;  // same outcome
      const uint64_t hash = message.hash.first;
      if (only != nullptr && !Holds(*only, hash)) continue;
      const std::string what = absl::StrCat(model_.Label(message.message), " ", message.from,
                                            "->", message.to);
      // Asleep, its delivery is skipped; its loss is not (a loss is never put to sleep).
      if (only != nullptr || !Holds(sleep, hash)) {
        options.push_back({"deliver " + what, message.to, true, hash,
                           [k](World& w, Engine& e) { e.Deliver(w, k, false); }});
      }
      if (only != nullptr) continue;  // the rest was taken in the first visit
      if (world.drops < bounds_.drops) {
        options.push_back({"drop " + what, message.to, false, 0, [k](World& w, Engine&) {
                             w.network.erase(w.network.begin() + k);
                             ++w.drops;
                           }});
      }
      if (world.corruptions < bounds_.corruptions && Corruptible(message)) {
        options.push_back({"deliver corrupted " + what, message.to, false, 0,
                           [k](World& w, Engine& e) { e.Deliver(w, k, true); }});
      }
    }
    if (only != nullptr) return options;
    for (uint32_t i = 0; i < n; ++i) {
      if (world.crashed[i]) continue;
      const NodeId id = i + 1;
      if (world.ticks < bounds_.ticks && model_.CanTick(members[i])) {
        options.push_back({absl::StrCat("tick ", id), id, false, 0,
                           [i](World& w, Engine& e) { e.Tick(w, i); }});
      }
      const std::vector<std::string> actions = model_.Actions(members[i], world.record, i);
      for (size_t a = 0; a < actions.size(); ++a) {
        options.push_back({actions[a], id, false, 0, [i, a](World& w, Engine& e) {
                             Sends out;
                             e.model_.Act(Mutable(w, i), w.record, i, a, w.clock_ms[i], &out);
                             e.Send(w, i + 1, out);
                           }});
      }
      if (world.suspicion_changes < bounds_.suspicion_changes) {
        for (uint32_t j = 0; j < n; ++j) {
          if (j == i) continue;
          const bool now = !world.suspects[i][j];
          options.push_back({absl::StrCat(id, now ? " suspects " : " trusts ", j + 1), id, false,
                             0, [i, j, now](World& w, Engine& e) {
                               ++w.suspicion_changes;
                               e.SetSuspicion(w, i, j, now);
                             }});
        }
      }
      if (world.crashes < bounds_.crashes) {
        options.push_back({absl::StrCat("crash ", id), id, false, 0,
                           [i](World& w, Engine& e) { e.Crash(w, i); }});
      }
    }
    return options;
  }

  bool Act(const World& world, const std::string& action, Sleep sleep, bool* expanded,
           const std::function<void(World&, Engine&)>& apply) {
    World next = world;
    apply(next, *this);
    ++report_.transitions;
    trace_.push_back(action);
    const bool go_on = CheckSafety(next) && Visit(next, std::move(sleep), expanded);
    trace_.pop_back();
    return go_on;
  }

  bool Corruptible(const InFlight& message) const {
    Message copy = message.message;
    return model_.Corrupt(&copy, message.to);
  }

  void Deliver(World& world, size_t k, bool corrupt) {
    const std::shared_ptr<const InFlight> message = world.network[k];
    world.network.erase(world.network.begin() + k);
    const uint32_t i = message->to - 1;
    Sends out;
    if (corrupt) {
      ++world.corruptions;
      Message rewritten = message->message;
      model_.Corrupt(&rewritten, message->to);
      model_.Step(Mutable(world, i), world.record, i, message->from, rewritten,
                  world.clock_ms[i], &out);
    } else {
      model_.Step(Mutable(world, i), world.record, i, message->from, message->message,
                  world.clock_ms[i], &out);
    }
    Send(world, message->to, out);
  }

  void Tick(World& world, uint32_t i) {
    ++world.ticks;
    world.clock_ms[i] += bounds_.tick_ms;
    Sends out;
    model_.Tick(Mutable(world, i), world.record, i, world.clock_ms[i], &out);
    Send(world, i + 1, out);
  }

  void SetSuspicion(World& world, uint32_t i, uint32_t j, bool suspected) {
    world.suspects[i][j] = suspected;
    Sends out;
    model_.Suspect(Mutable(world, i), world.record, i, j + 1, suspected, &out);
    Send(world, i + 1, out);
  }

  void Crash(World& world, uint32_t i) {
    ++world.crashes;
    world.crashed[i] = true;
    const NodeId id = i + 1;
    world.network.erase(
        std::remove_if(world.network.begin(), world.network.end(),
                       [id](const std::shared_ptr<const InFlight>& m) { return m->to == id; }),
        world.network.end());
  }

  void Send(World& world, NodeId from, Sends& out) {
    for (auto& [to, message] : out) {
      if (to < 1 || to > bounds_.n || world.crashed[to - 1]) continue;  // lost with its receiver
      auto sent = std::make_shared<InFlight>();
      sent->from = from;
      sent->to = to;
      sent->message = std::move(message);
      sent->key = absl::StrCat(to, ",", from, ",", model_.MessageKey(sent->message));
      sent->hash = Hash(sent->key);
      auto at = std::upper_bound(world.network.begin(), world.network.end(), sent->key,
                                 [](const std::string& key,
                                    const std::shared_ptr<const InFlight>& m) {
                                   return key < m->key;
                                 });
      world.network.insert(at, std::move(sent));
    }
    out.clear();
  }

  // Two 64-bit hashes of everything a state is made of: its members' keys, crashes, clocks,
  // suspicions, messages in flight, record and the faults taken.
  std::pair<uint64_t, uint64_t> Fingerprint(const World& world) const {
    std::string key;
    auto put = [&key](uint64_t value) {
      key.append(reinterpret_cast<const char*>(&value), sizeof value);
    };
    for (uint32_t i = 0; i < bounds_.n; ++i) {
      const Slot& slot = *world.members[i];
      if (!slot.hashed) {
        slot.hash = Hash(model_.Key(slot.member));
        slot.hashed = true;
      }
      put(slot.hash.first);
      put(slot.hash.second);
      put(world.crashed[i] ? 1 : 0);
      put(world.clock_ms[i]);
      uint64_t suspects = 0;
      for (uint32_t j = 0; j < bounds_.n; ++j) {
        if (world.suspects[i][j]) suspects |= uint64_t{1} << j;
      }
      put(suspects);
    }
    put(world.network.size());
    for (const auto& message : world.network) {
      put(message->hash.first);
      put(message->hash.second);
    }
    const auto record = Hash(model_.RecordKey(world.record));
    put(record.first);
    put(record.second);
    for (uint32_t count : {world.crashes, world.suspicion_changes, world.ticks, world.drops,
                           world.corruptions}) {
      put(count);
    }
    return Hash(key);
  }

  bool Fail(const std::string& what) {
    report_.violation = absl::StrCat(
        what, "\nafter: ", trace_.empty() ? "(start)" : absl::StrJoin(trace_, "; "));
    return false;
  }

  bool CheckSafety(World& world) {
    const MemberView<Member> members = world.view();
    const std::string broken = model_.CheckSafety(members, world.record);
    if (!broken.empty()) return Fail(broken);
    for (size_t i = 0; i < members.size(); ++i) {
      if (model_.Decided(members[i])) {
        report_.max_decision_round =
            std::max(report_.max_decision_round, model_.DecisionRound(members[i]));
      }
    }
    return true;
  }

  bool CheckTermination(const World& from) {
    const uint32_t n = bounds_.n;
    const auto up =
        static_cast<uint32_t>(std::count(from.crashed.begin(), from.crashed.end(), false));
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
      Sends out;
      model_.Settle(Mutable(world, i), world.record, i, world.clock_ms[i], &out);
      Send(world, i + 1, out);
    }
    constexpr int kRounds = 400;  // of delivering everything, then a tick at every member
    for (int round = 0; round < kRounds; ++round) {
      while (!world.network.empty()) Deliver(world, 0, false);
      if (!CheckSafety(world)) return false;
      if (model_.Terminated(world.view(), world.record, world.crashed)) return true;
      for (uint32_t i = 0; i < n; ++i) {
        if (!world.crashed[i]) Tick(world, i);
      }
    }
    return Fail(absl::StrCat("termination: with no more faults and ", up, " of ", n,
                             " members up, after ", kRounds, " rounds of delivery: ",
                             model_.Undone(world.view(), world.record, world.crashed)));
  }

  const Bounds bounds_;
  const Model model_;
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, Seen> visited_;
  std::vector<std::string> trace_;
  std::mt19937_64 rng_;  // Bounds::shuffle_seed
  Report report_;
};

}  // namespace cohort::explore

#endif  // COHORT_TEST_EXPLORER_ENGINE_H_
