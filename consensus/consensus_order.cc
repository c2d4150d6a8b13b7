#include "consensus/consensus_order.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "consensus/batch_bound.h"
#include "consensus/spare.h"
#include "consensus/state_key.h"

namespace cohort::consensus {
namespace {
constexpr uint64_t kCatchUpWindow = 32;          // decisions per catch-up answer
constexpr uint64_t kEarlyDecisionsAhead = 1024;  // later decisions kept while catching up

// A key above every message of `origin`: its upper_bound is the next origin's first message.
std::pair<NodeId, uint64_t> PastOrigin(NodeId origin) {
  return {origin, std::numeric_limits<uint64_t>::max()};
}
}  // namespace

ConsensusOrder::ConsensusOrder(NodeId self, std::vector<NodeId> members,
                               ConsensusOrderOptions options)
    : self_(self), members_(std::move(members)), options_(options) {}

bool ConsensusOrder::IsMember(NodeId node) const {
  return std::find(members_.begin(), members_.end(), node) != members_.end();
}

ChandraToueg* ConsensusOrder::Current() {
  auto it = instances_.find(next_instance_);
  return it == instances_.end() ? nullptr : &it->second;
}

ChandraToueg* ConsensusOrder::StartInstance() {
  if (!spare_instance_.value.empty()) {
    std::map<uint64_t, ChandraToueg>::node_type node = std::move(spare_instance_.value);
    node.key() = next_instance_;
    node.mapped().Recycle(next_instance_, suspected_, leader_);
    auto inserted = instances_.insert(std::move(node));
    if (!inserted.inserted) spare_instance_.value = std::move(inserted.node);  // (callers check)
    return &inserted.position->second;
  }
  return &instances_
              .try_emplace(next_instance_, self_, members_, next_instance_, options_.consensus,
                           suspected_, leader_)
              .first->second;
}

void ConsensusOrder::DropInstance(std::map<uint64_t, ChandraToueg>::iterator it) {
  if (spare_instance_.value.empty()) {
    spare_instance_.value = instances_.extract(it);
  } else {
    instances_.erase(it);
  }
}

uint64_t ConsensusOrder::Broadcast(const std::string& payload, Outbox* out) {
  const uint64_t seq = ++next_seq_;
  // When this member coordinates round 1 of the instance it starts now, its proposal carries the
  // message (optimisation 2): nothing to diffuse, n - 1 messages and one step fewer (issue 7).
  // Otherwise every member gets it, so whoever coordinates the instance that orders it holds it.
  // Tick's retransmission covers an instance this member did not start after all.
  if (Current() != nullptr || members_[leader_] != self_) {
    wire::MessageBatch batch;  // built only to be diffused (a copy of the payload)
    wire::DataMessage* message = batch.add_messages();
    message->set_origin(self_);
    message->set_seq(seq);
    message->set_payload(payload);
    Diffuse(std::move(batch), out);
  }
  unordered_[{self_, seq}] = spare_payloads_.Copy(payload);
  MaybeStartInstance(/*even_if_empty=*/false, out);
  return seq;
}

void ConsensusOrder::Diffuse(wire::MessageBatch batch, Outbox* out) {
  if (members_.size() < 2) return;
  // One copy for every member, held apart from the envelopes (SharedBatch).
  const SharedBatch shared{std::make_shared<const wire::MessageBatch>(std::move(batch)),
                           SharedBatch::Field::kDiffusionBatch};
  for (NodeId member : members_) {
    if (member == self_) continue;
    wire::Envelope envelope;
    envelope.mutable_data();  // the batch follows (SharedBatch)
    out->sends.emplace_back(member, std::move(envelope), shared);
    ++counters_.messages_sent_data;
  }
}

void ConsensusOrder::MakeBatch(wire::MessageBatch* batch) const {
  // FIFO-closed per origin: seq s only after s - 1 (delivered or already in the batch). One seek
  // per origin to its next deliverable seq, not a walk over every unordered message: this runs
  // for each received diffusion while no instance is open, and with the set full of messages
  // held behind a gap a walk per message kept three members of an n = 5 group busy for minutes
  // (cohort-bench, app-open one-way flood), too busy to send "I am alive".
  batch->Clear();
  BatchBound bound(options_.batch_messages_max, options_.batch_bytes_max);
  auto it = unordered_.begin();
  while (it != unordered_.end() && bound.Open()) {
    const NodeId origin = it->first.first;
    auto delivered = delivered_seq_.find(origin);
    uint64_t expected = (delivered == delivered_seq_.end() ? 0 : delivered->second) + 1;
    for (it = unordered_.lower_bound({origin, expected});
         it != unordered_.end() && it->first == MessageId{origin, expected} &&
         bound.Fits(it->second.size());
         ++it, ++expected) {
      bound.Add(it->second.size());
      wire::DataMessage* message = batch->add_messages();
      message->set_origin(origin);
      message->set_seq(expected);
      message->set_payload(it->second);
    }
    it = unordered_.upper_bound(PastOrigin(origin));  // the next origin
  }
}

void ConsensusOrder::KeepUnordered(NodeId origin, uint64_t seq, const std::string& payload) {
  const MessageId id{origin, seq};
  if (unordered_.size() >= options_.unordered_messages_max && origin != self_ &&
      unordered_.count(id) == 0) {
    // Full: the origin's latest message held gives way to an earlier one (its origin resends
    // both). A batch takes each origin's messages from the first undelivered seq on, so the set
    // must keep the earliest: with the latest kept instead, a set full of messages behind a gap
    // could never take the message that fills it, and this member never proposed again.
    auto past = unordered_.upper_bound(PastOrigin(origin));
    if (past == unordered_.begin()) return;
    auto latest = std::prev(past);
    if (latest->first.first != origin || latest->first.second < seq) return;  // dropped
    unordered_.erase(latest);
  }
  unordered_.emplace(id, spare_payloads_.Copy(payload));
}

void ConsensusOrder::MaybeStartInstance(bool even_if_empty, Outbox* out) {
  if (instances_.count(next_instance_) > 0) return;
  wire::MessageBatch& batch = next_batch_.value;
  MakeBatch(&batch);
  if (batch.messages_size() == 0 && !even_if_empty) return;
  ChandraToueg* started = StartInstance();
  started->ProposeSwap(&batch, now_ms_, &sends_);
  Flush(out);
  DeliverDecided(out);  // n == 1 decides at once
}

void ConsensusOrder::Step(NodeId from, const wire::Envelope& message, Outbox* out) {
  if (from == self_ || !IsMember(from)) return;
  if (message.has_data()) {
    OnDiffusion(message.data(), out);
  } else if (message.has_consensus()) {
    OnConsensus(from, message.consensus(), out);
  }
}

void ConsensusOrder::OnDiffusion(const wire::Diffusion& diffusion, Outbox* out) {
  if (frozen_) return;
  KeepUndelivered(diffusion.batch());
  MaybeStartInstance(/*even_if_empty=*/false, out);
}

void ConsensusOrder::KeepUndelivered(const wire::MessageBatch& batch) {
  for (const wire::DataMessage& message : batch.messages()) {
    if (!IsMember(message.origin()) || message.origin() == self_ || message.seq() == 0) continue;
    auto it = delivered_seq_.find(message.origin());
    if (it != delivered_seq_.end() && message.seq() <= it->second) continue;
    KeepUnordered(message.origin(), message.seq(), message.payload());  // or its origin resends it
  }
}

void ConsensusOrder::OnConsensus(NodeId from, const wire::ConsensusMessage& message,
                                 Outbox* out) {
  const uint64_t instance = message.instance();
  if (instance > highest_instance_heard_) {
    highest_instance_heard_ = instance;
    highest_instance_sender_ = from;
  }
  // Any consensus message about instance k comes from a member that delivered every instance
  // before k (it only runs its next instance; decided ones only answer with their decision).
  uint64_t& known = member_next_[from];
  known = std::max(known, instance);
  told_everyone_past_ = std::max(told_everyone_past_, message.delivered_everywhere());
  if (frozen_) {
    // Only decided instances answer (with their decision); nothing new is decided.
    auto decided = instances_.find(instance);
    if (instance >= next_instance_) return;
    if (decided == instances_.end()) return ReportBeyondLog(from, message, out);
    if (message.kind() == wire::ConsensusMessage::ESTIMATE && message.round() == 0) {
      AnswerCatchUp(from, instance, &sends_);
    } else {
      decided->second.SetNow(now_ms_);
      decided->second.Step(from, message, &sends_);
    }
    Flush(out);
    return;
  }
  if (instance > next_instance_) {
    if (message.kind() == wire::ConsensusMessage::DECISION) {
      KeepEarlyDecision(message);
    } else if (instance <= next_instance_ + kInstancesAheadKept &&
               next_instance_messages_.size() < kNextInstanceMessagesMax) {
      next_instance_messages_.emplace_back(from, message);  // handled once it is our turn
    }
    SendCatchUpRequest(from, out);  // we may have missed decisions: ask the sender
    return;
  }
  if (instance == next_instance_ && message.round() > 0) {
    MaybeStartInstance(/*even_if_empty=*/true, out);  // learnt that instance k started
  }
  auto it = instances_.find(instance);
  if (it == instances_.end()) {  // older than the log, or a request we cannot answer
    if (instance < next_instance_) ReportBeyondLog(from, message, out);
    return;
  }
  if (message.kind() == wire::ConsensusMessage::PROPOSAL &&
      (instance < next_instance_ || message.round() < it->second.round())) {
    // A proposal this member will not adopt (its instance decided here, or this member moved
    // to a later round, e.g. suspecting its coordinator): a round-1 coordinator diffuses
    // nothing (optimisation 2), so its messages would reach the others only by its next
    // retransmission, and meanwhile every instance it proposes them in while suspected would
    // decide the others' empty estimates, one after the other (found by cohort-explore
    // --order consensus-order). Kept, they are in this member's next instance's estimate.
    KeepUndelivered(message.value());
  }
  if (instance < next_instance_ && message.kind() == wire::ConsensusMessage::ESTIMATE &&
      message.round() == 0) {
    AnswerCatchUp(from, instance, &sends_);
  } else {
    it->second.SetNow(now_ms_);  // decided instances rate-limit their answers by it
    it->second.Step(from, message, &sends_);
  }
  Flush(out);
  DeliverDecided(out);
}

void ConsensusOrder::AnswerCatchUp(NodeId to, uint64_t instance, ConsensusSends* sends) {
  for (uint64_t k = instance; k < next_instance_ && k < instance + kCatchUpWindow; ++k) {
    auto it = instances_.find(k);
    if (it == instances_.end()) return;
    it->second.SetNow(now_ms_);
    it->second.ResendDecision(to, sends);
  }
}

void ConsensusOrder::KeepEarlyDecision(const wire::ConsensusMessage& message) {
  if (message.instance() >= next_instance_ + kEarlyDecisionsAhead) return;
  EarlyDecision& early = early_decisions_[message.instance()];
  early.value = message.value();
  early.round = message.round();
}

void ConsensusOrder::SendCatchUpRequest(NodeId to, Outbox* out) {
  if (catch_up_sent_ && now_ms_ < last_catch_up_ms_ + options_.consensus.retransmit_ms) return;
  catch_up_sent_ = true;
  last_catch_up_ms_ = now_ms_;
  wire::Envelope envelope;
  wire::ConsensusMessage* request = envelope.mutable_consensus();
  request->set_instance(next_instance_);
  request->set_round(0);
  request->set_kind(wire::ConsensusMessage::ESTIMATE);
  request->set_delivered_everywhere(EveryonePast());
  out->sends.emplace_back(to, std::move(envelope));
}

void ConsensusOrder::DeliverDecided(Outbox* out) {
  const uint64_t before = next_instance_;
  DeliverDecidedInstances(out);
  if (next_instance_ != before) ReplayNextInstanceMessages(out);
}

void ConsensusOrder::ReplayNextInstanceMessages(Outbox* out) {
  if (next_instance_messages_.empty()) return;
  std::vector<std::pair<NodeId, wire::ConsensusMessage>> kept;
  kept.swap(next_instance_messages_);
  for (auto& [from, message] : kept) {
    if (message.instance() == next_instance_) {
      OnConsensus(from, message, out);  // may decide and replay again: bounded by the instances
    } else if (message.instance() > next_instance_) {
      next_instance_messages_.emplace_back(from, std::move(message));  // still ahead
    }  // older: about an instance decided here meanwhile, nothing to do
  }
}

void ConsensusOrder::DeliverDecidedInstances(Outbox* out) {
  // Bounded: each pass decides one instance, and only a started instance can be decided.
  for (;;) {
    ChandraToueg* current = Current();
    if (current == nullptr || !current->decided()) {
      // Catching up: a decision of this instance may have come ahead of its turn.
      auto early = early_decisions_.find(next_instance_);
      if (early == early_decisions_.end()) return;
      if (current == nullptr) current = StartInstance();
      current->Learn(early->second.value, early->second.round);
      early_decisions_.erase(early);
    }
    CountDecision(*current, &counters_);
    if (current->owes_decision()) owing_.insert(next_instance_);
    DeliverBatch(current->decision(), out);
    ChooseNextCoordinator(current->decision());
    const size_t bytes = current->decision().ByteSizeLong();
    decided_sizes_[next_instance_] = bytes;
    decided_bytes_ += bytes;
    ++next_instance_;
    early_decisions_.erase(early_decisions_.begin(), early_decisions_.lower_bound(next_instance_));
    catch_up_sent_ = false;  // a member catching up asks for the next decision at once
    PruneDecided();
    if (highest_instance_heard_ > next_instance_ && early_decisions_.count(next_instance_) == 0) {
      // Known to be behind (a later instance is running): ask for the next window now rather
      // than wait for the next message of a later instance.
      SendCatchUpRequest(highest_instance_sender_, out);
    }
    MaybeStartInstance(/*even_if_empty=*/false, out);
  }
}

void ConsensusOrder::ChooseNextCoordinator(const wire::MessageBatch& decision) {
  // The next instance's round 1 is coordinated by the member with the most messages in this
  // decision (ties: the first in the batch): a function of the decided value, hence the same at
  // every member. The member that broadcasts most (a closed group's caller, an open group's
  // request manager) coordinates the instances that order its messages: it diffuses nothing and
  // decides in 2 steps, not 3 (issue 7). An empty decision keeps the coordinator.
  absl::InlinedVector<size_t, 16> counts(members_.size(), 0);  // no allocation up to n = 16
  size_t best_count = 0;
  for (const wire::DataMessage& message : decision.messages()) {
    auto it = std::find(members_.begin(), members_.end(), message.origin());
    if (it == members_.end()) continue;
    const size_t index = static_cast<size_t>(it - members_.begin());
    if (++counts[index] > best_count) {
      best_count = counts[index];
      leader_ = index;
    }
  }
}

uint64_t ConsensusOrder::EveryonePast() const {
  uint64_t everyone_past = next_instance_;
  for (NodeId member : members_) {
    if (member == self_) continue;
    auto it = member_next_.find(member);
    everyone_past = std::min(everyone_past, it == member_next_.end() ? 0 : it->second);
  }
  return std::max(everyone_past, std::min(told_everyone_past_, next_instance_));
}

void ConsensusOrder::PruneDecided() {
  const uint64_t everyone_past = EveryonePast();
  while (!instances_.empty()) {
    const uint64_t oldest = instances_.begin()->first;
    if (oldest >= next_instance_) return;  // the running instance stays
    const bool over_bounds = instances_.size() > options_.decided_log_max ||
                             decided_bytes_ > options_.decided_log_bytes_max;
    if (oldest >= everyone_past && !over_bounds) return;
    DropInstance(instances_.begin());
    auto size = decided_sizes_.find(oldest);
    if (size != decided_sizes_.end()) {
      decided_bytes_ -= size->second;
      decided_sizes_.erase(size);
    }
  }
}

void ConsensusOrder::ReportBeyondLog(NodeId from, const wire::ConsensusMessage& message,
                                     Outbox* out) {
  // Only a catch-up request from where the member stands now: any other message about a pruned
  // instance is a late one (a relay, a retransmission) from a member that has moved on. So is a
  // request below what every member is known to have delivered: this member may have learnt the
  // asker's progress from another (delivered_everywhere), not from the asker's own later
  // messages (cohort-sim --stack --slow-only seed 17: a slow member's request for 50, sent
  // before it moved on and overtaken by what others said of it, re-admitted it needlessly).
  const bool catch_up = message.kind() == wire::ConsensusMessage::ESTIMATE && message.round() == 0;
  if (!catch_up || member_next_[from] != message.instance()) return;
  if (message.instance() < EveryonePast()) return;
  ++unanswerable_requests_;
  auto [last, first] = beyond_log_reported_ms_.try_emplace(from, now_ms_);
  if (!first && now_ms_ < last->second + options_.probe_ms) return;
  last->second = now_ms_;
  out->beyond_log.push_back(from);
}

void ConsensusOrder::DeliverBatch(const wire::MessageBatch& batch, Outbox* out) {
  absl::InlinedVector<const wire::DataMessage*, 16> messages;  // usual batches: no allocation
  messages.reserve(batch.messages_size());
  for (const wire::DataMessage& message : batch.messages()) messages.push_back(&message);
  out->deliveries.reserve(out->deliveries.size() + batch.messages_size());
  std::sort(messages.begin(), messages.end(), [](const auto* a, const auto* b) {
    return std::make_pair(a->origin(), a->seq()) < std::make_pair(b->origin(), b->seq());
  });
  for (const wire::DataMessage* message : messages) {
    if (!IsMember(message->origin())) continue;
    uint64_t& delivered = delivered_seq_[message->origin()];
    if (message->seq() <= delivered) continue;  // integrity: at most once
    if (message->seq() != delivered + 1) {
      // FIFO per origin: not before seq - 1. Keep it for a later instance.
      KeepUnordered(message->origin(), message->seq(), message->payload());
      continue;
    }
    delivered = message->seq();
    // The copy kept while it was unordered (this member's own, or one diffused to it) is moved
    // into the delivery rather than a new one made (issue 7), if it is the message decided: a
    // restarted process numbers its messages from 1 again, and an earlier process's may be
    // decided under the same id (nso/group.cc, Group::Delivered).
    auto kept = unordered_.find({message->origin(), message->seq()});
    if (kept != unordered_.end() && kept->second == message->payload()) {
      out->deliveries.push_back({message->origin(), message->seq(), std::move(kept->second)});
    } else {
      out->deliveries.push_back(
          {message->origin(), message->seq(), spare_payloads_.Copy(message->payload())});
    }
    if (kept != unordered_.end()) unordered_.erase(kept);
    ++counters_.messages_delivered;
  }
}

void ConsensusOrder::Tick(uint64_t now_ms, Outbox* out) {
  now_ms_ = std::max(now_ms_, now_ms);
  TickOwedDecisions(out);
  if (frozen_) return;
  if (ChandraToueg* current = Current()) {
    current->Tick(now_ms_, &sends_);
    Flush(out);
    DeliverDecided(out);
  }
  if (now_ms_ >= last_diffusion_ms_ + options_.consensus.retransmit_ms) {
    last_diffusion_ms_ = now_ms_;
    wire::MessageBatch own;  // own undelivered messages, bounded as a batch
    BatchBound bound(options_.batch_messages_max, options_.batch_bytes_max);
    for (auto it = unordered_.lower_bound({self_, 0});
         it != unordered_.end() && it->first.first == self_ && bound.Fits(it->second.size());
         ++it) {
      bound.Add(it->second.size());
      wire::DataMessage* message = own.add_messages();
      message->set_origin(self_);
      message->set_seq(it->first.second);
      message->set_payload(it->second);
    }
    if (own.messages_size() > 0) Diffuse(std::move(own), out);
  }
  MaybeStartInstance(/*even_if_empty=*/false, out);
  if (Current() == nullptr && members_.size() > 1 &&
      now_ms_ >= last_probe_ms_ + options_.probe_ms) {
    // Idle: ask one other member, in turn, for the decision of our next instance.
    last_probe_ms_ = now_ms_;
    probe_cursor_ = (probe_cursor_ + 1) % members_.size();
    if (members_[probe_cursor_] == self_) probe_cursor_ = (probe_cursor_ + 1) % members_.size();
    catch_up_sent_ = false;
    SendCatchUpRequest(members_[probe_cursor_], out);
  }
}

void ConsensusOrder::TickOwedDecisions(Outbox* out) {
  for (auto it = owing_.begin(); it != owing_.end();) {
    auto instance = instances_.find(*it);
    if (instance == instances_.end() || !instance->second.owes_decision()) {
      it = owing_.erase(it);
      continue;
    }
    instance->second.Tick(now_ms_, &sends_);
    Flush(out);
    ++it;
  }
}

void ConsensusOrder::Suspect(NodeId node, bool suspected, Outbox* out) {
  if (frozen_ || node == self_ || !IsMember(node)) return;
  if (suspected) {
    suspected_.insert(node);
  } else {
    suspected_.erase(node);
  }
  if (ChandraToueg* current = Current()) {
    current->Suspect(node, suspected, &sends_);
    Flush(out);
    DeliverDecided(out);
  }
}

uint32_t ConsensusOrder::round() const {
  auto it = instances_.find(next_instance_);
  return it == instances_.end() ? 0 : it->second.round();
}

const ChandraToueg* ConsensusOrder::instance(uint64_t k) const {
  auto it = instances_.find(k);
  return it == instances_.end() ? nullptr : &it->second;
}

// A field added to ConsensusOrder must be added to StateKey too (or said to only count, as
// counters_ and unanswerable_requests_), or two states that differ in it are taken for one and
// the exploration skips what follows. This size (x86-64, libstdc++) changes with a new field.
#if defined(__x86_64__) && defined(__GLIBCXX__)
// 752 before options_.batch_bytes_max (an option, not state); 760 before told_everyone_past_;
// 768 before sends_ (empty between steps, not state); 792 while unordered_, owing_ and
// decided_sizes_ were std:: trees; 720 before spare_instance_ and next_batch_ (memory kept for
// reuse, not state); 792 before unordered_'s SpareAllocator (its pool: memory, not state); 808
// before TotalOrder's spare_payloads_ (memory, not state); 840 before decided_sizes_'s
// SpareAllocator, 856 before owing_'s.
static_assert(sizeof(ConsensusOrder) == 872, "a new field of ConsensusOrder: add it to StateKey");
#endif

std::string ConsensusOrder::StateKey() const {
  StateKeyWriter key;
  key.Put(frozen_);
  key.Put(suspected_);
  key.Put(now_ms_);
  key.Put(next_seq_);
  key.Put(delivered_seq_);
  key.Put(static_cast<uint64_t>(unordered_.size()));
  for (const auto& [id, payload] : unordered_) {
    key.Put(id.first);
    key.Put(id.second);
    key.Put(payload);
  }
  key.Put(next_instance_);
  key.Put(leader_);
  key.Put(static_cast<uint64_t>(instances_.size()));
  for (const auto& [k, instance] : instances_) {
    key.Put(k);
    key.Put(instance.first_coordinator());
    key.Put(instance.StateKey());
  }
  key.Put(owing_);
  key.Put(last_diffusion_ms_);
  key.Put(last_catch_up_ms_);
  key.Put(catch_up_sent_);
  key.Put(last_probe_ms_);
  key.Put(probe_cursor_);
  key.Put(static_cast<uint64_t>(early_decisions_.size()));
  for (const auto& [k, early] : early_decisions_) {
    key.Put(k);
    key.Put(early.value);
    key.Put(early.round);
  }
  key.Put(static_cast<uint64_t>(next_instance_messages_.size()));  // in the order kept
  for (const auto& [from, message] : next_instance_messages_) {
    key.Put(from);
    wire::ConsensusMessage content = message;
    content.clear_steps();  // only counts (ChandraToueg::StateKey)
    key.Put(content);
  }
  key.Put(highest_instance_sender_);
  key.Put(decided_bytes_);
  key.Put(decided_sizes_);
  key.Put(member_next_);
  key.Put(told_everyone_past_);
  key.Put(beyond_log_reported_ms_);
  key.Put(highest_instance_heard_);
  return key.Take();
}

std::string ConsensusOrder::Describe() const {
  std::string text = "consensus instance " + std::to_string(next_instance_);
  auto it = instances_.find(next_instance_);
  if (it == instances_.end()) {
    text += " not started";
  } else {
    text += " in round " + std::to_string(it->second.round()) +
            (it->second.decided() ? " (decided)" : "");
  }
  text += ", highest heard " + std::to_string(highest_instance_heard_) + ", " +
          std::to_string(unordered_.size()) + " messages unordered, " +
          std::to_string(unanswerable_requests_) + " catch-up requests older than the log";
  if (!suspected_.empty()) {
    text += ", suspecting";
    for (NodeId node : suspected_) text += " " + std::to_string(node);
  }
  if (frozen_) text += ", frozen";
  return text;
}

bool ConsensusOrder::HasPending() const {
  return !unordered_.empty() || instances_.count(next_instance_) > 0;
}

void ConsensusOrder::Flush(Outbox* out) {
  CountSends(sends_, &counters_);
  const uint64_t everyone_past = EveryonePast();
  if (out->sends.empty()) out->sends.reserve(sends_.size());  // one allocation, not one per growth
  for (ConsensusSend& send : sends_) {
    send.message.set_delivered_everywhere(everyone_past);
    out->sends.emplace_back(send.to, std::move(send.message),
                            SharedBatch{std::move(send.value), SharedBatch::Field::kConsensusValue});
  }
  sends_.clear();  // keeps its capacity for the next step
}

}  // namespace cohort::consensus
