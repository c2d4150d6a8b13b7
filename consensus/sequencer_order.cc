#include "consensus/sequencer_order.h"

#include <algorithm>
#include <functional>

#include "consensus/batch_bound.h"
#include "consensus/state_key.h"

namespace cohort::consensus {

SequencerOrder::SequencerOrder(NodeId self, std::vector<NodeId> members,
                               SequencerOrderOptions options)
    : self_(self),
      members_(std::move(members)),
      options_(options),
      majority_(members_.size() / 2 + 1) {}

bool SequencerOrder::CommitsOnAccept() const {
  // 004 section 4.3's reasoning for the sequencer, with 3 replicas as in the paper: the
  // sequencer and one member are a majority, so a member holding an entry ORDERED in the current
  // epoch knows it committed. Not with 2: a participant that joined the view late committed the
  // sequencer's entries at once, delivered a view change among them and left, while the
  // sequencer never committed them (cohort-sim --stack --streams-break, sequencer seed 350).
  return options_.optimisation_3 && members_.size() == 3;
}

bool SequencerOrder::IsMember(NodeId node) const {
  return std::find(members_.begin(), members_.end(), node) != members_.end();
}

uint64_t SequencerOrder::Broadcast(const std::string& payload, Outbox* out) {
  const uint64_t seq = ++next_seq_;
  wire::DataMessage& own = own_.emplace_back();  // copied into a delivered one's memory
  own.set_origin(self_);
  own.set_seq(seq);
  own.set_payload(payload);
  // The FORWARD's batch is made in the last one's memory and held apart (SharedBatch).
  wire::MessageBatch* batch = forward_share_.Refill();
  *batch->add_messages() = own;
  if (Sequencer(epoch_) == self_) {
    OnForward(*batch, out);
  } else if (forwarded_epoch_ == epoch_ && forward_next_ == seq) {
    forward_next_ = seq + 1;
    wire::SequencerMessage forward;
    forward.set_kind(Kind::FORWARD);
    forward.set_epoch(epoch_);
    Send(Sequencer(epoch_), std::move(forward), out,
         {forward_share_.shared(), SharedBatch::Field::kSequencerBatch});
  }
  // Otherwise it goes after the earlier ones still to be forwarded (ForwardOwnOnLogged), rather
  // than overtake them and wait at the sequencer (early_forwards_, bounded).
  return seq;
}

size_t SequencerOrder::OwnAfter(uint64_t seq) const {
  size_t low = 0, high = own_.size();  // own_ is by ascending seq
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    if (own_[middle].seq() <= seq) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

uint64_t SequencerOrder::OwnLogged() const {
  if (log_epoch_ != epoch_) return 0;
  auto found = log_seq_.find(self_);
  return found == log_seq_.end() ? 0 : found->second;
}

wire::SequencerMessage SequencerOrder::OwnBatch(uint64_t after_seq) const {
  wire::SequencerMessage forward;
  forward.set_kind(Kind::FORWARD);
  forward.set_epoch(epoch_);
  BatchBound bound(options_.batch_messages_max, options_.batch_bytes_max);
  for (size_t i = OwnAfter(after_seq); i < own_.size() && bound.Fits(own_[i].payload().size());
       ++i) {
    bound.Add(own_[i].payload().size());
    *forward.mutable_batch()->add_messages() = own_[i];
  }
  return forward;
}

void SequencerOrder::ForwardOwn(Outbox* out) {
  if (forwarded_epoch_ != epoch_) {
    forwarded_epoch_ = epoch_;
    forward_next_ = 1;
  }
  if (own_.empty()) {
    forward_next_ = std::max(forward_next_, next_seq_ + 1);
    return;
  }
  // Own messages already in this epoch's log (the sequencer sent them back in ORDERED) are not
  // forwarded again: the retransmission starts where the sequencer may lack some. (From the
  // oldest, it resent a backlog's ordered head each retransmit_ms while the sequencer, missing
  // later ones behind a gap, ordered one batch per tick: cohort-bench --payload 16384, closed
  // calls from outside through a sequencer, 1,300 one-way calls/s.)
  uint64_t logged = OwnLogged();
  if (Sequencer(epoch_) == self_) {
    // Appended here at once, batch by batch, while the log takes them: a backlog left out of
    // this epoch's log (by the state it was established with) need not wait a tick per batch.
    while (OwnAfter(logged) < own_.size()) {
      OnForward(OwnBatch(logged).batch(), out);
      const uint64_t now_logged = OwnLogged();
      if (now_logged <= logged) break;  // not established, or the log is full
      logged = now_logged;
    }
    forward_next_ = std::max(forward_next_, next_seq_ + 1);
    return;
  }
  wire::SequencerMessage forward = OwnBatch(logged);
  forward_next_ = std::max(forward_next_, logged + 1);
  const auto& messages = forward.batch().messages();
  if (!messages.empty()) {
    forward_next_ = std::max(forward_next_, messages[messages.size() - 1].seq() + 1);
  }
  Send(Sequencer(epoch_), std::move(forward), out);
}

void SequencerOrder::ForwardOwnOnLogged(Outbox* out) {
  if (forwarded_epoch_ != epoch_ || log_epoch_ != epoch_ || Sequencer(epoch_) == self_) return;
  auto logged = log_seq_.find(self_);
  if (logged == log_seq_.end() || logged->second + 1 < forward_next_) return;  // some in flight
  if (OwnAfter(forward_next_ - 1) == own_.size()) return;  // none waits (forward_next_ >= 1)
  ForwardOwn(out);
}

void SequencerOrder::Step(NodeId from, const wire::Envelope& envelope, Outbox* out) {
  if (!envelope.has_sequencer() || from == self_ || !IsMember(from)) return;
  const wire::SequencerMessage& message = envelope.sequencer();
  const bool prefix_request = message.kind() == Kind::NEED && message.log_epoch() == UINT32_MAX;
  if (frozen_ || prefix_request) {
    // Committed entries are final, so any member may give them to a laggard; a frozen order (its
    // view ended here) does nothing else.
    if (message.kind() == Kind::NEED) AnswerCommittedPrefix(from, message.first_order(), out);
    return;
  }
  if (message.kind() == Kind::ORDERED && message.log_epoch() == UINT32_MAX) {
    OnCommittedPrefix(message, out);
    return;
  }
  if (message.epoch() < epoch_) {
    // A member of an older epoch: its data can still be ordered; the rest is stale. It is told
    // of this epoch (a message of a higher epoch pulls its receiver in, see the header): it may
    // have missed every message of the change, as a member whose group started after the others
    // had replaced its sequencer (their messages were dropped before it ran the group). Still the
    // sequencer in its own eyes, it would wait for acknowledgements that never come, and nobody
    // else would send it anything (found by add_group_sim_test).
    if (message.kind() == Kind::FORWARD) OnForward(message.batch(), out);
    wire::SequencerMessage notice;  // an empty FORWARD of this epoch
    notice.set_kind(Kind::FORWARD);
    notice.set_epoch(epoch_);
    Send(from, std::move(notice), out);
    return;
  }
  if (message.epoch() > epoch_) EnterEpoch(message.epoch(), out);
  if (message.epoch() != epoch_) return;  // skipped past it: its sequencer is suspected
  switch (message.kind()) {
    case Kind::FORWARD: OnForward(message.batch(), out); break;
    case Kind::ORDERED: OnOrdered(from, message, out); break;
    case Kind::NEED: OnNeed(from, message, out); break;
    case Kind::ACK: OnAck(from, message, out); break;
    case Kind::EPOCH_STATE: OnEpochState(from, message, out); break;
    default: break;
  }
}

void SequencerOrder::OnForward(const wire::MessageBatch& batch, Outbox* out) {
  if (!is_sequencer()) return;  // the member retransmits to the right sequencer
  const uint64_t first = log_end();
  for (const wire::DataMessage& data : batch.messages()) {
    if (!IsMember(data.origin()) || log_.size() >= options_.log_entries_max) continue;
    uint64_t& last = log_seq_[data.origin()];
    if (data.seq() <= last) continue;  // a duplicate
    if (data.seq() > last + 1) {
      // A gap (FIFO per origin): an earlier message of the origin is still on its way, on another
      // path or as a retransmission. Kept, not dropped, so it need not wait for the origin's
      // retransmission (retransmit_ms: cohort-sim --stack --fault-free showed 50 ms calls).
      if (early_forwards_count_ < kEarlyForwardsMax &&
          early_forwards_[data.origin()].emplace(data.seq(), data).second) {
        ++early_forwards_count_;
      }
      continue;
    }
    log_.push_back(data);
    last = data.seq();
    AppendEarlyForwards(data.origin());
  }
  if (log_end() == first) return;
  acked_[self_] = log_end();
  SendNewEntries(out);
  MaybeCommit(out);
}

void SequencerOrder::AppendEarlyForwards(NodeId origin) {
  auto kept = early_forwards_.find(origin);
  if (kept == early_forwards_.end()) return;
  uint64_t& last = log_seq_[origin];
  auto& messages = kept->second;
  while (!messages.empty() && messages.begin()->first <= last + 1 &&
         log_.size() < options_.log_entries_max) {
    auto next = messages.begin();
    if (next->first == last + 1) {
      log_.push_back(std::move(next->second));
      last = next->first;
    }
    messages.erase(next);
    --early_forwards_count_;
  }
  if (messages.empty()) early_forwards_.erase(kept);
}

bool SequencerOrder::SendNewEntries(Outbox* out) {
  // One round of new entries in flight at a time, as the symmetric order runs one consensus
  // instance at a time (004 section 3.2: many requests per ordering step): entries that arrive
  // while the last round is uncommitted go out together once it commits, one ORDERED and one ACK
  // per member for all of them. An idle group sends at once; a flood is ordered in batches (one
  // round per message kept a sequencer group near 20,000 one-way calls/s at any n).
  if (!is_sequencer() || log_end() <= sent_end_ || commit_ < sent_end_) return false;
  const uint64_t first = std::max(sent_end_, log_base_);
  SharedBatch entries;  // one copy of the entries for every member (issue 7)
  for (NodeId member : members_) {
    if (member != self_) SendOrdered(member, first, out, &entries);
  }
  sent_end_ = BatchEnd(first, log_end());  // what SendOrdered sent each
  return true;
}

uint64_t SequencerOrder::BatchEnd(uint64_t first, uint64_t end) const {
  BatchBound bound(options_.batch_messages_max, options_.batch_bytes_max);
  uint64_t at = first;
  for (; at < end && bound.Fits(log_[at - log_base_].payload().size()); ++at) {
    bound.Add(log_[at - log_base_].payload().size());
  }
  return at;
}

uint64_t SequencerOrder::SendOrdered(NodeId to, uint64_t first, Outbox* out,
                                     SharedBatch* made) {
  wire::SequencerMessage ordered;
  ordered.set_kind(Kind::ORDERED);
  ordered.set_epoch(epoch_);
  first = std::max(first, log_base_);  // below it every member has delivered
  ordered.set_first_order(first);
  ordered.set_committed(commit_);
  ordered.set_stable(stable_);
  ordered.set_log_length(established_length_);  // what a member takes whole (AdoptEpochLog)
  const uint64_t end = BatchEnd(first, log_end());
  SharedBatch entries;  // held apart from the message (SharedBatch), none when empty
  if (made != nullptr && *made) {
    entries = *made;  // the same `first`, the same log: the same entries
  } else if (end > first) {
    // In the last round's memory once no send holds it (BatchShare): no allocation per entry.
    wire::MessageBatch* batch = ordered_share_.Refill();
    for (uint64_t i = first; i < end; ++i) *batch->add_messages() = At(i);
    entries = {ordered_share_.shared(), SharedBatch::Field::kSequencerBatch};
    if (made != nullptr) *made = entries;
  }
  Send(to, std::move(ordered), out, std::move(entries));
  return end;
}

void SequencerOrder::AnswerCommittedPrefix(NodeId to, uint64_t first, Outbox* out) {
  // Below log_base_ the asker has delivered too (it is a member): nothing to give from there.
  if (first >= commit_ || first < log_base_) return;
  wire::SequencerMessage committed;
  committed.set_kind(Kind::ORDERED);
  committed.set_epoch(epoch_);
  committed.set_first_order(first);
  committed.set_committed(commit_);
  committed.set_log_epoch(UINT32_MAX);  // a committed prefix (OnCommittedPrefix)
  const uint64_t end = BatchEnd(first, commit_);
  for (uint64_t i = first; i < end; ++i) *committed.mutable_batch()->add_messages() = At(i);
  Send(to, std::move(committed), out);
}

void SequencerOrder::OnCommittedPrefix(const wire::SequencerMessage& message, Outbox* out) {
  const uint64_t first = message.first_order();
  const uint64_t count = message.batch().messages_size();
  if (first > commit_ || first + count > message.committed()) return;  // not contiguous / final
  bool changed = false;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = first + i;
    if (at < commit_) continue;  // ours is committed too, hence identical
    if (at < log_end()) {
      if (At(at).SerializeAsString() != message.batch().messages(i).SerializeAsString()) {
        At(at) = message.batch().messages(i);
        changed = true;
      }
    } else {
      log_.push_back(message.batch().messages(i));
    }
  }
  // Our uncommitted entries after a replaced one came from another epoch's log: drop them.
  if (changed && log_end() > first + count) TruncateLog(first + count);
  commit_ = std::max(commit_, first + count);
  RebuildLogSeq();
  Deliver(out);
}

void SequencerOrder::OnOrdered(NodeId from, const wire::SequencerMessage& message, Outbox* out) {
  if (from != Sequencer(epoch_)) return;
  stable_ = std::max(stable_, message.stable());
  const uint64_t first = message.first_order();
  const uint64_t count = message.batch().messages_size();
  wire::SequencerMessage need;
  need.set_kind(Kind::NEED);
  need.set_epoch(epoch_);
  if (log_epoch_ == epoch_) {
    // Our log is a prefix of the sequencer's: append what extends it.
    if (first > log_end()) {
      need.set_first_order(log_end());
      Send(from, std::move(need), out);
      return;
    }
    for (uint64_t i = 0; i < count; ++i) {
      if (first + i < log_end()) continue;
      const wire::DataMessage& data = message.batch().messages(i);
      uint64_t& last = log_seq_[data.origin()];  // ForwardOwn skips what is logged
      last = std::max(last, data.seq());
      log_.push_back(data);
    }
  } else if (!AdoptEpochLog(from, message, out)) {
    return;  // the rest of the new epoch's log is asked for
  }
  commit_ = std::max(commit_, std::min<uint64_t>(message.committed(), log_end()));
  if (CommitsOnAccept()) commit_ = log_end();
  Deliver(out);
  ForwardOwnOnLogged(out);
  if (count > 0) {
    wire::SequencerMessage ack;
    ack.set_kind(Kind::ACK);
    ack.set_epoch(epoch_);
    ack.set_first_order(log_end());
    ack.set_delivered(delivered_);
    Send(from, std::move(ack), out);
  }
}

bool SequencerOrder::AdoptEpochLog(NodeId from, const wire::SequencerMessage& message,
                                   Outbox* out) {
  // The new epoch's log is taken whole, as Viewstamped Replication's replicas take the new view's
  // log: up to its length at establishment (ORDERED.log_length), which holds every entry
  // committed before the epoch. Taking a first batch of it alone, a member called its log this
  // epoch's; as the next sequencer, it chose that shorter log over a longer one of an older
  // epoch and lost entries committed there (cohort-sim --seeds 19235 --ordering sequencer:
  // position 11 delivered as 1:4 by two members and 3:1 by the third). The pieces wait in
  // adopt_ and the member asks for the next one; an older sequencer, which sends no length, is
  // taken at once, as before.
  const uint64_t first = message.first_order();
  const auto& entries = message.batch().messages();
  const uint64_t held_end = adopt_from_ + adopt_.size();
  if (adopting_ && first <= held_end) {
    // What extends the pieces held. One from further back (the sequencer's retransmission from
    // this member's last ACK, none yet) adds nothing below them, which are past our commit
    // point: starting again from it, a log that takes longer than retransmit_ms to come was
    // never taken whole.
    for (uint64_t i = held_end - first; i < static_cast<uint64_t>(entries.size()); ++i) {
      adopt_.push_back(entries[static_cast<int>(i)]);
    }
  } else if (!adopting_ && first <= commit_) {  // from where ours is committed (hence identical)
    adopting_ = true;
    adopt_from_ = first;
    adopt_.assign(entries.begin(), entries.end());
  }
  const uint64_t end = adopting_ ? adopt_from_ + adopt_.size() : commit_;
  if (!adopting_ || end < message.log_length()) {
    wire::SequencerMessage need;
    need.set_kind(Kind::NEED);
    need.set_epoch(epoch_);
    need.set_first_order(end);
    Send(from, std::move(need), out);
    return false;
  }
  for (uint64_t i = 0; i < adopt_.size(); ++i) {
    const uint64_t at = adopt_from_ + i;
    if (at < log_base_) continue;  // delivered everywhere, hence identical
    if (at < log_end()) {
      At(at) = std::move(adopt_[i]);
    } else {
      log_.push_back(std::move(adopt_[i]));
    }
  }
  adopt_.clear();
  adopting_ = false;
  const uint64_t keep = std::max(end, commit_);
  if (log_end() > keep) TruncateLog(keep);  // older epochs' uncommitted entries
  log_epoch_ = epoch_;
  RebuildLogSeq();
  // The new sequencer is established: own messages left out of its log go now (those sent as
  // this member entered the epoch reached it before that, and were dropped), not a tick later
  // (cohort-bench --payload 16384: the old sequencer's backlog of requests from outside went
  // one batch per retransmit_ms, 1,300 one-way calls/s).
  if (OwnAfter(OwnLogged()) < own_.size()) ForwardOwn(out);
  return true;
}

void SequencerOrder::OnNeed(NodeId from, const wire::SequencerMessage& message, Outbox* out) {
  if (from == Sequencer(epoch_)) {
    // The new sequencer asks for our state (see the header).
    wire::SequencerMessage state;
    state.set_kind(Kind::EPOCH_STATE);
    state.set_epoch(epoch_);
    // From the new sequencer's commit point, which every member's log_base_ is below (entries
    // below log_base_ were delivered everywhere, so committed everywhere).
    state.set_first_order(message.first_order());
    state.set_log_epoch(log_epoch_);
    state.set_log_length(log_end());
    // One batch at a time, from where the sequencer asks: a state of many large entries in one
    // message was over the peer transport's bound and dropped, again at every request, and the
    // new sequencer established without this member's log (cohort-bench --payload 16384: "queue
    // to node 2 full (1 envelopes, 67383349 bytes)").
    const uint64_t first = std::max({message.first_order(), message.state_from(), log_base_});
    const uint64_t end = first >= log_end()            ? first
                         : message.state_in_pieces() ? BatchEnd(first, log_end())
                                                     : log_end();
    state.set_state_from(first);
    for (uint64_t i = first; i < end; ++i) *state.mutable_batch()->add_messages() = At(i);
    Send(from, std::move(state), out);
    return;
  }
  if (is_sequencer()) {
    SendOrdered(from, std::min<uint64_t>(message.first_order(), log_end()), out);
  }
}

void SequencerOrder::OnAck(NodeId from, const wire::SequencerMessage& message, Outbox* out) {
  if (!is_sequencer()) return;
  uint64_t& acked = acked_[from];
  acked = std::max(acked, std::min<uint64_t>(message.first_order(), log_end()));
  uint64_t& delivered = member_delivered_[from];
  delivered = std::max(delivered, message.delivered());
  stable_ = std::max(stable_, StableEverywhere());
  MaybeCommit(out);
  Prune();
}

void SequencerOrder::MaybeCommit(Outbox* out) {
  if (!is_sequencer()) return;
  absl::InlinedVector<uint64_t, 9> lengths;  // no allocation per ACK (issue 7)
  for (NodeId member : members_) {
    if (member == self_) {
      lengths.push_back(log_end());
    } else {
      auto it = acked_.find(member);
      lengths.push_back(it == acked_.end() ? 0 : it->second);
    }
  }
  std::sort(lengths.begin(), lengths.end(), std::greater<uint64_t>());
  const uint64_t stable = lengths[majority_ - 1];  // held by a majority in this epoch
  if (stable <= commit_) return;
  commit_ = stable;
  Deliver(out);
  // The next round, if any, carries the commit point on its ORDERED; else a notice does.
  if (SendNewEntries(out) || CommitsOnAccept()) return;
  for (NodeId member : members_) {
    if (member != self_) SendOrdered(member, log_end(), out);  // a commit notice
  }
}

void SequencerOrder::EnterEpoch(uint32_t epoch, Outbox* out) {
  // Skip epochs whose sequencer we suspect; bounded, self is never suspected.
  for (size_t i = 0; i < members_.size(); ++i) {
    const NodeId sequencer = Sequencer(epoch);
    if (sequencer == self_ || suspected_.count(sequencer) == 0) break;
    ++epoch;
  }
  epoch_ = epoch;
  established_ = false;
  sent_end_ = 0;
  acked_.clear();
  states_.clear();
  adopt_.clear();
  adopting_ = false;
  if (Sequencer(epoch_) == self_) {
    state_first_ = commit_;
    EpochState own;
    own.log_epoch = log_epoch_;
    own.log_length = log_end();
    for (uint64_t at = commit_; at < log_end(); ++at) own.entries.push_back(At(at));
    states_[self_] = std::move(own);
    SendNeedStates(out);
    MaybeEstablish(out);
  } else {
    ForwardOwn(out);  // also tells the new sequencer about the epoch
  }
}

void SequencerOrder::SendNeedStates(Outbox* out) {
  for (NodeId member : members_) {
    if (member == self_ || states_.count(member) > 0) continue;
    wire::SequencerMessage need;
    need.set_kind(Kind::NEED);
    need.set_epoch(epoch_);
    need.set_first_order(state_first_);
    need.set_state_in_pieces(true);
    Send(member, std::move(need), out);
  }
}

void SequencerOrder::OnEpochState(NodeId from, const wire::SequencerMessage& message,
                                  Outbox* out) {
  if (Sequencer(epoch_) != self_ || established_ || message.first_order() != state_first_) return;
  // A log shorter than this sequencer's commit point (its last ORDERED was lost: the old
  // sequencer died part-way through sending it) holds nothing past that point, and still
  // counts towards the majority: refusing it left the new sequencer waiting for that member to
  // catch up through a retransmission (50 ms; the sequencer kill's tail in issue 7's bench).
  if (message.log_length() > message.first_order() &&
      message.log_length() - message.first_order() > options_.log_entries_max) {
    return;
  }
  const uint64_t start = std::max(message.first_order(), message.state_from());
  auto found = states_.find(from);
  if (found != states_.end() && found->second.log_epoch == message.log_epoch() &&
      found->second.log_length == message.log_length()) {
    // The next piece of a state longer than one batch. A piece asked for twice, or one after a
    // lost piece, is left: the rest is asked for again from where the state ends.
    EpochState& state = found->second;
    if (start != state.entries_from + state.entries.size()) return;
    state.entries.insert(state.entries.end(), message.batch().messages().begin(),
                         message.batch().messages().end());
    if (Fetching(state)) AskStateRest(from, state, out);
  } else if (found == states_.end() || start == state_first_) {
    EpochState state;
    state.log_epoch = message.log_epoch();
    state.log_length = message.log_length();
    state.entries_from = start;
    state.entries.assign(message.batch().messages().begin(), message.batch().messages().end());
    if (Fetching(state)) AskStateRest(from, state, out);
    states_[from] = std::move(state);
  } else {
    // Its log changed since its first piece (it took committed entries from another member):
    // its state is asked for again from the start (SendNeedStates, at the next tick).
    states_.erase(found);
    return;
  }
  MaybeEstablish(out);
}

bool SequencerOrder::StateComplete(const EpochState& state) const {
  return state.log_length <= state_first_ ||
         (state.entries_from == state_first_ &&
          state.entries.size() == state.log_length - state_first_);
}

bool SequencerOrder::Fetching(const EpochState& state) const {
  // A state with a gap below its first entry (its sender had dropped entries the new sequencer
  // has not committed) is not fetched further: it counts, as before pieces, and is not adopted.
  return !StateComplete(state) && state.entries_from == state_first_;
}

void SequencerOrder::AskStateRest(NodeId node, const EpochState& state, Outbox* out) {
  const uint64_t from = state.entries_from + state.entries.size();
  wire::SequencerMessage need;
  need.set_kind(Kind::NEED);
  need.set_epoch(epoch_);
  need.set_first_order(state_first_);
  need.set_state_from(from);
  need.set_state_in_pieces(true);
  Send(node, std::move(need), out);
}

void SequencerOrder::MaybeEstablish(Outbox* out) {
  if (established_) return;
  // The log of the largest (log_epoch, log_length) among a majority's states holds every
  // committed entry: any majority's, so the first majority of states received whole (their
  // pieces are fetched in parallel; a member that dies part-way is not waited for).
  const EpochState* best = nullptr;
  NodeId best_node = 0;
  size_t whole = 0;
  for (const auto& [node, state] : states_) {
    if (Fetching(state)) continue;
    ++whole;
    if (best == nullptr || std::make_pair(state.log_epoch, state.log_length) >
                               std::make_pair(best->log_epoch, best->log_length) ||
        (node == self_ && std::make_pair(state.log_epoch, state.log_length) ==
                              std::make_pair(best->log_epoch, best->log_length))) {
      best = &state;
      best_node = node;
    }
  }
  if (whole < majority_ || best == nullptr) return;
  if (best_node != self_ && best->log_length >= state_first_ && StateComplete(*best)) {
    TruncateLog(state_first_);
    for (const wire::DataMessage& entry : best->entries) log_.push_back(entry);
  }
  // A member whose log ends before the commit point gets the log from its end (at or above
  // what is delivered everywhere: SendOrdered starts at log_base_), not a gap to ask about.
  std::map<NodeId, uint64_t> send_from;
  for (const auto& [node, state] : states_) {
    send_from[node] = std::min(state_first_, state.log_length);
  }
  states_.clear();
  log_epoch_ = epoch_;
  established_ = true;
  established_length_ = log_end();
  RebuildLogSeq();
  acked_[self_] = log_end();
  // The round in flight ends where the shortest batch sent ends; the next round (SendNewEntries,
  // once those are committed) carries the rest.
  uint64_t sent_end = log_end();
  for (NodeId member : members_) {
    if (member == self_) continue;
    auto from = send_from.find(member);
    sent_end = std::min(
        sent_end, SendOrdered(member, from != send_from.end() ? from->second : state_first_, out));
  }
  sent_end_ = sent_end;
  MaybeCommit(out);
  ForwardOwn(out);
}

void SequencerOrder::Deliver(Outbox* out) {
  while (delivered_ < commit_ && delivered_ < log_end()) {
    const wire::DataMessage& data = At(delivered_++);
    uint64_t& delivered_seq = delivered_seq_[data.origin()];
    if (data.seq() != delivered_seq + 1) continue;  // never happens: the log is FIFO per origin
    delivered_seq = data.seq();
    if (data.origin() == self_) EraseOwn(data.seq());
    out->deliveries.push_back({data.origin(), data.seq(), spare_payloads_.Copy(data.payload())});
    ++counters_.messages_delivered;
  }
  Prune();
}

void SequencerOrder::EraseOwn(uint64_t seq) {
  // The first one, as deliveries come in seq order; any other only where a log held an earlier
  // incarnation's messages under this process's seqs (as the B-tree own_ was did).
  const size_t at = OwnAfter(seq);
  if (at > 0 && own_[at - 1].seq() == seq) own_.erase(at - 1);
}

void SequencerOrder::RebuildLogSeq() {
  log_seq_ = pruned_seq_;
  for (const wire::DataMessage& data : log_) {
    uint64_t& last = log_seq_[data.origin()];
    last = std::max(last, data.seq());
  }
}

void SequencerOrder::Tick(uint64_t now_ms, Outbox* out) {
  if (frozen_) return;
  now_ms_ = std::max(now_ms_, now_ms);
  if (now_ms_ < last_retransmit_ms_ + options_.retransmit_ms) return;
  last_retransmit_ms_ = now_ms_;
  ForwardOwn(out);
  if (Sequencer(epoch_) == self_) {
    if (!established_) {
      SendNeedStates(out);
      for (const auto& [node, state] : states_) {  // a lost piece, or its request
        if (Fetching(state)) AskStateRest(node, state, out);
      }
      return;
    }
    // Resent from each member's ACK, one batch each. The round in flight ends where the
    // shortest of those batches ends: with log_end() here, a log longer than one batch (a
    // backlog of large requests) was sent one batch per retransmit_ms, as nothing past the
    // resent batch went out until the next tick (cohort-bench --payload 16384: 64 one-way calls
    // per 50 ms).
    uint64_t resent_end = log_end();
    for (NodeId member : members_) {
      if (member == self_) continue;
      const uint64_t acked = acked_.count(member) > 0 ? acked_[member] : 0;
      if (acked < log_end()) resent_end = std::min(resent_end, SendOrdered(member, acked, out));
    }
    sent_end_ = std::max(sent_end_, resent_end);
    return;
  }
  // A member: ask for what it lacks (the new epoch's log, or the commit point of its tail).
  if (log_epoch_ != epoch_ || log_end() > commit_) {
    wire::SequencerMessage need;
    need.set_kind(Kind::NEED);
    need.set_epoch(epoch_);
    need.set_first_order(log_epoch_ == epoch_ ? log_end()
                         : adopting_            ? adopt_from_ + adopt_.size()
                                                : commit_);
    Send(Sequencer(epoch_), need, out);
  }
  // Also ask one other member in turn for committed entries past our commit point: a member
  // that knows more (its view may already have ended) answers with them (OnCommittedPrefix).
  if (members_.size() > 1 && (log_epoch_ != epoch_ || log_end() > commit_)) {
    need_cursor_ = (need_cursor_ + 1) % members_.size();
    if (members_[need_cursor_] == self_) need_cursor_ = (need_cursor_ + 1) % members_.size();
    wire::SequencerMessage ask;
    ask.set_kind(Kind::NEED);
    ask.set_epoch(epoch_);
    ask.set_first_order(commit_);
    ask.set_log_epoch(UINT32_MAX);  // a committed-prefix request, never an epoch-state request
    Send(members_[need_cursor_], std::move(ask), out);
  }
}

void SequencerOrder::Suspect(NodeId node, bool suspected, Outbox* out) {
  if (frozen_) return;
  if (node == self_ || !IsMember(node)) return;
  if (!suspected) {
    suspected_.erase(node);
    return;
  }
  suspected_.insert(node);
  if (node == Sequencer(epoch_)) EnterEpoch(epoch_ + 1, out);
}

std::string SequencerOrder::Describe() const {
  std::string text = "sequencer epoch " + std::to_string(epoch_) + " (sequencer " +
                     std::to_string(Sequencer(epoch_)) +
                     (established_ ? ", established" : ", not established") + "), log " +
                     std::to_string(log_end()) + " (" + std::to_string(log_.size()) +
                     " kept), committed " + std::to_string(commit_) +
                     ", delivered " + std::to_string(delivered_) + ", own pending " +
                     std::to_string(own_.size());
  if (!own_.empty()) {
    auto logged = log_seq_.find(self_);
    text += " (seq " + std::to_string(own_.front().seq()) + ".." + std::to_string(next_seq_) +
            ", logged to " + std::to_string(logged == log_seq_.end() ? 0 : logged->second) +
            ", forwarded to " + std::to_string(forward_next_ - 1) + " in epoch " +
            std::to_string(forwarded_epoch_) + ")";
  }
  if (!suspected_.empty()) {
    text += ", suspecting";
    for (NodeId node : suspected_) text += " " + std::to_string(node);
  }
  if (frozen_) text += ", frozen";
  return text;
}

bool SequencerOrder::HasPending() const { return !own_.empty() || delivered_ < log_end(); }

uint64_t SequencerOrder::StableEverywhere() const {
  uint64_t stable = delivered_;
  for (NodeId member : members_) {
    if (member == self_) continue;
    auto it = member_delivered_.find(member);
    stable = std::min(stable, it == member_delivered_.end() ? 0 : it->second);
  }
  return stable;
}

void SequencerOrder::Prune() {
  // Entries every member has delivered are committed everywhere and no member asks for them
  // again: a NEED or an epoch state starts at the asker's commit point, above stable_.
  const uint64_t below = std::min(stable_, delivered_);
  while (log_base_ < below && !log_.empty()) {
    const wire::DataMessage& data = log_.front();
    uint64_t& seq = pruned_seq_[data.origin()];
    seq = std::max(seq, data.seq());
    log_.pop_front();
    ++log_base_;
  }
}

void SequencerOrder::Send(NodeId to, wire::SequencerMessage message, Outbox* out,
                          SharedBatch batch) {
  if (message.kind() == Kind::ACK) {
    ++counters_.messages_sent_ack;
  } else {
    ++counters_.messages_sent_data;
  }
  out->sends.emplace_back(to, std::move(message), std::move(batch));
}

// A field added to SequencerOrder must be added to StateKey too: two states that differ in it
// would otherwise be taken for one, and the exploration would skip what follows. This size
// (x86-64, libstdc++) changes with a new field.
#if defined(__x86_64__) && defined(__GLIBCXX__)
// 784 before options_.batch_bytes_max (an option, not state); 792 before forwarded_epoch_
// and forward_next_; 808 before adopting_, adopt_from_, adopt_ and established_length_; 912
// while own_ was a std::map; 888 while log_ was a std::deque and own_ a B-tree, before
// forward_share_ and ordered_share_ (memory kept for reuse, not state); 896 before TotalOrder's
// spare_payloads_ (memory, not state).
static_assert(sizeof(SequencerOrder) == 928,
              "a new field of SequencerOrder: add it to StateKey");
#endif

std::string SequencerOrder::StateKey() const {
  StateKeyWriter key;
  key.Put(frozen_);
  key.Put(suspected_);
  key.Put(now_ms_);
  key.Put(epoch_);
  key.Put(log_epoch_);
  key.Put(static_cast<uint64_t>(log_.size()));
  for (const wire::DataMessage& entry : log_) key.Put(entry);
  key.Put(log_base_);
  key.Put(stable_);
  key.Put(pruned_seq_);
  key.Put(member_delivered_);
  key.Put(commit_);
  key.Put(need_cursor_);
  key.Put(delivered_);
  key.Put(delivered_seq_);
  key.Put(log_seq_);
  key.Put(static_cast<uint64_t>(early_forwards_.size()));
  for (const auto& [origin, forwards] : early_forwards_) {
    key.Put(origin);
    key.Put(forwards);
  }
  key.Put(early_forwards_count_);
  key.Put(next_seq_);
  key.Put(adopting_);
  key.Put(adopt_from_);
  key.Put(static_cast<uint64_t>(adopt_.size()));
  for (const wire::DataMessage& entry : adopt_) key.Put(entry);
  key.Put(established_length_);
  key.Put(static_cast<uint64_t>(own_.size()));  // as the B-tree of (seq, payload) it replaced
  for (const wire::DataMessage& own : own_) {
    key.Put(own.seq());
    key.Put(own.payload());
  }
  key.Put(forwarded_epoch_);
  key.Put(forward_next_);
  key.Put(last_retransmit_ms_);
  key.Put(established_);
  key.Put(acked_);
  key.Put(sent_end_);
  key.Put(state_first_);
  key.Put(static_cast<uint64_t>(states_.size()));
  for (const auto& [node, state] : states_) {
    key.Put(node);
    key.Put(state.log_epoch);
    key.Put(state.log_length);
    key.Put(state.entries_from);
    key.Put(static_cast<uint64_t>(state.entries.size()));
    for (const wire::DataMessage& entry : state.entries) key.Put(entry);
  }
  return key.Take();
}

}  // namespace cohort::consensus
