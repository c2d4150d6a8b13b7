#include "test/order_sim.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "consensus/consensus_order.h"
#include "consensus/sequencer_order.h"
#include "consensus/total_order.h"
#include "nso/rng.h"
#include "nso/sim_network.h"

namespace cohort::sim {
namespace {

using consensus::NodeId;
using MessageId = std::pair<NodeId, uint64_t>;

constexpr uint64_t kTickMs = 5;
constexpr uint64_t kRetransmitMs = 40;
constexpr uint64_t kRoundDelayMs = 30;

struct Member {
  NodeId id = 0;
  std::unique_ptr<consensus::TotalOrder> order;
  bool crashed = false;
  std::vector<MessageId> delivered;
  std::set<MessageId> delivered_set;
  std::map<NodeId, uint64_t> last_seq;  // origin -> last delivered seq
  uint64_t broadcasts = 0;
};

struct Timed {  // a suspicion change to apply at a time
  NodeId at = 0;
  NodeId node = 0;
  bool suspected = false;
};

class Simulation {
 public:
  explicit Simulation(const OrderSimOptions& options)
      : options_(options), rng_(options.seed * 0x9E3779B97F4A7C15ULL + 17), network_(Network()) {}

  OrderSimResult Run();

 private:
  nso::SimNetwork Network();
  void Build();
  void Apply(Member& member, consensus::Outbox& out);
  void Check(Member& member, const consensus::Delivery& delivery);
  void Fail(std::string violation);
  void TickAll();
  void InjectFaults();
  void Broadcast(Member& member);
  void Suspect(Member& at, NodeId node, bool suspected);
  void Crash(Member& member);
  void ApplyDue();
  bool AllDelivered() const;
  std::vector<Member*> Live();

  const OrderSimOptions options_;
  nso::Rng rng_;
  uint32_t n_ = 0;
  bool lossy_ = false;
  nso::SimNetwork network_;
  std::vector<Member> members_;
  std::map<MessageId, std::string> broadcasts_;
  std::vector<MessageId> reference_;  // the longest delivery sequence seen: all are prefixes
  std::multimap<uint64_t, Timed> due_;  // time -> suspicion change
  uint64_t heal_at_ms_ = 0;
  bool partitioned_ = false;
  uint32_t crashes_ = 0;
  OrderSimResult result_;
};

nso::SimNetwork Simulation::Network() {
  n_ = 3 + static_cast<uint32_t>(rng_.Uniform(5));  // 3..7 members
  nso::SimNetworkOptions network;
  network.seed = rng_.Next();
  network.delay_min_ms = 1;
  network.delay_max_ms = 1 + rng_.Uniform(20);
  network.drop_per_million = static_cast<uint32_t>(rng_.Uniform(150000));       // < 15 %
  network.duplicate_per_million = static_cast<uint32_t>(rng_.Uniform(50000));   // < 5 %
  lossy_ = network.drop_per_million > 0 || network.duplicate_per_million > 0;
  return nso::SimNetwork(network);
}

void Simulation::Build() {
  std::vector<NodeId> ids;
  for (uint32_t i = 0; i < n_; ++i) ids.push_back(i + 1);
  members_.resize(n_);
  for (uint32_t i = 0; i < n_; ++i) {
    Member& member = members_[i];
    member.id = ids[i];
    if (options_.ordering == Ordering::kConsensus) {
      consensus::ConsensusOrderOptions order;
      order.consensus = options_.consensus;
      order.consensus.retransmit_ms = kRetransmitMs;
      order.consensus.round_delay_ms = kRoundDelayMs;
      order.batch_messages_max = 8;  // small batches: more instances per run
      order.probe_ms = 200;
      member.order = std::make_unique<consensus::ConsensusOrder>(member.id, ids, order);
    } else {
      consensus::SequencerOrderOptions order;
      order.retransmit_ms = kRetransmitMs;
      order.batch_messages_max = 8;
      member.order = std::make_unique<consensus::SequencerOrder>(member.id, ids, order);
    }
    network_.Endpoint(member.id)->SetReceiver([this, i](NodeId from, wire::Envelope envelope) {
      Member& to = members_[i];
      if (to.crashed) return;
      consensus::Outbox out;
      to.order->Step(from, envelope, &out);
      Apply(to, out);
    });
  }
}

void Simulation::Apply(Member& member, consensus::Outbox& out) {
  for (auto& send : out.sends) {
    wire::Envelope envelope = send.TakeWhole();
    envelope.set_sender_node(member.id);
    network_.Endpoint(member.id)->Send(send.to, std::move(envelope));
  }
  for (const consensus::Delivery& delivery : out.deliveries) Check(member, delivery);
}

void Simulation::Check(Member& member, const consensus::Delivery& delivery) {
  const MessageId id{delivery.origin, delivery.seq};
  ++result_.deliveries;
  auto broadcast = broadcasts_.find(id);
  if (broadcast == broadcasts_.end() || broadcast->second != delivery.payload) {
    return Fail(absl::StrCat("validity: member ", member.id, " delivered ", id.first, ":",
                             id.second, " that was never broadcast"));
  }
  if (!member.delivered_set.insert(id).second) {
    return Fail(absl::StrCat("integrity: member ", member.id, " delivered ", id.first, ":",
                             id.second, " twice"));
  }
  uint64_t& last = member.last_seq[id.first];
  if (id.second != last + 1) {
    return Fail(absl::StrCat("fifo: member ", member.id, " delivered ", id.first, ":", id.second,
                             " after seq ", last));
  }
  last = id.second;
  const size_t position = member.delivered.size();
  member.delivered.push_back(id);
  if (position < reference_.size()) {
    if (reference_[position] != id) {
      return Fail(absl::StrCat("total order: member ", member.id, " delivered ", id.first, ":",
                               id.second, " at position ", position, " where another delivered ",
                               reference_[position].first, ":", reference_[position].second));
    }
  } else {
    reference_.push_back(id);
  }
}

void Simulation::Fail(std::string violation) {
  if (result_.ok) {
    result_.ok = false;
    result_.violation = std::move(violation);
  }
}

std::vector<Member*> Simulation::Live() {
  std::vector<Member*> live;
  for (Member& member : members_) {
    if (!member.crashed) live.push_back(&member);
  }
  return live;
}

void Simulation::TickAll() {
  for (Member& member : members_) {
    if (member.crashed) continue;
    consensus::Outbox out;
    member.order->Tick(network_.now_ms(), &out);
    Apply(member, out);
  }
}

void Simulation::Broadcast(Member& member) {
  // Seqs count from 1 per origin (total_order.h), so the payload can name the message up front.
  const uint64_t seq = ++member.broadcasts;
  std::string payload = absl::StrCat("m", member.id, ":", seq);
  broadcasts_[{member.id, seq}] = payload;
  consensus::Outbox out;
  if (member.order->Broadcast(std::move(payload), &out) != seq) {
    Fail(absl::StrCat("member ", member.id, " gave its broadcast another seq than ", seq));
  }
  ++result_.broadcasts;
  Apply(member, out);
}

void Simulation::Suspect(Member& at, NodeId node, bool suspected) {
  if (at.crashed) return;
  consensus::Outbox out;
  at.order->Suspect(node, suspected, &out);
  Apply(at, out);
}

void Simulation::Crash(Member& member) {
  member.crashed = true;
  network_.Crash(member.id);
  ++crashes_;
  ++result_.faults_injected;
  // ◇S: every correct member eventually suspects it, for good.
  for (Member& other : members_) {
    if (other.crashed) continue;
    due_.emplace(network_.now_ms() + rng_.Uniform(60), Timed{other.id, member.id, true});
  }
}

void Simulation::ApplyDue() {
  while (!due_.empty() && due_.begin()->first <= network_.now_ms()) {
    const Timed change = due_.begin()->second;
    due_.erase(due_.begin());
    Member& at = members_[change.at - 1];
    // A crashed member stays suspected: never withdraw that suspicion.
    if (!change.suspected && members_[change.node - 1].crashed) continue;
    Suspect(at, change.node, change.suspected);
  }
}

void Simulation::InjectFaults() {
  std::vector<Member*> live = Live();
  const uint64_t now_ms = network_.now_ms();
  if (result_.broadcasts < options_.broadcasts_max && rng_.Chance(150000)) {
    Broadcast(*live[rng_.Uniform(live.size())]);
  }
  // Crash fewer than half; the first member (round-1 coordinator, epoch-0 sequencer) half the time.
  if (crashes_ < (n_ - 1) / 2 && rng_.Chance(6000)) {
    Member* victim = rng_.Chance(500000) && !members_[0].crashed
                         ? &members_[0]
                         : live[rng_.Uniform(live.size())];
    Crash(*victim);
    live = Live();
  }
  if (live.size() >= 2 && rng_.Chance(30000)) {  // a false suspicion, withdrawn later
    Member* at = live[rng_.Uniform(live.size())];
    Member* node = live[rng_.Uniform(live.size())];
    if (at != node) {
      ++result_.faults_injected;
      Suspect(*at, node->id, true);
      due_.emplace(now_ms + 20 + rng_.Uniform(300), Timed{at->id, node->id, false});
    }
  }
  if (!partitioned_ && rng_.Chance(6000)) {
    std::vector<NodeId> side;
    for (Member& member : members_) {
      if (rng_.Chance(500000)) side.push_back(member.id);
    }
    network_.Partition({side});
    partitioned_ = true;
    heal_at_ms_ = now_ms + 50 + rng_.Uniform(400);
    ++result_.faults_injected;
  }
  if (partitioned_ && now_ms >= heal_at_ms_) {
    network_.Heal();
    partitioned_ = false;
  }
}

bool Simulation::AllDelivered() const {
  size_t length = 0;
  bool first = true;
  for (const Member& member : members_) {
    if (member.crashed) continue;
    for (const auto& [id, payload] : broadcasts_) {
      if (!members_[id.first - 1].crashed && member.delivered_set.count(id) == 0) return false;
    }
    if (!first && member.delivered.size() != length) return false;
    length = member.delivered.size();
    first = false;
  }
  return true;
}

OrderSimResult Simulation::Run() {
  result_.members = n_;
  Build();
  result_.faults_injected += lossy_ ? 1 : 0;
  // Chaos: safety is checked on every delivery.
  while (network_.now_ms() < options_.chaos_ms && result_.ok) {
    network_.RunUntil(network_.now_ms() + kTickMs);
    ApplyDue();
    TickAll();
    InjectFaults();
  }
  // Healing: no more loss, partitions or false suspicions; crashed members stay suspected.
  network_.Heal();
  network_.SetLoss(0, 0);
  due_.clear();
  for (Member& at : members_) {
    for (Member& node : members_) {
      if (&at != &node) Suspect(at, node.id, node.crashed);
    }
  }
  // Every correct member broadcasts once more after healing.
  for (Member* member : Live()) Broadcast(*member);
  const uint64_t limit_ms = network_.now_ms() + options_.liveness_limit_ms;
  while (result_.ok && !AllDelivered()) {
    if (network_.now_ms() >= limit_ms) {
      std::string states;
      for (Member* member : Live()) {
        absl::StrAppend(&states, "\n    member ", member->id, ": ", member->order->Describe());
      }
      Fail(absl::StrCat("termination: not every broadcast of a correct member was delivered by ",
                        "every correct member ", options_.liveness_limit_ms,
                        " ms after healing", states));
      break;
    }
    network_.RunUntil(network_.now_ms() + kTickMs);
    TickAll();
  }
  result_.messages_sent = network_.counters().messages_sent;
  result_.end_ms = network_.now_ms();
  result_.trace_hash = network_.trace_hash();
  return result_;
}

}  // namespace

OrderSimResult RunOrderSimulation(const OrderSimOptions& options) {
  Simulation simulation(options);
  return simulation.Run();
}

PaperRun RunFailureFreeConsensus(uint32_t n, consensus::ConsensusOptions options,
                                 uint64_t delay_ms, bool crashed_coordinator) {
  options.retransmit_ms = 1000 * delay_ms;  // no retransmission in a failure-free run
  options.round_delay_ms = 3 * delay_ms;    // d > a round trip (004 section 4.1)
  nso::SimNetworkOptions network_options;
  network_options.delay_min_ms = network_options.delay_max_ms = delay_ms;
  nso::SimNetwork network(network_options);
  std::vector<NodeId> ids;
  for (uint32_t i = 0; i < n; ++i) ids.push_back(i + 1);
  std::vector<consensus::OrderCounters> counters(n);
  std::vector<std::unique_ptr<consensus::ChandraToueg>> nodes;
  std::vector<uint64_t> decided_at_ms(n, 0);
  std::vector<bool> decision_counted(n, false);
  auto flush = [&](uint32_t i, consensus::ConsensusSends& sends) {
    consensus::CountSends(sends, &counters[i]);
    for (auto& send : sends) {
      wire::Envelope envelope;
      *envelope.mutable_consensus() = send.WithValue();
      network.Endpoint(ids[i])->Send(send.to, std::move(envelope));
    }
    if (nodes[i]->decided() && !decision_counted[i]) {
      decision_counted[i] = true;
      decided_at_ms[i] = network.now_ms();
      consensus::CountDecision(*nodes[i], &counters[i]);
    }
  };
  for (uint32_t i = 0; i < n; ++i) {
    std::set<NodeId> suspected;
    if (crashed_coordinator && i != 0) suspected.insert(ids[0]);
    nodes.push_back(std::make_unique<consensus::ChandraToueg>(ids[i], ids, 1, options,
                                                              suspected));
    network.Endpoint(ids[i])->SetReceiver([&, i](NodeId from, wire::Envelope envelope) {
      consensus::ConsensusSends sends;
      nodes[i]->Step(from, envelope.consensus(), &sends);
      flush(i, sends);
    });
  }
  if (crashed_coordinator) network.Crash(ids[0]);
  for (uint32_t i = crashed_coordinator ? 1 : 0; i < n; ++i) {
    wire::MessageBatch value;
    wire::DataMessage* data = value.add_messages();
    data->set_origin(ids[i]);
    data->set_seq(1);
    consensus::ConsensusSends sends;
    nodes[i]->Propose(value, 0, &sends);
    flush(i, sends);
  }
  for (uint64_t t = 1; t <= 20 * delay_ms; ++t) {  // 1 ms ticks
    network.RunUntil(t);
    for (uint32_t i = crashed_coordinator ? 1 : 0; i < n; ++i) {
      consensus::ConsensusSends sends;
      nodes[i]->Tick(t, &sends);
      flush(i, sends);
    }
  }
  network.RunUntilQuiet(1000 * delay_ms);
  PaperRun run;
  run.all_decided = true;
  run.agreement = true;
  const uint32_t first = crashed_coordinator ? 1 : 0;
  for (uint32_t i = first; i < n; ++i) {
    if (!nodes[i]->decided()) {
      run.all_decided = false;
      continue;
    }
    run.agreement = run.agreement && nodes[i]->decision().SerializeAsString() ==
                                         nodes[first]->decision().SerializeAsString();
    run.decision_round_max = std::max(run.decision_round_max, nodes[i]->decision_round());
    const uint32_t steps = static_cast<uint32_t>(decided_at_ms[i] / delay_ms);
    if (i == 0) {
      run.coordinator_steps = steps;
    } else {
      run.participant_steps = std::max(run.participant_steps, steps);
    }
    run.causal_steps_max = std::max(run.causal_steps_max, nodes[i]->decision_steps());
    const consensus::OrderCounters& c = counters[i];
    run.counters.instances_decided += c.instances_decided;
    run.counters.rounds_total += c.rounds_total;
    run.counters.messages_sent_estimate += c.messages_sent_estimate;
    run.counters.messages_sent_proposal += c.messages_sent_proposal;
    run.counters.messages_sent_ack += c.messages_sent_ack;
    run.counters.messages_sent_nack += c.messages_sent_nack;
    run.counters.messages_sent_decision += c.messages_sent_decision;
    run.counters.messages_sent_decided += c.messages_sent_decided;
  }
  run.messages = network.counters().messages_sent;
  return run;
}

const char* OrderingName(Ordering ordering) {
  return ordering == Ordering::kConsensus ? "consensus" : "sequencer";
}

}  // namespace cohort::sim
