// Asymmetric total order: a sequencer assigns global order numbers (003 section 3), made safe
// across sequencer replacement with epochs, in the manner of Viewstamped Replication.
//
//   Epoch e has sequencer members[e mod n]. A member FORWARDs its messages to the sequencer, which
//   appends them to its log (FIFO per origin) and sends them ORDERED with their order numbers.
//   Members store contiguous ORDERED entries and ACK the length of their log; an entry is
//   committed once a majority (the sequencer included) holds it in epoch e, and the sequencer
//   announces `committed` on ORDERED (with n = 3 and optimisation_3, a member holding an entry
//   in epoch e knows that already: it commits on accepting it, and no notice is sent). Members
//   deliver committed entries in order-number order, and ask NEED for gaps.
//   Replacement: a member that suspects the sequencer moves to the next epoch whose sequencer it
//   does not suspect; a message of a higher epoch pulls its receiver into that epoch. The new
//   sequencer asks every member (NEED) for its EPOCH_STATE: (log_epoch, log_length, entries from
//   its own commit point). With a majority of states it takes the log of the state with the
//   largest (log_epoch, log_length) after its committed prefix, and only then orders new
//   messages. A state longer than one batch comes in pieces, each asked for in turn (NEED with
//   state_from), and only the chosen one is fetched whole. Members then FORWARD again their own
//   messages missing from the new log, a batch at a time, each once the last is logged. Any committed entry was held by a majority in some epoch, so it is in the chosen
//   log: nothing delivered anywhere is lost or reordered. Members drop messages of lower epochs.
//   A member adopts a new epoch's log only from a point at or below its own commit point.
//
// Batching: one round of new entries is in flight at a time (SendNewEntries): what arrives
// meanwhile goes out in the next round's ORDERED, once the last round commits.
// Bounds: the log keeps at most log_entries_max entries not yet delivered everywhere (members
// report their deliveries in ACKs, the sequencer passes the minimum on as `stable`, and everyone
// drops the entries below it; beyond it new messages wait, and their origins resend them); a
// message carries at most batch_messages_max entries. Pure state machine (see total_order.h). Not thread-safe.
#ifndef COHORT_CONSENSUS_SEQUENCER_ORDER_H_
#define COHORT_CONSENSUS_SEQUENCER_ORDER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "consensus/batch_share.h"
#include "consensus/reuse_ring.h"
#include "consensus/spare.h"
#include "consensus/total_order.h"
#include "proto/wire.pb.h"

namespace cohort::consensus {

struct SequencerOrderOptions {
  uint64_t retransmit_ms = 50;
  size_t batch_messages_max = 1024;
  // Most payload bytes per FORWARD or ORDERED message (a larger entry goes alone): as
  // ConsensusOrderOptions::batch_bytes_max.
  size_t batch_bytes_max = 1 << 20;
  // Entries kept in the log. Entries every member has delivered are dropped (the sequencer
  // learns members' deliveries from their ACKs and passes the minimum on in ORDERED), so this
  // bounds only what a lagging member holds back; at the bound the sequencer orders nothing more
  // until the laggard catches up or leaves the view (members retransmit their own messages).
  size_t log_entries_max = 1 << 20;
  // With n = 3 a member commits what it holds as it accepts ORDERED entries, and the sequencer
  // sends no commit notices (004 section 4.3's argument: the sequencer and it are a majority).
  bool optimisation_3 = true;
};

class SequencerOrder final : public TotalOrder {
 public:
  // `members` in the same order at every member; `self` is one of them.
  SequencerOrder(NodeId self, std::vector<NodeId> members, SequencerOrderOptions options);

  uint64_t Broadcast(const std::string& payload, Outbox* out) override;
  void Step(NodeId from, const wire::Envelope& message, Outbox* out) override;
  void Tick(uint64_t now_ms, Outbox* out) override;
  void Suspect(NodeId node, bool suspected, Outbox* out) override;
  bool HasPending() const override;
  void Freeze() override { frozen_ = true; }
  const OrderCounters& counters() const override { return counters_; }

  uint32_t epoch() const { return epoch_; }
  NodeId Sequencer(uint32_t epoch) const { return members_[epoch % members_.size()]; }
  bool is_sequencer() const { return Sequencer(epoch_) == self_ && established_; }
  uint64_t committed() const { return commit_; }
  size_t retained() const { return log_.size(); }  // entries kept (from order number log_base_)
  std::string Describe() const override;
  // Every field that decides what this member does next, as bytes (the counters left out: they
  // only count). For the exhaustive exploration of test/sequencer_explorer.h.
  std::string StateKey() const;

 private:
  using Kind = wire::SequencerMessage;
  struct EpochState {
    uint32_t log_epoch = 0;
    uint64_t log_length = 0;
    uint64_t entries_from = 0;  // order number of entries[0]: state_first_ but for a gap below
    std::vector<wire::DataMessage> entries;  // the pieces received so far (OnEpochState)
  };

  void EnterEpoch(uint32_t epoch, Outbox* out);
  void SkipSuspectedSequencers(Outbox* out);
  void OnForward(const wire::MessageBatch& batch, Outbox* out);
  void AppendEarlyForwards(NodeId origin);  // kept forwards of origin that are now in turn
  void OnOrdered(NodeId from, const wire::SequencerMessage& message, Outbox* out);
  // A member entering a new epoch: takes the new sequencer's log once it holds all of it up to
  // its length at establishment; false while asking for the rest.
  bool AdoptEpochLog(NodeId from, const wire::SequencerMessage& message, Outbox* out);
  // Committed entries from any member (a frozen order answering a laggard): they are final.
  void OnCommittedPrefix(const wire::SequencerMessage& message, Outbox* out);
  void AnswerCommittedPrefix(NodeId to, uint64_t first, Outbox* out);
  void OnNeed(NodeId from, const wire::SequencerMessage& message, Outbox* out);
  void OnAck(NodeId from, const wire::SequencerMessage& message, Outbox* out);
  void OnEpochState(NodeId from, const wire::SequencerMessage& message, Outbox* out);
  void MaybeEstablish(Outbox* out);
  // Whether a state holds every entry from state_first_ to its log's end.
  bool StateComplete(const EpochState& state) const;
  // Whether the rest of a state is still to come (asked for piece by piece).
  bool Fetching(const EpochState& state) const;
  // Asks `node` for the next piece of its state (a state longer than one batch).
  void AskStateRest(NodeId node, const EpochState& state, Outbox* out);
  void MaybeCommit(Outbox* out);
  // FORWARDs own messages not in this epoch's log: a batch, from the first missing, to another
  // sequencer; all of them to itself.
  void ForwardOwn(Outbox* out);
  // A member: the next batch of own messages once the sequencer logged those forwarded.
  void ForwardOwnOnLogged(Outbox* out);
  // The highest own seq in this epoch's log (0: none, or the log is another epoch's).
  uint64_t OwnLogged() const;
  // The index in own_ of the first own message with a seq above `seq` (own_.size(): none).
  size_t OwnAfter(uint64_t seq) const;
  // A FORWARD of own messages after `after_seq`: one batch.
  wire::SequencerMessage OwnBatch(uint64_t after_seq) const;
  // Sends one batch of entries from `first`; returns the order number after the last one sent.
  // `made` (optional): the entries made for an earlier member from the same `first` in this
  // step, shared; filled when empty.
  uint64_t SendOrdered(NodeId to, uint64_t first, Outbox* out, SharedBatch* made = nullptr);
  // The sequencer sends the entries not yet sent, unless a round is still uncommitted; true
  // when it sent a round.
  bool SendNewEntries(Outbox* out);
  void SendNeedStates(Outbox* out);
  void Deliver(Outbox* out);
  void EraseOwn(uint64_t seq);  // an own message delivered
  void RebuildLogSeq();
  // Drops the entries below stable_ that this member has delivered.
  void Prune();
  uint64_t log_end() const { return log_base_ + log_.size(); }  // order number after the last
  // The end of one message's entries from `first` (>= log_base_), before `end`: at most
  // batch_messages_max entries and batch_bytes_max payload bytes, and at least one.
  uint64_t BatchEnd(uint64_t first, uint64_t end) const;
  wire::DataMessage& At(uint64_t order) { return log_[order - log_base_]; }
  // Keeps log_[log_base_, keep): drops the entries from order number `keep` on.
  void TruncateLog(uint64_t keep) { log_.truncate(keep - log_base_); }
  uint64_t StableEverywhere() const;  // sequencer: entries every member has delivered
  // `batch`: the message's batch, held apart (shared by several sends).
  void Send(NodeId to, wire::SequencerMessage message, Outbox* out, SharedBatch batch = {});
  bool IsMember(NodeId node) const;
  bool CommitsOnAccept() const;

  const NodeId self_;
  const std::vector<NodeId> members_;
  const SequencerOrderOptions options_;
  bool frozen_ = false;  // see TotalOrder::Freeze
  const size_t majority_;
  OrderCounters counters_;
  std::set<NodeId> suspected_;
  uint64_t now_ms_ = 0;

  // Every member.
  uint32_t epoch_ = 0;                  // highest epoch known
  uint32_t log_epoch_ = 0;              // epoch whose sequencer wrote log_ (a prefix of its log)
  // Order numbers [log_base_, log_end()); below log_base_ every member has delivered them.
  // Entries dropped leave their objects for the next ones (ReuseRing, issue 7).
  ReuseRing<wire::DataMessage> log_;
  uint64_t log_base_ = 0;
  uint64_t stable_ = 0;                 // entries every member has delivered (known here)
  std::map<NodeId, uint64_t> pruned_seq_;  // origin -> highest seq among dropped entries
  std::map<NodeId, uint64_t> member_delivered_;  // sequencer: member -> delivered (its ACKs)
  uint64_t commit_ = 0;                 // log_[0, commit_) is committed; commit_ <= log_.size()
  // A member taking a new epoch's log: its entries from order number adopt_from_, held until
  // they reach the log's length at establishment (AdoptEpochLog).
  bool adopting_ = false;
  uint64_t adopt_from_ = 0;
  std::deque<wire::DataMessage> adopt_;
  size_t need_cursor_ = 0;              // round-robin target of committed-prefix requests
  uint64_t delivered_ = 0;              // log_[0, delivered_) handed out
  std::map<NodeId, uint64_t> delivered_seq_;  // origin -> highest delivered seq
  std::map<NodeId, uint64_t> log_seq_;  // origin -> highest seq in log_ (the sequencer appends)
  // Sequencer: forwarded messages that came ahead of an earlier one of their origin, by origin
  // and seq; appended once the gap closes (at most kEarlyForwardsMax in all).
  static constexpr size_t kEarlyForwardsMax = 256;
  std::map<NodeId, std::map<uint64_t, wire::DataMessage>> early_forwards_;
  size_t early_forwards_count_ = 0;
  uint64_t next_seq_ = 0;
  // Own messages not yet delivered (origin self_, seq, payload), by ascending seq: a ring that
  // reuses the objects of those delivered (issue 7).
  ReuseRing<wire::DataMessage> own_;
  // Own messages below forward_next_ were FORWARDed to the sequencer of forwarded_epoch_. A
  // backlog (own messages left out of a new epoch's log) goes one batch per round trip, each
  // once the last is logged (ForwardOwnOnLogged), and new messages wait behind it.
  uint32_t forwarded_epoch_ = 0;
  uint64_t forward_next_ = 1;
  uint64_t last_retransmit_ms_ = 0;

  // Sequencer of epoch_.
  bool established_ = true;  // epoch 0 starts established: every log is empty
  std::map<NodeId, uint64_t> acked_;  // member -> log length acknowledged in epoch_
  uint64_t sent_end_ = 0;  // the sequencer sent ORDERED for entries below this in epoch_
  // The log's length when this sequencer established epoch_: it holds every entry committed
  // before, and a member takes the new log only whole up to it (ORDERED.log_length).
  uint64_t established_length_ = 0;
  uint64_t state_first_ = 0;          // the commit point states are requested from
  std::map<NodeId, EpochState> states_;

  // Memory kept for reuse, not state: the batch of the last FORWARD and of the last ORDERED round.
  BatchShare forward_share_;
  BatchShare ordered_share_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_SEQUENCER_ORDER_H_
