#include "nso/group.h"

#include <algorithm>

#include "nso/logging.h"

namespace cohort::nso {

Group::Group(const GroupConfig& group_config, const Config& config, std::vector<NodeId> members,
             Transport* transport, uint64_t now_ms)
    : config_(group_config),
      self_(config.node_id),
      transport_(transport),
      members_(std::move(members)),
      now_ms_(now_ms) {
  std::sort(members_.begin(), members_.end());
  for (NodeId member : members_) {
    if (member != self_) peers_.push_back(member);
  }
  if (!IsMember(self_)) return;
  order_ = MakeTotalOrder(config_, config, members_);
  membership::FailureDetectorOptions options;
  options.suspect_timeout_ms = config_.suspect_timeout_ms;
  options.exclude_timeout_ms = config_.exclude_timeout_ms;
  detector_ = std::make_unique<membership::FailureDetector>(options, peers_, now_ms);
  detector_->SetMonitoring(config_.liveness == GroupConfig::Liveness::kLively, now_ms);
  for (NodeId peer : peers_) last_sent_ms_[peer] = 0;
}

bool Group::IsMember(NodeId node) const {
  return std::binary_search(members_.begin(), members_.end(), node);
}

bool Group::suspected(NodeId node) const {
  return detector_ != nullptr && detector_->suspected(node);
}

uint32_t Group::trusted_count() const {
  if (!is_member()) return members_.size();
  return detector_->trusted_count() + 1;
}

NodeId Group::RequestManager() const {
  for (NodeId member : members_) {
    if (!suspected(member)) return member;
  }
  return members_.front();
}

void Group::Broadcast(std::string payload, std::vector<consensus::Delivery>* deliveries) {
  consensus::Outbox outbox;
  order_->Broadcast(std::move(payload), &outbox);
  Flush(&outbox, deliveries);
}

void Group::Receive(NodeId from, const wire::Envelope& envelope,
                    std::vector<consensus::Delivery>* deliveries) {
  if (!is_member() || !IsMember(from)) return;
  std::vector<membership::SuspicionEvent> events;
  detector_->Heard(from, now_ms_, &events);
  for (const auto& event : events) {
    Log("membership")->info("group {}: node {} trusted again after {} ms of silence", name(), from,
                            event.silent_ms);
    consensus::Outbox outbox;
    order_->Suspect(from, false, &outbox);
    Flush(&outbox, deliveries);
  }
  if (envelope.has_heartbeat()) return;
  consensus::Outbox outbox;
  order_->Step(from, envelope, &outbox);
  Flush(&outbox, deliveries);
}

void Group::Tick(uint64_t now_ms, bool app_pending, std::vector<consensus::Delivery>* deliveries) {
  now_ms_ = now_ms;
  if (!is_member()) return;
  consensus::Outbox outbox;
  order_->Tick(now_ms, &outbox);
  Flush(&outbox, deliveries);
  // 003 section 3: a lively group always runs the time-silence mechanism; an event-driven group
  // only while messages are pending, and is silent when idle.
  bool active = config_.liveness == GroupConfig::Liveness::kLively || app_pending || HasPending();
  detector_->SetMonitoring(active, now_ms);
  if (!active) return;
  SendHeartbeats();
  Detect(now_ms, deliveries);
}

void Group::SendHeartbeats() {
  for (NodeId peer : peers_) {
    if (now_ms_ - last_sent_ms_[peer] < config_.silence_ms) continue;
    wire::Envelope envelope;
    envelope.mutable_heartbeat()->set_sent_ms(now_ms_);
    counters_.heartbeats_sent++;
    SendTo(peer, std::move(envelope));
  }
}

void Group::Detect(uint64_t now_ms, std::vector<consensus::Delivery>* deliveries) {
  std::vector<membership::SuspicionEvent> events;
  detector_->Tick(now_ms, &events);
  for (const auto& event : events) {
    if (event.kind == membership::SuspicionEvent::Kind::kSuspect) {
      counters_.suspicions++;
      Log("membership")->warn("group {}: suspect node {} (silent {} ms)", name(), event.node,
                              event.silent_ms);
      consensus::Outbox outbox;
      order_->Suspect(event.node, true, &outbox);
      Flush(&outbox, deliveries);
    } else if (event.kind == membership::SuspicionEvent::Kind::kExclude) {
      counters_.exclusions++;
      exclusions_.push_back(event.node);
      Log("membership")->warn("group {}: exclude node {} (silent {} ms)", name(), event.node,
                              event.silent_ms);
    }
  }
}

void Group::SendTo(NodeId to, wire::Envelope envelope) {
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(config_.name);
  envelope.set_sender_node(self_);
  envelope.set_view_id(view_id_);
  last_sent_ms_[to] = now_ms_;
  counters_.envelopes_sent++;
  transport_->Send(to, std::move(envelope));
}

void Group::Flush(consensus::Outbox* outbox, std::vector<consensus::Delivery>* deliveries) {
  for (auto& [to, envelope] : outbox->sends) {
    if (to == self_) continue;
    SendTo(to, std::move(envelope));
  }
  for (auto& delivery : outbox->deliveries) deliveries->push_back(std::move(delivery));
}

const consensus::OrderCounters* Group::order_counters() const {
  return order_ ? &order_->counters() : nullptr;
}

bool Group::HasPending() const { return order_ != nullptr && order_->HasPending(); }

}  // namespace cohort::nso
