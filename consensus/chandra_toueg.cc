#include "consensus/chandra_toueg.h"

#include <algorithm>

#include "consensus/state_key.h"

namespace cohort::consensus {

using Kind = wire::ConsensusMessage;

ChandraToueg::ChandraToueg(NodeId self, absl::Span<const NodeId> members, uint64_t instance,
                           ConsensusOptions options, const std::set<NodeId>& suspected,
                           size_t first_coordinator)
    : self_(self),
      members_(members.begin(), members.end()),
      instance_(instance),
      first_coordinator_(members_.empty() ? 0 : first_coordinator % members_.size()),
      options_(options),
      majority_(members_.size() / 2 + 1),
      suspected_(suspected) {
  suspected_.erase(self_);
}

void ChandraToueg::Recycle(uint64_t instance, const std::set<NodeId>& suspected,
                           size_t first_coordinator) {
  // Moving a protobuf message swaps its storage: the batches keep their messages and strings,
  // cleared, for the next copies into them (a repeated field reuses its cleared elements).
  wire::MessageBatch estimate = std::move(estimate_);
  wire::MessageBatch decision = std::move(decision_);
  BatchShare share = std::move(share_);
  *this = ChandraToueg(self_, members_, instance, options_, suspected, first_coordinator);
  EmptyForReuse(&estimate);
  EmptyForReuse(&decision);
  estimate_ = std::move(estimate);
  decision_ = std::move(decision);
  share_ = std::move(share);
}

std::shared_ptr<const wire::MessageBatch> ChandraToueg::Share(const wire::MessageBatch& value) {
  return share_.Share(value);
}

bool ChandraToueg::IsMember(NodeId node) const {
  return std::find(members_.begin(), members_.end(), node) != members_.end();
}

void ChandraToueg::ProposeSwap(wire::MessageBatch* value, uint64_t now_ms, ConsensusSends* out) {
  if (started_) return;
  started_ = true;
  now_ms_ = std::max(now_ms_, now_ms);
  estimate_.Swap(value);
  value->Clear();
  timestamp_ = 0;
  // 004 section 4.2: with optimisation 2 round 1 starts in phase 2, no estimates are sent.
  EnterRound(1, !options_.optimisation_2, out);
}

void ChandraToueg::EnterRound(uint32_t round, bool send_estimate, ConsensusSends* out) {
  round_ = round;
  phase_ = Phase::kWaitProposal;
  move_pending_ = false;
  last_sent_ms_ = now_ms_;
  estimates_.clear();
  proposed_ = false;
  acks_.clear();
  nacks_.clear();
  const NodeId coordinator = Coordinator(round);
  if (coordinator == self_) {
    if (round == 1 && options_.optimisation_2) {
      SendProposal(estimate_, out);  // 004 section 4.2: impose its own value
      return;
    }
    estimates_[self_] = {timestamp_, estimate_};
    MaybePropose(out);
    if (!proposed_ && round > 1 && suspected_.count(Coordinator(round - 1)) > 0) {
      // The last round's coordinator is suspected: this one pings at once, not after
      // retransmit_ms. A participant that decided already (it got the last coordinator's
      // proposal, this node did not: the coordinator crashed part-way through sending it)
      // sends no estimate by itself, and answers the ping with the DECISION (cohort-bench's
      // coordinator kill, issue 7). Not on a move without suspicion (no optimisation 1): the
      // ping would pull a coordinator still collecting ACKs out of its round.
      const std::shared_ptr<const wire::MessageBatch> estimate = Share(estimate_);
      for (NodeId member : members_) {
        if (member != self_) Send(member, Kind::ESTIMATE, round, estimate, out);
      }
    }
    return;
  }
  if (send_estimate) Send(coordinator, Kind::ESTIMATE, round, Share(estimate_), out);
  NackSuspectedCoordinators(out);
}

void ChandraToueg::NackSuspectedCoordinators(ConsensusSends* out) {
  // Recursion through EnterRound is bounded: self is never suspected, so at most n - 1 rounds
  // pass before self coordinates, and a self-coordinated round does not come back here.
  if (decided_ || phase_ != Phase::kWaitProposal) return;
  const NodeId coordinator = Coordinator(round_);
  if (coordinator == self_ || suspected_.count(coordinator) == 0) return;
  Send(coordinator, Kind::NACK, round_, nullptr, out);
  EnterRound(round_ + 1, /*send_estimate=*/true, out);
}

void ChandraToueg::MaybePropose(ConsensusSends* out) {
  if (proposed_ || estimates_.size() < majority_) return;
  // Phase 2: the estimate with the largest timestamp (CT's rule; ties: the most messages, so a
  // round after a coordinator's crash orders what the others hold, then the lowest node id).
  const wire::MessageBatch* best = nullptr;
  uint32_t best_timestamp = 0;
  for (const auto& [node, entry] : estimates_) {
    if (best == nullptr || entry.first > best_timestamp ||
        (entry.first == best_timestamp &&
         entry.second.messages_size() > best->messages_size())) {
      best = &entry.second;
      best_timestamp = entry.first;
    }
  }
  SendProposal(*best, out);
}

void ChandraToueg::SendProposal(const wire::MessageBatch& value, ConsensusSends* out) {
  proposed_ = true;
  // The coordinator is a participant too: it adopts its own proposal in this round. While
  // proposed_, estimate_ is the proposal (it changes only in a later round or on deciding):
  // no copy of it is kept apart (issue 7).
  if (&value != &estimate_) estimate_ = value;
  timestamp_ = round_;
  phase_ = Phase::kReplied;
  acks_.insert(self_);
  if (members_.size() > 1) {
    const std::shared_ptr<const wire::MessageBatch> proposal = Share(estimate_);  // one copy
    for (NodeId member : members_) {
      if (member != self_) Send(member, Kind::PROPOSAL, round_, proposal, out);
    }
  }
  if (acks_.size() >= majority_) {  // n == 1
    Decide(estimate_, round_);
  }
}

void ChandraToueg::Step(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out) {
  if (!started_ || from == self_ || !IsMember(from) || message.instance() != instance_) return;
  steps_ = std::max(steps_, message.steps());
  if (decided_) {
    decision_owed_.erase(from);  // it decided (an ACK with n == 3) or is answered now
    if (message.kind() != Kind::DECISION && message.kind() != Kind::DECIDED &&
        !(message.kind() == Kind::ACK && AckMeansDecided())) {
      AnswerWithDecision(from, out);
    }
    return;
  }
  switch (message.kind()) {
    case Kind::ESTIMATE: OnEstimate(from, message, out); break;
    case Kind::PROPOSAL: OnProposal(from, message, out); break;
    case Kind::ACK:
    case Kind::NACK: OnReply(from, message, out); break;
    case Kind::DECISION: OnDecision(from, message, out); break;
    case Kind::DECIDED: OnDecided(from, message, out); break;
    default: break;
  }
}

void ChandraToueg::OnEstimate(NodeId from, const wire::ConsensusMessage& message,
                              ConsensusSends* out) {
  const uint32_t round = message.round();
  if (round == 0) return;  // a catch-up request: only a decided node answers it
  const NodeId coordinator = Coordinator(round);
  if (coordinator != self_ && coordinator != from) return;  // not an estimate nor a ping
  if (round < round_) {
    AnswerStaleRound(from, message, out);
    return;
  }
  if (round > round_) {
    EnterRound(round, /*send_estimate=*/true, out);  // pulled forward; a ping is answered by it
    if (coordinator != self_ || round != round_) return;
  }
  if (coordinator == self_) {
    // Once proposed, a late estimate needs nothing: Tick resends the proposal to non-repliers.
    if (!proposed_) {
      estimates_[from] = {message.timestamp(), message.value()};
      MaybePropose(out);
    }
  } else if (phase_ == Phase::kWaitProposal) {
    // The coordinator's ping: it is still collecting estimates, ours may have been lost.
    Send(coordinator, Kind::ESTIMATE, round_, Share(estimate_), out);
  }
}

void ChandraToueg::OnProposal(NodeId from, const wire::ConsensusMessage& message,
                              ConsensusSends* out) {
  const uint32_t round = message.round();
  if (round == 0 || from != Coordinator(round)) return;
  if (round < round_) {
    AnswerStaleRound(from, message, out);
    return;
  }
  if (round > round_) EnterRound(round, /*send_estimate=*/false, out);
  if (round != round_) return;
  if (phase_ == Phase::kReplied) {  // a retransmission: our reply may have been lost
    Send(from, timestamp_ == round ? Kind::ACK : Kind::NACK, round, nullptr, out);
    return;
  }
  // Phase 3: adopt the proposal and acknowledge it.
  estimate_ = message.value();
  timestamp_ = round;
  phase_ = Phase::kReplied;
  Send(from, Kind::ACK, round, nullptr, out);
  if (options_.optimisation_3 && members_.size() == 3) {
    // 004 section 4.3: this node and the coordinator are a majority holding (estimate, round).
    Decide(estimate_, round);
    return;
  }
  if (options_.optimisation_1 && suspected_.count(from) == 0) {
    move_pending_ = true;  // 004 section 4.1: wait d for the decision before the next round
    move_at_ms_ = now_ms_ + options_.round_delay_ms;
    return;
  }
  EnterRound(round + 1, /*send_estimate=*/true, out);
}

void ChandraToueg::OnReply(NodeId from, const wire::ConsensusMessage& message,
                           ConsensusSends* out) {
  const uint32_t round = message.round();
  if (round != round_ || Coordinator(round) != self_) return;  // stale, or not ours
  if (message.kind() == Kind::NACK && !proposed_) {
    // The sender suspected us and left the round before our proposal: its estimate will not come.
    EnterRound(round_ + 1, /*send_estimate=*/true, out);
    return;
  }
  if (!proposed_) return;
  (message.kind() == Kind::ACK ? acks_ : nacks_).insert(from);
  if (acks_.size() >= majority_) {
    // Phase 4: a majority holds (proposal, round): decide and reliably broadcast the decision.
    Decide(estimate_, round_);  // the proposal
    for (NodeId member : members_) {
      if (member == self_) continue;
      if (acks_.count(member) > 0) {
        // It holds the proposal: a DECIDED without the value tells it to decide it (the batch
        // is not sent a second time). With n == 3 its ACK says it decided already.
        if (!AckMeansDecided()) {
          decision_sent_ms_[member] = now_ms_;  // its next message needs no DECISION either
          Send(member, Kind::DECIDED, round_, nullptr, out);
        }
        continue;
      }
      if (AckMeansDecided() && nacks_.count(member) == 0) {
        // n == 3: its reply to the proposal is on its way, and an ACK means it decided. Sent
        // only if no ACK comes within retransmit_ms (Tick): one message fewer per instance.
        decision_owed_.insert(member);
        continue;
      }
      AnswerWithDecision(member, out);
    }
    return;
  }
  if (acks_.size() + nacks_.size() >= majority_ && !nacks_.empty()) {
    EnterRound(round_ + 1, /*send_estimate=*/true, out);  // CT: a majority replied, not all ACK
  }
}

void ChandraToueg::OnDecision(NodeId /*from*/, const wire::ConsensusMessage& message,
                              ConsensusSends* /*out*/) {
  // No relay on first receipt (CT's reliable broadcast): it costs (n - 1)(n - 2) messages per
  // instance, 30 at n = 7 (issue 7's scaling target). Without it a participant the coordinator's
  // DECISION missed (the coordinator crashed while sending it) still decides: after
  // round_delay_ms (optimisation 1) or a suspicion it moves to the next round, and a decided
  // node answers every message of the instance with the DECISION (Step), the next coordinator's
  // ESTIMATE pings included.
  Decide(message.value(), message.round());
}

void ChandraToueg::OnDecided(NodeId from, const wire::ConsensusMessage& message,
                             ConsensusSends* out) {
  const uint32_t round = message.round();
  if (round == 0 || from != Coordinator(round)) return;
  // Sent only to a member whose ACK of `round` reached its coordinator: it adopted that round's
  // proposal (timestamp = round). A proposal of a later round carries the same value (CT's
  // locking: a majority held it with timestamp `round`, and a coordinator proposes the estimate
  // with the largest timestamp of a majority), so an estimate with timestamp >= round is the
  // decision.
  if (timestamp_ >= round) {
    Decide(estimate_, round);
    return;
  }
  // Cannot happen with correct peers; ask for the value rather than guess (a catch-up request).
  Send(from, Kind::ESTIMATE, 0, nullptr, out);
}

void ChandraToueg::Learn(const wire::MessageBatch& decision, uint32_t round) {
  started_ = true;
  Decide(decision, round);
}

bool ChandraToueg::AckMeansDecided() const {
  // 004 section 4.3: with n == 3 a participant decides as it ACKs a proposal (it and the
  // coordinator are a majority holding the value), so its ACK says it needs no DECISION: two
  // messages fewer per instance (issue 7).
  return options_.optimisation_3 && members_.size() == 3;
}

void ChandraToueg::AnswerStaleRound(NodeId from, const wire::ConsensusMessage& message,
                                    ConsensusSends* out) {
  if (from != Coordinator(message.round())) return;
  // We left that round. The ACK stays true if we still hold that round's proposal.
  const bool ack = message.kind() == Kind::PROPOSAL && timestamp_ == message.round();
  Send(from, ack ? Kind::ACK : Kind::NACK, message.round(), nullptr, out);
}

void ChandraToueg::AnswerWithDecision(NodeId to, ConsensusSends* out) {
  auto it = decision_sent_ms_.find(to);
  if (it != decision_sent_ms_.end() && now_ms_ < it->second + options_.retransmit_ms) return;
  decision_sent_ms_[to] = now_ms_;
  std::shared_ptr<const wire::MessageBatch>& copy = decision_copy_.value;
  if (copy == nullptr) copy = Share(decision_);
  Send(to, Kind::DECISION, decision_round_, copy, out);
}

void ChandraToueg::Decide(const wire::MessageBatch& value, uint32_t round) {
  if (decided_) return;
  decided_ = true;
  // `value` may be the estimate, cleared below: taken (not copied) from it first.
  if (&value == &estimate_) {
    decision_ = std::move(estimate_);
  } else {
    decision_ = value;
  }
  // From now on the instance only answers with its decision: the rest is memory.
  estimates_.clear();
  estimate_.Clear();
  decision_round_ = round;
  decision_steps_ = steps_;
  decided_ms_ = now_ms_;
  move_pending_ = false;
}

void ChandraToueg::Tick(uint64_t now_ms, ConsensusSends* out) {
  now_ms_ = std::max(now_ms_, now_ms);
  if (decided_ && !decision_owed_.empty() && now_ms_ >= decided_ms_ + options_.retransmit_ms) {
    // No ACK came (its proposal or its ACK was lost): the DECISION after all.
    for (NodeId member : decision_owed_) AnswerWithDecision(member, out);
    decision_owed_.clear();
  }
  if (!started_ || decided_) return;
  if (move_pending_ && now_ms_ >= move_at_ms_) {
    EnterRound(round_ + 1, /*send_estimate=*/true, out);
    return;
  }
  if (now_ms_ < last_sent_ms_ + options_.retransmit_ms) return;
  last_sent_ms_ = now_ms_;
  const NodeId coordinator = Coordinator(round_);
  if (coordinator == self_) {
    std::shared_ptr<const wire::MessageBatch> estimate;  // one copy, made at the first send
    for (NodeId member : members_) {
      if (member == self_ || acks_.count(member) > 0 || nacks_.count(member) > 0) continue;
      if (estimate == nullptr) estimate = Share(estimate_);
      // Proposed: resend the proposal (the estimate). Collecting: ping with our estimate (see
      // the header).
      Send(member, proposed_ ? Kind::PROPOSAL : Kind::ESTIMATE, round_, estimate, out);
    }
  } else if (phase_ == Phase::kWaitProposal) {
    Send(coordinator, Kind::ESTIMATE, round_, Share(estimate_), out);
  }
}

void ChandraToueg::Suspect(NodeId node, bool suspected, ConsensusSends* out) {
  if (node == self_) return;
  if (!suspected) {
    suspected_.erase(node);
    return;
  }
  suspected_.insert(node);
  if (!started_ || decided_ || node != Coordinator(round_)) return;
  if (phase_ == Phase::kReplied) {
    EnterRound(round_ + 1, /*send_estimate=*/true, out);  // 004 section 4.1: "or earlier"
  } else {
    NackSuspectedCoordinators(out);
  }
}

// A field added to ChandraToueg must be added to StateKey too (or said to only count, as
// steps_): two states that differ in it would otherwise be taken for one, and the exploration
// would skip what follows. This size (x86-64, libstdc++) changes with a new field.
#if defined(__x86_64__) && defined(__GLIBCXX__)
// 600 with proposal_, a copy of estimate_ while proposed_; 552 with std::vector members_ and
// std::set node sets (session 57); 536 before share_ (memory kept for reuse, not state); 552
// with decision_sent_ms_ a std::map and before decision_copy_ (memory, not state).
static_assert(sizeof(ChandraToueg) == 656, "a new field of ChandraToueg: add it to StateKey");
#endif

std::string ChandraToueg::StateKey() const {
  StateKeyWriter key;
  key.Put(suspected_);
  key.Put(now_ms_);
  key.Put(started_);
  key.Put(round_);
  key.Put(estimate_);
  key.Put(timestamp_);
  key.Put(static_cast<uint64_t>(phase_));
  key.Put(move_pending_);
  key.Put(move_at_ms_);
  key.Put(last_sent_ms_);
  key.Put(static_cast<uint64_t>(estimates_.size()));
  for (const auto& [node, entry] : estimates_) {
    key.Put(node);
    key.Put(entry.first);
    key.Put(entry.second);
  }
  key.Put(proposed_);  // the proposal is estimate_ while proposed_
  key.Put(acks_);
  key.Put(nacks_);
  key.Put(decided_);
  key.Put(decision_);
  key.Put(decision_round_);
  key.Put(decision_sent_ms_);
  key.Put(decided_ms_);
  key.Put(decision_owed_);
  return key.Take();
}

void ChandraToueg::Send(NodeId to, wire::ConsensusMessage::Kind kind, uint32_t round,
                        std::shared_ptr<const wire::MessageBatch> value, ConsensusSends* out) {
  ConsensusSend& send = out->emplace_back();
  send.to = to;
  send.message.set_instance(instance_);
  send.message.set_round(round);
  send.message.set_kind(kind);
  send.message.set_timestamp(timestamp_);
  send.message.set_steps(steps_ + 1);
  send.value = std::move(value);
}

void CountSends(const ConsensusSends& sends, OrderCounters* counters) {
  for (const ConsensusSend& send : sends) {
    switch (send.message.kind()) {
      case Kind::ESTIMATE: ++counters->messages_sent_estimate; break;
      case Kind::PROPOSAL: ++counters->messages_sent_proposal; break;
      case Kind::ACK: ++counters->messages_sent_ack; break;
      case Kind::NACK: ++counters->messages_sent_nack; break;
      case Kind::DECISION: ++counters->messages_sent_decision; break;
      case Kind::DECIDED: ++counters->messages_sent_decided; break;
      default: break;
    }
  }
}

void CountDecision(const ChandraToueg& decided, OrderCounters* counters) {
  ++counters->instances_decided;
  counters->rounds_total += decided.decision_round();
}

}  // namespace cohort::consensus
