// One instance of Chandra-Toueg consensus for the ◇S failure detector: rotating coordinator,
// coordinator of round r = members[(first + r - 1) mod n], `first` fixed per instance (004
// section 2.3; Chandra & Toueg 1996, fig. 6: any rotation every member agrees on will do).
//
//   phase 1: every participant sends (estimate, timestamp) to the coordinator;
//   phase 2: the coordinator waits for a majority of estimates and proposes the one with the
//            largest timestamp;
//   phase 3: a participant that receives the proposal adopts it (timestamp = round) and ACKs;
//            one that suspects the coordinator NACKs; then it moves to the next round;
//   phase 4: the coordinator that gathers a majority of ACKs decides and sends the DECISION to
//            all. It is not relayed on receipt (CT's reliable broadcast, (n-1)(n-2) messages):
//            a participant it missed moves on a round and any decided node answers with it.
//            A participant whose ACK it counted gets a DECIDED without the value instead: it
//            holds the proposal (issue 7: the batch is not sent twice).
//
// Optimisations (004 section 4), each an option:
//   1 (4.1): after an ACK, move to the next round only after round_delay_ms or on suspicion;
//   2 (4.2): round 1 starts in phase 2: its coordinator proposes its own value (3 steps, not 4);
//   3 (4.3): n == 3: a participant that accepts the proposal decides at once (with the
//            coordinator it forms a majority holding the value with timestamp = round). Its
//            ACK therefore says it decided: the coordinator, deciding on the first ACK, sends
//            the other participant the DECISION only if its ACK does not come within
//            retransmit_ms (a NACK or any other message is answered with it at once).
//
// Safe with any number of crashes and any message loss; live with a majority correct and ◇S.
// Loss is repaired by retransmitting the current phase's message every retransmit_ms, and a
// decided node answers any message of the instance with the DECISION. Rounds only move forward:
// a message of a higher round pulls the receiver into that round (safe: skipping a round is like
// losing its messages). A coordinator still collecting estimates pings the others with its own
// ESTIMATE; a node already in a later round answers it with a NACK, which releases it.
//
// Pure: no clock (time comes through Tick), no randomness, no I/O. Not thread-safe.
#ifndef COHORT_CONSENSUS_CHANDRA_TOUEG_H_
#define COHORT_CONSENSUS_CHANDRA_TOUEG_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "consensus/batch_share.h"
#include "consensus/node_set.h"
#include "consensus/spare.h"
#include "consensus/total_order.h"
#include "proto/wire.pb.h"

namespace cohort::consensus {

struct ConsensusOptions {
  bool optimisation_1 = true;    // 004 section 4.1
  bool optimisation_2 = true;    // 004 section 4.2
  bool optimisation_3 = true;    // 004 section 4.3 (only applies when n == 3)
  uint64_t round_delay_ms = 20;  // d of optimisation 1: longer than a usual round trip
  uint64_t retransmit_ms = 50;   // resend the current phase's message after this long
};

// A message of an instance to one member. Its value (an estimate, a proposal or a decision) is
// held apart and shared: a proposal to n - 1 members is one copy of the batch, not n - 1, and the
// raw TCP transport serialises it into each peer's bytes from that copy (issue 7;
// consensus::SharedBatch).
struct ConsensusSend {
  NodeId to = 0;
  wire::ConsensusMessage message;                   // without its value
  std::shared_ptr<const wire::MessageBatch> value;  // null: none (an ACK, a NACK, a DECIDED)

  // The message as its receiver parses it, value included (a copy).
  wire::ConsensusMessage WithValue() const {
    wire::ConsensusMessage whole = message;
    if (value != nullptr) *whole.mutable_value() = *value;
    return whole;
  }
};
using ConsensusSends = std::vector<ConsensusSend>;

class ChandraToueg {
 public:
  // `members` is the group in coordinator order, from members[first_coordinator] for round 1;
  // `self` must be one of them. The instance holds no pointer: a copy is a whole, independent
  // instance (the exhaustive explorer copies states); its caller counts what it sends
  // (CountSends) and decides (CountDecision).
  ChandraToueg(NodeId self, absl::Span<const NodeId> members, uint64_t instance,
               ConsensusOptions options, const std::set<NodeId>& suspected,
               size_t first_coordinator = 0);

  // Makes this object a new instance `instance` of the same group (members, options) with these
  // suspicions and first coordinator, as if constructed, but keeping the memory of its batches
  // (estimate, decision, shared copy): a decided instance that leaves the log becomes the next one
  // without allocating (ConsensusOrder::PruneDecided; issue 7).
  void Recycle(uint64_t instance, const std::set<NodeId>& suspected, size_t first_coordinator);

  // Starts the instance with this node's initial value. Call once, before Step.
  void Propose(wire::MessageBatch value, uint64_t now_ms, ConsensusSends* out) {
    ProposeSwap(&value, now_ms, out);
  }
  // The same, taking the value by swapping: `*value` gets the memory of this instance's cleared
  // estimate (Recycle), for the caller's next batch.
  void ProposeSwap(wire::MessageBatch* value, uint64_t now_ms, ConsensusSends* out);
  // A message of this instance from `from`.
  void Step(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  void Tick(uint64_t now_ms, ConsensusSends* out);
  void Suspect(NodeId node, bool suspected, ConsensusSends* out);
  // A decision learnt from a member that decided already (catch-up): the instance is decided
  // with it, without taking part or relaying it (the others have it).
  void Learn(const wire::MessageBatch& decision, uint32_t round);
  // Decided: sends the decision to `to` (at most once per retransmit_ms per member).
  void ResendDecision(NodeId to, ConsensusSends* out) {
    if (decided_) AnswerWithDecision(to, out);
  }
  // Advances the clock without retransmitting (decided instances kept to answer laggards).
  void SetNow(uint64_t now_ms) { now_ms_ = now_ms > now_ms_ ? now_ms : now_ms_; }

  uint64_t instance() const { return instance_; }
  uint32_t round() const { return round_; }
  bool decided() const { return decided_; }
  const wire::MessageBatch& decision() const { return decision_; }
  uint32_t decision_round() const { return decision_round_; }
  // Communication steps from the start of the instance to this node's decision (004 section 4).
  uint32_t decision_steps() const { return decision_steps_; }
  // Decided, and a DECISION is still owed to a participant if its ACK does not come (Tick).
  bool owes_decision() const { return !decision_owed_.empty(); }

  size_t first_coordinator() const { return first_coordinator_; }
  NodeId Coordinator(uint32_t round) const {
    return members_[(first_coordinator_ + round - 1) % members_.size()];
  }

  // Every field that decides what this instance does next, as bytes: two instances with equal
  // keys act alike on every input. For the exhaustive exploration of test/consensus_explorer.h,
  // which visits each state once. `steps_` is left out: it only counts.
  std::string StateKey() const;

 private:
  enum class Phase { kWaitProposal, kReplied };

  void EnterRound(uint32_t round, bool send_estimate, ConsensusSends* out);
  // Phase 3 on suspicion: NACK and move on, as long as the coordinator is suspected.
  void NackSuspectedCoordinators(ConsensusSends* out);
  void MaybePropose(ConsensusSends* out);
  void SendProposal(const wire::MessageBatch& value, ConsensusSends* out);
  void OnEstimate(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  void OnProposal(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  void OnReply(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  void OnDecision(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  void OnDecided(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  // Answers a message of an earlier round sent by that round's coordinator.
  void AnswerStaleRound(NodeId from, const wire::ConsensusMessage& message, ConsensusSends* out);
  // An ACK means its sender decided already (optimisation 3 with n == 3).
  bool AckMeansDecided() const;
  void AnswerWithDecision(NodeId to, ConsensusSends* out);
  void Decide(const wire::MessageBatch& value, uint32_t round);
  // `value` (may be null) is shared by every send it is given to: a loop sending one value to
  // several members makes it once (Share) and hands it to each.
  void Send(NodeId to, wire::ConsensusMessage::Kind kind, uint32_t round,
            std::shared_ptr<const wire::MessageBatch> value, ConsensusSends* out);
  // A copy of `value` to hand to sends, made in the last one's memory once no send holds that.
  std::shared_ptr<const wire::MessageBatch> Share(const wire::MessageBatch& value);
  bool IsMember(NodeId node) const;

  // Fixed for the instance (not const: Recycle reassigns the object).
  NodeId self_;
  // Inline (no allocation up to 8 members): an instance is made per ordered batch (issue 7).
  absl::InlinedVector<NodeId, NodeSet::kInline> members_;
  uint64_t instance_;
  size_t first_coordinator_;
  ConsensusOptions options_;
  size_t majority_;  // floor(n / 2) + 1
  NodeSet suspected_;
  uint64_t now_ms_ = 0;
  uint32_t steps_ = 0;  // largest `steps` received: this node's causal depth in the instance

  // Participant state (every node, the coordinator included).
  bool started_ = false;
  uint32_t round_ = 0;
  wire::MessageBatch estimate_;
  uint32_t timestamp_ = 0;  // round in which estimate_ was adopted; 0 = initial value
  Phase phase_ = Phase::kWaitProposal;
  bool move_pending_ = false;  // optimisation 1: move to round_ + 1 at move_at_ms_
  uint64_t move_at_ms_ = 0;
  uint64_t last_sent_ms_ = 0;  // for retransmission of the current phase's message

  // Coordinator state, for round_ when self is its coordinator.
  std::map<NodeId, std::pair<uint32_t, wire::MessageBatch>> estimates_;  // node -> (ts, estimate)
  bool proposed_ = false;  // the proposal is estimate_ (SendProposal)
  NodeSet acks_;
  NodeSet nacks_;

  // Decision.
  bool decided_ = false;
  wire::MessageBatch decision_;
  uint32_t decision_round_ = 0;
  uint32_t decision_steps_ = 0;
  NodeMap<uint64_t> decision_sent_ms_;  // rate limit of DECISION answers per node
  uint64_t decided_ms_ = 0;
  NodeSet decision_owed_;  // n == 3: sent at decided_ms_ + retransmit_ms unless it ACKs

  // The last copy Share made: refilled once no send holds it any more.
  BatchShare share_;
  // The decision's shared copy, made for the first DECISION and given to every later one (the
  // decision does not change): not a copy per participant. Memory, not state.
  Spare<std::shared_ptr<const wire::MessageBatch>> decision_copy_;
};

// Adds the messages in `sends` to `counters`, by kind.
void CountSends(const ConsensusSends& sends, OrderCounters* counters);
// Adds a decided instance (and its deciding round) to `counters`.
void CountDecision(const ChandraToueg& decided, OrderCounters* counters);

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_CHANDRA_TOUEG_H_
