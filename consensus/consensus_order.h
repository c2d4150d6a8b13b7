// Symmetric total order (atomic broadcast) on a sequence of Chandra-Toueg consensus instances,
// each deciding a BATCH of messages (004 section 3.2; Chandra & Toueg 1996, section 6).
//
//   Broadcast: the message is diffused to every member (wire Diffusion) and again every
//     retransmit_ms while undelivered; each member keeps the set of unordered messages. A member
//     about to start an instance whose round 1 it coordinates diffuses nothing: its proposal
//     carries the message. A member that gets a proposal it will not adopt (a round it has left,
//     e.g. suspecting the coordinator, or an instance decided here) keeps its messages as if
//     diffused, so that its next estimate carries them.
//   Round 1 of instance k + 1 is coordinated by the member with the most messages decided in k
//     (ties: the first in the batch; the coordinator rotates from there in later rounds): the
//     member that broadcasts most coordinates the instances ordering its messages.
//   Instance k starts at a member once k - 1 is decided there and it has unordered messages, or
//     when it receives a message of instance k. Its initial value is a batch of its unordered
//     messages, FIFO-closed per origin (seq s is in only if s - 1 is delivered or in the batch).
//   Decision of k: the batch's messages are delivered in (origin, seq) order, skipping any already
//     delivered or that would break FIFO per origin (those go back to the unordered set). The rule
//     is deterministic, so every member delivers the same sequence.
//   Reordering: a message of instance k + 1 .. k + 4 that comes before this member decided k
//     (the next coordinator's PROPOSAL can overtake the decision of k, which comes on another
//     link) is kept and handled in its turn, not dropped: dropped, the proposal came again only
//     after retransmit_ms, and with n >= 5 its coordinator often lacked a majority of ACKs
//     until then (kv-nemesis, session 13: 10% of the calls at n = 5 waited 50 ms; with n = 3 a
//     coordinator can be two instances behind, cohort-sim --stack --fault-free, session 14).
//   Loss: own undelivered messages are diffused again every retransmit_ms; the instance
//     retransmits its phase messages; a member that learns of a later instance asks the sender
//     for the decision of its current one (ESTIMATE with round 0), and an idle member probes one
//     member every probe_ms the same way. Decided instances are kept to answer such requests
//     until every member has moved past them (ConsensusOrderOptions::decided_log_max has the
//     bounds); a member asking beyond them is reported to be re-admitted with the state.
//
// Pure state machine (see total_order.h). Not thread-safe.
#ifndef COHORT_CONSENSUS_CONSENSUS_ORDER_H_
#define COHORT_CONSENSUS_CONSENSUS_ORDER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "consensus/chandra_toueg.h"
#include "consensus/spare.h"
#include "consensus/total_order.h"
#include "proto/wire.pb.h"

namespace cohort::consensus {

struct ConsensusOrderOptions {
  ConsensusOptions consensus;           // optimisations 1-3, round_delay_ms, retransmit_ms
  size_t batch_messages_max = 1024;     // most messages one instance orders
  // Most payload bytes one instance orders (a larger message goes alone). Without it, a backlog
  // of large messages (1024 x 16 KiB one-way calls) made proposals of 16 MiB that kept the
  // protocol threads busy past the suspicion timeout, and the rounds moved on without deciding
  // (cohort-bench --payload 16384: 163 one-way calls/s, then UNAVAILABLE).
  size_t batch_bytes_max = 1 << 20;
  // Others' messages held beyond it are dropped (resent later), the latest of an origin first.
  size_t unordered_messages_max = 65536;
  // Decided instances are kept to answer laggards until every member has moved past them (a
  // member's consensus message about instance k shows it delivered every instance before k), so
  // a member that fell behind by any amount while it was slow or cut off for less than the
  // exclusion timeout can still catch up. Bounds on what a member that never moves on (crashed,
  // until its exclusion) can hold: beyond either, the oldest decided instances go, and a member
  // asking for one of them is reported (Outbox::beyond_log) to be re-admitted with the state.
  size_t decided_log_max = 65536;
  size_t decided_log_bytes_max = 64 << 20;
  uint64_t probe_ms = 500;              // idle catch-up probe period
};

class ConsensusOrder final : public TotalOrder {
 public:
  // `members` in coordinator order (the same at every member); `self` is one of them.
  ConsensusOrder(NodeId self, std::vector<NodeId> members, ConsensusOrderOptions options);

  uint64_t Broadcast(const std::string& payload, Outbox* out) override;
  void Step(NodeId from, const wire::Envelope& message, Outbox* out) override;
  void Tick(uint64_t now_ms, Outbox* out) override;
  void Suspect(NodeId node, bool suspected, Outbox* out) override;
  bool HasPending() const override;
  void Freeze() override { frozen_ = true; }
  const OrderCounters& counters() const override { return counters_; }

  // The lowest instance not yet decided here.
  uint64_t next_instance() const { return next_instance_; }
  // The round of instance next_instance_ here (0: not started).
  uint32_t round() const;
  // Instance k if this member still holds it (running or decided and kept), else null.
  const ChandraToueg* instance(uint64_t k) const;

  // Every field that decides what this member does next, as bytes (its instances' StateKeys
  // included): two members with equal keys act alike on every input. For the exhaustive
  // exploration of test/consensus_order_explorer.h. The counters are left out: they only count.
  std::string StateKey() const;
  std::string Describe() const override;

 private:
  using MessageId = std::pair<NodeId, uint64_t>;  // (origin, seq)

  ChandraToueg* Current();
  // Creates instance next_instance_, coordinated first by members_[leader_].
  ChandraToueg* StartInstance();
  void MaybeStartInstance(bool even_if_empty, Outbox* out);
  // Fills `batch` (cleared first, its memory kept) with the next messages to order.
  void MakeBatch(wire::MessageBatch* batch) const;
  // Drops a decided instance from the log, keeping its object for the next StartInstance.
  void DropInstance(std::map<uint64_t, ChandraToueg>::iterator it);
  // Holds another member's (or a re-queued own) message for a later batch; beyond
  // unordered_messages_max only in place of a later message of the same origin, else dropped.
  void KeepUnordered(NodeId origin, uint64_t seq, const std::string& payload);
  void OnDiffusion(const wire::Diffusion& diffusion, Outbox* out);
  // Keeps the batch's messages not delivered here yet (another member's) for a later batch.
  void KeepUndelivered(const wire::MessageBatch& batch);
  void OnConsensus(NodeId from, const wire::ConsensusMessage& message, Outbox* out);
  void DeliverDecided(Outbox* out);
  void DeliverDecidedInstances(Outbox* out);
  // After next_instance_ moved: handles the kept messages of the instance now running.
  void ReplayNextInstanceMessages(Outbox* out);
  void DeliverBatch(const wire::MessageBatch& batch, Outbox* out);
  void ChooseNextCoordinator(const wire::MessageBatch& decision);  // sets leader_ (next instance)
  void SendCatchUpRequest(NodeId to, Outbox* out);
  // Answers a catch-up request for `instance` (decided here) with its decision and those of the
  // next kCatchUpWindow - 1 decided instances: a laggard catches up a window per round trip.
  void AnswerCatchUp(NodeId to, uint64_t instance, ConsensusSends* sends);
  // A decision of a later instance than the next one, kept (bounded) until its turn.
  void KeepEarlyDecision(const wire::ConsensusMessage& message);
  // Drops decided instances every member has moved past, and any beyond the bounds.
  void PruneDecided();
  // Every member delivered every instance below this, as far as this member knows.
  uint64_t EveryonePast() const;
  // Decided instances that still owe a participant its DECISION (n == 3, optimisation 3).
  void TickOwedDecisions(Outbox* out);
  // `from` asked about an instance this member no longer holds (rate-limited per member).
  void ReportBeyondLog(NodeId from, const wire::ConsensusMessage& message, Outbox* out);
  // Hands what the instance just sent (sends_) to `out` and empties sends_.
  void Flush(Outbox* out);
  void Diffuse(wire::MessageBatch batch, Outbox* out);  // to every other member, one copy
  bool IsMember(NodeId node) const;

  const NodeId self_;
  const std::vector<NodeId> members_;
  const ConsensusOrderOptions options_;
  bool frozen_ = false;  // see TotalOrder::Freeze
  OrderCounters counters_;
  std::set<NodeId> suspected_;
  uint64_t now_ms_ = 0;
  // What an instance sends in one step, until Flush: reused, so a step allocates no vector for
  // it (issue 7). Empty between steps (left out of StateKey).
  ConsensusSends sends_;

  uint64_t next_seq_ = 0;                     // last seq this member broadcast
  std::map<NodeId, uint64_t> delivered_seq_;  // origin -> highest delivered seq (FIFO prefix)
  // Received, not delivered. B-trees here and below: an entry made and erased per message or
  // per instance allocates a node only now and then, not each time (issue 7).
  SpareBtreeMap<MessageId, std::string> unordered_;  // (root kept when empty: spare.h)

  uint64_t next_instance_ = 1;
  size_t leader_ = 0;  // index in members_ of the round-1 coordinator of next_instance_
  // Instance next_instance_ (when started) and the decided ones before it still kept
  // (PruneDecided); decided_bytes_ is the size of the decisions kept.
  std::map<uint64_t, ChandraToueg> instances_;
  // An instance dropped from the log, recycled by StartInstance: its map node and batches are
  // reused (ChandraToueg::Recycle), not allocated per ordered batch (issue 7).
  Spare<std::map<uint64_t, ChandraToueg>::node_type> spare_instance_;
  // The batch MaybeStartInstance makes; it swaps storage with the started instance's estimate.
  Spare<wire::MessageBatch> next_batch_;
  // Decided instances whose owes_decision() was true at delivery (its root kept as it empties
  // and fills again per instance: spare.h).
  SpareBtreeSet<uint64_t> owing_;

  uint64_t last_diffusion_ms_ = 0;
  uint64_t last_catch_up_ms_ = 0;
  bool catch_up_sent_ = false;
  uint64_t last_probe_ms_ = 0;
  size_t probe_cursor_ = 0;
  struct EarlyDecision {
    wire::MessageBatch value;
    uint32_t round = 0;
  };
  std::map<uint64_t, EarlyDecision> early_decisions_;  // by instance, > next_instance_
  // Messages of the instances just ahead (next_instance_ + 1 .. + kInstancesAheadKept) that came
  // before this member decided next_instance_ (the next coordinator's PROPOSAL overtaking the
  // decision on another link), handled once it has; at most kNextInstanceMessagesMax. Two ahead
  // is common with n = 3: a round-1 coordinator decides one step after its participants
  // (optimisation 3, 004 section 4.3), and the next two coordinators may have proposed by then.
  static constexpr size_t kNextInstanceMessagesMax = 64;
  static constexpr uint64_t kInstancesAheadKept = 4;
  std::vector<std::pair<NodeId, wire::ConsensusMessage>> next_instance_messages_;
  NodeId highest_instance_sender_ = 0;
  size_t decided_bytes_ = 0;
  // Instance -> its decision's size: a window that moves by one each instance, its B-tree nodes
  // from a pool (a node freed at the front is the next at the back, issue 7).
  SpareBtreeMap<uint64_t, size_t> decided_sizes_;
  std::map<NodeId, uint64_t> member_next_;     // member -> it delivered every instance below this
  // The highest delivered_everywhere a member sent: the participants of a coordinator that keeps
  // its role hear only from it, so member_next_ alone never let them prune (each kept up to
  // decided_log_max instances per group: 2,000 CreateGroup calls left 2,000 in the daemons'
  // own group at two of three daemons).
  uint64_t told_everyone_past_ = 0;
  std::map<NodeId, uint64_t> beyond_log_reported_ms_;
  uint64_t highest_instance_heard_ = 0;  // from any member (Describe)
  uint64_t unanswerable_requests_ = 0;   // catch-up requests older than the decided log
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_CONSENSUS_ORDER_H_
