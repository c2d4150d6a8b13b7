#include "nso/group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nso/logging.h"

namespace cohort::nso {

Group::Group(const GroupConfig& group_config, const Config& config, std::vector<NodeId> members,
             Transport* transport, uint64_t incarnation, uint64_t now_ms,
             const std::set<NodeId>* links_closed, GroupEventLog* event_log)
    : group_config_(group_config),
      config_(config),
      self_(config.node_id),
      transport_(transport),
      links_closed_(links_closed),
      event_log_(event_log),
      now_ms_(now_ms),
      incarnation_(incarnation) {
  consensus::Deliveries none;
  InstallView(1, std::move(members), &none);
  if (event_driven() && member_ && !peers_.empty()) announcements_left_ = kAnnouncements;
}

Group::Rare& Group::rare() {
  if (!rare_) rare_ = std::make_unique<Rare>();
  return *rare_;
}

Group::Flow& Group::flow() {
  if (!flow_) {
    flow_ = std::make_unique<Flow>(static_cast<uint64_t>(config_.limits.servant_backlog_bytes));
  }
  return *flow_;
}

std::vector<NodeId> Group::TakeExclusions() {
  return rare_ ? std::move(rare_->exclusions) : std::vector<NodeId>();
}

std::vector<std::pair<NodeId, uint64_t>> Group::TakeRestarts() {
  return rare_ ? std::move(rare_->restarts) : std::vector<std::pair<NodeId, uint64_t>>();
}

uint64_t Group::MemberIncarnation(NodeId node) const {
  if (node == self_) return incarnation_;
  if (auto heard = incarnations_.find(node); heard != incarnations_.end()) return heard->second;
  if (!rare_) return 0;
  auto known = rare_->member_incarnations.find(node);
  return known == rare_->member_incarnations.end() ? 0 : known->second;
}

std::vector<NodeId> Group::TakeBeyondLog() {
  return rare_ ? std::move(rare_->beyond_log) : std::vector<NodeId>();
}

void Group::InstallView(uint64_t view_id, std::vector<NodeId> members,
                        consensus::Deliveries* deliveries,
                        const std::map<NodeId, uint64_t>& added, bool adopted) {
  Touch();
  if (flow_ != nullptr) {
    // Requests held by flow control are this member's broadcasts not delivered, after those the
    // old order had: sent again in the next view with it, in order (or kept, if out of it).
    for (std::string& payload : flow_->held) {
      undelivered_.emplace(undelivered_.empty() ? 1 : undelivered_.rbegin()->first + 1,
                           std::move(payload));
    }
    flow_->held.clear();
    flow_->held_bytes = 0;
  }
  if (member_) {
    Order().Freeze();  // made now if unused: it answers a laggard of this view as it always did
    // Kept for a lagging member to learn the decisions up to the change: until every member of
    // the new view has been heard in it, for at most a minute, and at most 8 views back.
    std::map<uint64_t, Retired>& retired = rare().retired;
    retired[view_id_] = {std::move(order_), members_, incarnations_, now_ms_ + 60000};
    while (retired.size() > 8) DropRetired(retired.begin());
  }
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  // Which process each member of the new view is: the one named when added; for one that stays,
  // the one heard in the old view or known before it (a member that restarted is removed and
  // added again, so the process stays the same while it is a member). A view told rather than
  // delivered (`adopted`) counts the processes it was told with, and nothing of the old view.
  std::map<NodeId, uint64_t> known;
  for (NodeId member : members) {
    if (member == self_) continue;  // this process (MemberIncarnation): nothing kept for it
    auto named = added.find(member);
    const uint64_t incarnation = named != added.end() ? named->second
                                 : adopted            ? 0
                                                      : MemberIncarnation(member);
    if (incarnation != 0) known.emplace(member, incarnation);
  }
  if (!known.empty() || rare_) rare().member_incarnations = std::move(known);
  incarnations_.clear();
  previous_claim_ = 0;  // a view was installed: no longer the configured view's claim
  if (rare_) {
    rare_->restarts_flagged.clear();
    rare_->refused_restarts.clear();
    rare_->restarted_claimants.clear();
    rare_->not_counted_ms = 0;  // the new view counts whichever process it counts
    // Restarts noticed in the old view and not yet acted on: the view change that installed this
    // view may have re-added the node already (another member noticed first), and a second
    // re-add would cost a view change and a state transfer for nothing (seen in tools/demo). A
    // restarted node that was not re-added is behind and asks to join by itself.
    rare_->restarts.clear();
    for (auto it = rare_->later_views.begin(); it != rare_->later_views.end();) {
      it = it->second.view <= view_id ? rare_->later_views.erase(it) : std::next(it);
    }
  }
  if (view_id > view_id_) counters_.view_changes++;
  view_id_ = view_id;
  members_ = std::move(members);
  if (flow_ != nullptr) flow_->state.Retain(members_);
  peers_.clear();
  for (NodeId member : members_) {
    if (member != self_) peers_.push_back(member);
  }
  // A new view starts with fresh suspicions: what was suspected or excluded was about the old one.
  // The timeouts raised by wrong suspicions carry over (failure_detector.h).
  std::map<NodeId, membership::FailureDetector::Learned> learned;
  if (detector_ != nullptr) learned = detector_->learned();
  detector_ = std::make_unique<membership::FailureDetector>(
      DetectorOptions(config().suspect_timeout_ms, config().exclude_timeout_ms), peers_, now_ms_);
  detector_->Learn(learned);
  detector_->SetMonitoring(config().liveness == GroupConfig::Liveness::kLively, now_ms_);
  for (NodeId peer : peers_) {
    last_sent_ms_.try_emplace(peer, 0);
    if (links_closed_ != nullptr && links_closed_->count(peer) > 0) {
      detector_->LinkDown(peer);  // suspected at the next Tick
    }
  }
  last_progress_ms_ = now_ms_;
  member_ = IsMember(self_);
  // Left out (excluded while alive, e.g. by a partition that healed as the others agreed): its
  // own requests the old view did not deliver wait for the next view with it, as those of a
  // member that never learnt of the view without it do (it rejoins and sends them there).
  if (!member_) return;
  consensus::SpareBtreeMap<uint64_t, std::string> undelivered = std::move(undelivered_);
  undelivered_.clear();
  for (auto& [seq, payload] : undelivered) Broadcast(std::move(payload), deliveries);
}

size_t Group::DropUndelivered() {
  const size_t dropped = undelivered_.size() + held_count();
  undelivered_.clear();
  if (flow_ != nullptr) {
    flow_->held.clear();
    flow_->held_bytes = 0;
  }
  return dropped;
}

consensus::TotalOrder& Group::Order() {
  if (order_ == nullptr) order_ = MakeTotalOrder(config(), config_, members_);
  return *order_;
}

bool Group::IsMember(NodeId node) const {
  return std::binary_search(members_.begin(), members_.end(), node);
}

bool Group::suspected(NodeId node) const {
  return is_member() && detector_->suspected(node);
}

uint32_t Group::trusted_count() const {
  if (!is_member()) return members_.size();
  return detector_->trusted_count() + 1;
}

uint32_t Group::heard_within_count(uint64_t now_ms, uint64_t window_ms) const {
  if (!is_member()) return members_.size();
  return detector_->heard_within_count(now_ms, window_ms) + 1;
}

void Group::Broadcast(std::string payload, consensus::Deliveries* deliveries) {
  Touch();
  if (flow_ != nullptr && (!flow_->held.empty() || flow_->state.Holding(now_ms_))) {
    flow_->held_bytes += payload.size();
    flow_->held.push_back(std::move(payload));  // nso/group_flow.h: after those held already
    return;
  }
  consensus::Outbox outbox;
  BroadcastNow(std::move(payload), &outbox);
  Flush(view_id_, &outbox, deliveries);
}

void Group::BroadcastControl(std::string payload, consensus::Deliveries* deliveries) {
  Touch();
  ReleaseHeld(/*all=*/true, deliveries);
  consensus::Outbox outbox;
  BroadcastNow(std::move(payload), &outbox);
  Flush(view_id_, &outbox, deliveries);
}

void Group::BroadcastNow(std::string payload, consensus::Outbox* outbox) {
  if (durable_claim()) {
    // Held, in order, for the next view (InstallView broadcasts them there): the group resumes
    // from a kept state first, or this process is re-added with the state.
    undelivered_.emplace(undelivered_.empty() ? 1 : undelivered_.rbegin()->first + 1,
                         std::move(payload));
    return;
  }
  uint64_t seq = Order().Broadcast(payload, outbox);  // (copied where the order keeps it)
  undelivered_[seq] = std::move(payload);
}

void Group::ReleaseHeld(bool all, consensus::Deliveries* deliveries) {
  if (flow_ == nullptr || flow_->held.empty() || !member_) return;
  if (!all && flow_->state.Holding(now_ms_)) return;
  const size_t max_messages = static_cast<size_t>(config_.consensus.batch_max_messages);
  const size_t max_bytes = static_cast<size_t>(config_.consensus.batch_max_bytes);
  consensus::Outbox outbox;
  size_t messages = 0, bytes = 0;
  while (!flow_->held.empty() && (all || (messages < max_messages && bytes < max_bytes))) {
    bytes += flow_->held.front().size();
    flow_->held_bytes -= flow_->held.front().size();
    messages++;
    BroadcastNow(std::move(flow_->held.front()), &outbox);
    flow_->held.pop_front();
  }
  Flush(view_id_, &outbox, deliveries);
}

void Group::ObserveServants(uint64_t unread) {
  const auto backlog_bytes = static_cast<uint64_t>(config_.limits.servant_backlog_bytes);
  // Off, or nothing to say (flow_ is made once the servants first fall behind).
  if (backlog_bytes == 0 || !member_ || (flow_ == nullptr && unread < backlog_bytes)) return;
  std::optional<bool> tell = flow().state.Observe(unread, now_ms_);
  if (!tell) return;
  if (*tell) {
    Log("group")->info("group {}: this member's servants are behind ({} bytes unread): the "
                       "group's new requests wait", name(), unread);
  } else {
    Log("group")->info("group {}: this member's servants caught up", name());
  }
  for (NodeId peer : peers_) SendHeartbeat(peer, /*reply_wanted=*/false);
}

void Group::Receive(NodeId from, const wire::Envelope& envelope,
                    consensus::Deliveries* deliveries) {
  Touch();
  if (envelope.view_id() != view_id_) {
    if (!rare_) return;  // no view retired
    auto retired = rare_->retired.find(envelope.view_id());
    if (retired == rare_->retired.end() || envelope.has_heartbeat()) return;
    if (!SameIncarnations(from, envelope, &retired->second.incarnations)) return;
    // A lagging member of an old view: answer it; what the old order delivers now is discarded
    // here, since this node has moved past that view's end.
    consensus::Outbox outbox;
    retired->second.order->Step(from, envelope, &outbox);
    consensus::Deliveries discarded;
    Flush(envelope.view_id(), &outbox, &discarded);
    return;
  }
  if (!is_member() || !IsMember(from)) return;
  if (!SameIncarnations(from, envelope, &incarnations_)) {
    if (event_driven() && envelope.receiver_incarnation() != 0 &&
        envelope.receiver_incarnation() != incarnation_) {
      // The sender knows an earlier incarnation of this node: in an event-driven group nothing
      // else may tell it of the restart (a lively group's heartbeats do), and it would go on
      // counting this node as one with the group's state.
      AnswerHeartbeat(from);
    }
    const uint64_t member = MemberIncarnation(from);
    bool sender_restarted =
        member != 0 && envelope.incarnation() != 0 && member != envelope.incarnation();
    if (sender_restarted) rare().refused_restarts[from] = member;
    if (sender_restarted && rare().restarts_flagged.insert(from).second) {  // once per view
      LogEvent(spdlog::level::warn, absl::StrCat("node ", from, " restarted"),
               absl::StrCat("node ", from, " restarted (incarnation changed)"));
      rare().restarts.emplace_back(from, envelope.incarnation());
    }
    return;  // or the sender knows an earlier incarnation of this node: wait to be re-admitted
  }
  std::vector<membership::SuspicionEvent> events;
  detector_->Heard(from, now_ms_, &events);
  for (const auto& event : events) {
    LogEvent(spdlog::level::info, absl::StrCat("node ", from, " trusted again"),
             absl::StrCat("node ", from, " trusted again after ", event.silent_ms,
                          " ms of silence",
                          event.raised_to_ms == 0
                              ? std::string()
                              : absl::StrCat(": suspected after ", event.raised_to_ms,
                                             " ms of silence from now on")));
    if (event.raised_to_ms != 0) counters_.suspect_timeouts_raised++;
    if (durable_claim()) continue;  // no order in this view (Group::durable_claim)
    consensus::Outbox outbox;
    Order().Suspect(from, false, &outbox);
    Flush(view_id_, &outbox, deliveries);
  }
  if (envelope.has_heartbeat()) {
    if (envelope.heartbeat().servants_behind() || flow_ != nullptr) {
      flow().state.Heard(from, envelope.heartbeat().servants_behind(), now_ms_);
    }
    // An idle event-driven member sends no heartbeats of its own: it answers those of a member
    // that watches it, which would otherwise suspect it only for being idle.
    if (envelope.heartbeat().reply_wanted() && event_driven() && !detector_->monitoring()) {
      AnswerHeartbeat(from);
    }
    return;
  }
  // A durable group's restarted process takes part in no order of its configured view: what was
  // delivered there before the restart is in the state kept on disk, not in this process.
  if (durable_claim()) return;
  consensus::Outbox outbox;
  Order().Step(from, envelope, &outbox);
  Flush(view_id_, &outbox, deliveries);
}

bool Group::SameIncarnations(NodeId from, const wire::Envelope& envelope,
                             std::map<NodeId, uint64_t>* incarnations) {
  if (envelope.receiver_incarnation() != 0 && envelope.receiver_incarnation() != incarnation_) {
    return false;
  }
  if (envelope.incarnation() == 0) return true;
  auto known = incarnations->find(from);
  if (known != incarnations->end() && incarnations == &incarnations_ && durable_claim() &&
      envelope.previous_incarnation() != 0 && envelope.incarnation() > known->second) {
    // A restarted process of a durable group restarted again while the group waits to resume
    // from its kept state: nothing was ordered in this view, so the later process simply takes
    // its place (the kept states are on disk, not in the processes).
    known->second = envelope.incarnation();
    return true;
  }
  if (known != incarnations->end()) return known->second == envelope.incarnation();
  // First heard in the current view: the process this view counts, when known (it was added
  // with it, or stayed a member since heard), is the only one taken; another is a restart.
  if (incarnations == &incarnations_) {
    uint64_t member = MemberIncarnation(from);
    if (member == 0 && envelope.previous_incarnation() != 0 && previous_claim_ == 0) {
      // A later process of a node never heard in this view (its configured one): the view
      // counts the earlier process, which may have acknowledged what this one forgot. Not
      // taken from another restarted process's point of view (previous_claim_): when every
      // member restarted, none is left to re-add them, and they start afresh as before.
      member = envelope.previous_incarnation();
      rare().member_incarnations[from] = member;
      counters_.restarts_named++;
    }
    if (member != 0 && member != envelope.incarnation()) return false;
    if (envelope.previous_incarnation() != 0 && previous_claim_ != 0) NoteRestartedClaimant(from);
  } else if (envelope.previous_incarnation() != 0) {
    return false;  // a retired view never heard this node: a later process took no part in it
  }
  incarnations->emplace(from, envelope.incarnation());
  return true;
}

void Group::NoteRestartedClaimant(NodeId from) {
  std::set<NodeId>& claimants = rare().restarted_claimants;
  if (!claimants.insert(from).second || claimants.size() + 1 != members_.size()) return;
  // Every member restarted (they all say so): none holds the state of the group's earlier
  // processes, unless a member of a later view gives it. Beyond the fault model; an operator
  // wants to know (RELIABILITY.md "Stable storage").
  counters_.all_restarted++;
  if (config().durable) {
    Log("membership")->warn("group {}: every member of view {} restarted (incarnation files): "
                            "the group resumes from the most advanced state their servants kept",
                            name(), view_id_);
    return;
  }
  Log("membership")->warn("group {}: every member of view {} restarted (incarnation files): the "
                          "group starts afresh, without the state of their earlier processes",
                          name(), view_id_);
}

void Group::SetTimeouts(int64_t suspect_timeout_ms, int64_t exclude_timeout_ms,
                        int64_t silence_ms) {
  if (!reloaded_) reloaded_ = std::make_unique<GroupConfig>(group_config_);
  reloaded_->suspect_timeout_ms = suspect_timeout_ms;
  reloaded_->exclude_timeout_ms = exclude_timeout_ms;
  reloaded_->silence_ms = silence_ms;
  detector_->SetOptions(DetectorOptions(suspect_timeout_ms, exclude_timeout_ms));
}

membership::FailureDetectorOptions Group::DetectorOptions(uint64_t suspect_timeout_ms,
                                                          uint64_t exclude_timeout_ms) {
  membership::FailureDetectorOptions options;
  options.suspect_timeout_ms = suspect_timeout_ms;
  options.exclude_timeout_ms = exclude_timeout_ms;
  // The owner ticks a watching group every few ms (a dozing one every kDozeTickMs, not
  // watching): a longer gap is this node's own pause (failure_detector.h).
  options.own_pause_ms = std::max<uint64_t>(suspect_timeout_ms / 2, kDozeTickMs + 5);
  return options;
}

void Group::NoteView(NodeId from, uint64_t view_id, uint64_t incarnation, bool awaiting_state) {
  announcements_left_ = 0;  // heard from another node: it knows this incarnation, or told its view
  if (rare_ && incarnation != 0) {
    auto named = rare_->later_views.find(from);
    // Daemon incarnations grow (the wall clock at its start): a later process of that node
    // speaks, the one that held the later view's state is gone.
    if (named != rare_->later_views.end() && incarnation > named->second.incarnation) {
      rare_->later_views.erase(named);
    }
  }
  if (view_id <= view_id_) return;
  if (awaiting_state) {
    // Its sender holds no state of that view (nor delivered anything in it): no newer state is
    // known to exist, so this view is not over for that. Where a process of the later view
    // holds its state, it names the view too (in-model: a majority of the view installed it).
    // Out of the model, such processes may be all that is left of it, told the view by a member
    // that died before giving them its state, while the processes that installed it have all
    // restarted (refound_survivors_sim_test, consensus seed 233): the view has nothing to give,
    // and the survivors re-found the group past it (Node::TryRefound).
    rare().highest_view_named = std::max(rare().highest_view_named, view_id);
    return;
  }
  highest_view_heard_ = std::max(highest_view_heard_, view_id);
  rare().later_views[from] = {view_id, incarnation, now_ms_};
}

bool Group::LaterViewHeld(bool recently) const {
  if (!rare_) return false;
  for (const auto& [node, named] : rare_->later_views) {
    if (named.view > view_id_ && (!recently || WithinExclusionTimeout(named.heard_ms))) return true;
  }
  return false;
}

bool Group::WithinExclusionTimeout(uint64_t since_ms) const {
  return since_ms != 0 && now_ms_ < since_ms + config().exclude_timeout_ms;
}

bool Group::ViewOver() const {
  return LaterViewHeld(/*recently=*/true) || NotCounted();
}

std::map<NodeId, uint64_t> Group::TakeRefusedRestarts() {
  return rare_ ? std::exchange(rare_->refused_restarts, {}) : std::map<NodeId, uint64_t>();
}

void Group::Tick(uint64_t now_ms, bool app_pending, consensus::Deliveries* deliveries) {
  now_ms_ = now_ms;
  counters_.ticks++;
  bool all_heard = is_member() && std::all_of(peers_.begin(), peers_.end(), [this](NodeId peer) {
    return incarnations_.count(peer) > 0;
  });
  std::map<uint64_t, Retired> none;
  std::map<uint64_t, Retired>& retired = rare_ ? rare_->retired : none;
  for (auto it = retired.begin(); it != retired.end();) {
    if (now_ms >= it->second.drop_at_ms || all_heard) {
      it = DropRetired(it);
      continue;
    }
    consensus::Outbox outbox;
    it->second.order->Tick(now_ms, &outbox);
    consensus::Deliveries discarded;
    Flush(it->first, &outbox, &discarded);
    ++it;
  }
  doze_until_ms_ = 0;
  if (!is_member()) {
    MaybeDoze();
    return;
  }
  ReleaseHeld(/*all=*/false, deliveries);
  // 003 section 3: a lively group always runs the time-silence mechanism; an event-driven group
  // only while messages are pending, and is silent when idle (no retransmissions or probes
  // either: a lagging member catches up when traffic resumes).
  bool active = config().liveness == GroupConfig::Liveness::kLively || app_pending ||
                HasPending();
  if (active && !detector_->monitoring()) woke_up_ = true;
  detector_->SetMonitoring(active, now_ms);
  if (announcements_left_ > 0 && now_ms >= next_announcement_ms_) {
    // This incarnation just started (event-driven: nothing else would be sent while idle).
    announcements_left_--;
    next_announcement_ms_ = now_ms + std::max<uint64_t>(4 * config().suspect_timeout_ms, 200);
    for (NodeId peer : peers_) SendHeartbeat(peer, /*reply_wanted=*/true);
  }
  if (!active) {
    MaybeDoze();
    return;
  }
  if (!durable_claim()) {
    consensus::Outbox outbox;
    Order().Tick(now_ms, &outbox);
    Flush(view_id_, &outbox, deliveries);
  }
  SendHeartbeats();
  Detect(now_ms, deliveries);
}

void Group::LogEvent(spdlog::level::level_enum level, std::string event, std::string text) {
  if (event_log_ != nullptr) {
    event_log_->Note("membership", level, name(), std::move(event), std::move(text));
  } else {
    Log("membership")->log(level, "group {}: {}", name(), text);
  }
}

void Group::MaybeDoze() {
  const bool quiet = event_driven() && announcements_left_ == 0 && !durable_claim() &&
                     (rare_ == nullptr || rare_->retired.empty()) &&
                     (flow_ == nullptr || (flow_->held.empty() && !flow_->state.behind() &&
                                           !flow_->state.Holding(now_ms_)));
  if (quiet && now_ms_ >= last_activity_ms_ + kDozeAfterMs) doze_until_ms_ = now_ms_ + kDozeTickMs;
}

void Group::LinkChanged(NodeId peer, bool up, consensus::Deliveries* deliveries) {
  Touch();
  if (up) {
    detector_->LinkUp(peer);
    return;
  }
  detector_->LinkDown(peer);
  if (is_member() && detector_->monitoring()) Detect(now_ms_, deliveries);
}

void Group::SendHeartbeats() {
  for (NodeId peer : peers_) {
    if (now_ms_ - last_sent_ms_[peer] < static_cast<uint64_t>(config().silence_ms)) continue;
    SendHeartbeat(peer, /*reply_wanted=*/event_driven());
  }
}

void Group::SendHeartbeat(NodeId to, bool reply_wanted) {
  // Kept from one heartbeat to the next, as SendOrderMessage's envelopes are: a lively group
  // sends one to each peer it was silent to for silence_ms, and each allocated its heartbeat and
  // group string (issue 7). The heartbeat is emptied whole and the header set whole each time.
  thread_local wire::Envelope kept;
  wire::Heartbeat* heartbeat = kept.mutable_heartbeat();
  heartbeat->Clear();
  heartbeat->set_sent_ms(now_ms_);
  if (reply_wanted) heartbeat->set_reply_wanted(true);
  if (servants_behind()) heartbeat->set_servants_behind(true);
  counters_.heartbeats_sent++;
  SendEnvelopeInView(view_id_, to, &kept, {});
}

void Group::AnswerHeartbeat(NodeId to) {
  auto last = last_sent_ms_.find(to);
  if (last != last_sent_ms_.end() && last->second != 0 &&
      now_ms_ - last->second < static_cast<uint64_t>(config().silence_ms)) {
    return;  // it heard from this node a moment ago
  }
  SendHeartbeat(to, /*reply_wanted=*/false);
}

void Group::Detect(uint64_t now_ms, consensus::Deliveries* deliveries) {
  std::vector<membership::SuspicionEvent> events;
  detector_->Tick(now_ms, &events);
  for (const auto& event : events) {
    if (event.kind == membership::SuspicionEvent::Kind::kSuspect) {
      counters_.suspicions++;
      if (event.link_down) counters_.suspicions_on_disconnect++;
      LogEvent(spdlog::level::warn, absl::StrCat("suspect node ", event.node),
               absl::StrCat("suspect node ", event.node, " (",
                            event.link_down ? "its connection closed, " : "", "silent ",
                            event.silent_ms, " ms)"));
      if (durable_claim()) continue;
      consensus::Outbox outbox;
      Order().Suspect(event.node, true, &outbox);
      Flush(view_id_, &outbox, deliveries);
    } else if (event.kind == membership::SuspicionEvent::Kind::kExclude) {
      counters_.exclusions++;
      rare().exclusions.push_back(event.node);
      LogEvent(spdlog::level::warn, absl::StrCat("exclude node ", event.node),
               absl::StrCat("exclude node ", event.node, " (silent ", event.silent_ms,
                            " ms): proposing view ", view_id_ + 1));
    }
  }
}

void Group::SendTo(NodeId to, wire::Envelope envelope) { SendInView(view_id_, to, std::move(envelope)); }

void Group::SendOrderMessage(uint64_t view_id, consensus::OutboxSend* send) {
  using Body = consensus::OutboxSend::Body;
  if (send->body == Body::kEnvelope) {
    return SendEnvelopeInView(view_id, send->to, &send->envelope, std::move(send->shared));
  }
  // One envelope per body kind, kept with its body: filled, serialised or copied by the
  // transport during the call (transport.h), and left for the next send. Every header field is
  // set each time (SendEnvelopeInView) and the body is swapped in whole, so nothing of an
  // earlier send stays; the body swapped out goes with `send`.
  thread_local wire::Envelope consensus_envelope;
  thread_local wire::Envelope sequencer_envelope;
  wire::Envelope* envelope = nullptr;
  if (send->body == Body::kConsensus) {
    envelope = &consensus_envelope;
    envelope->mutable_consensus()->Swap(&send->consensus);
  } else {
    envelope = &sequencer_envelope;
    envelope->mutable_sequencer()->Swap(&send->sequencer);
  }
  SendEnvelopeInView(view_id, send->to, envelope, std::move(send->shared));
}

void Group::SendEnvelopeInView(uint64_t view_id, NodeId to, wire::Envelope* envelope_pointer,
                               consensus::SharedBatch shared) {
  wire::Envelope& envelope = *envelope_pointer;
  Touch();
  envelope.set_version(wire::VERSION_1);
  envelope.set_group(config().name);
  envelope.set_group_incarnation(group_incarnation());  // 0: none
  envelope.set_sender_node(self_);
  envelope.set_view_id(view_id);
  // Outside its current view (it left, or was excluded while alive) this node holds no state of
  // it either: the members that have not installed that view yet must not take its word for a
  // view whose state exists elsewhere (NoteView), or they stop ordering in their own before they
  // deliver the change (cohort-sim --stack --ordering sequencer --leaves --slow-servants, seed
  // 2912: n3 left, the ORDERED that carried its leave to n4 was lost, and n3's join request and
  // forwards naming view 3 made n2, the sequencer, and n4 stop resending and acknowledging it).
  envelope.set_awaiting_state(holds_no_state() && view_id == view_id_);
  envelope.set_previous_incarnation(view_id == view_id_ ? previous_claim_ : 0);
  envelope.set_incarnation(incarnation_);
  const std::map<NodeId, uint64_t>& known =
      view_id == view_id_ ? incarnations_ : rare().retired.at(view_id).incarnations;
  auto receiver = known.find(to);
  envelope.set_receiver_incarnation(receiver != known.end() ? receiver->second : 0);
  last_sent_ms_[to] = now_ms_;
  counters_.envelopes_sent++;
  if (shared) {
    transport_->SendWithBatch(to, envelope, std::move(shared));
    return;
  }
  transport_->Send(to, envelope);
}

namespace {

// A message that makes an order: a proposal (its receivers adopt it, and with 3 members decide
// on it), an ACK (a coordinator decides on a majority of them), a sequence number, a log for a
// new sequencer, a stability acknowledgement. Not one that asks for what was agreed and so
// makes a decided member answer with it (an estimate, a NACK, a retransmission request), nor a
// decision, nor a payload.
bool MakesOrder(const consensus::OutboxSend& send) {
  if (send.has_consensus()) {
    return send.consensus_message().kind() == wire::ConsensusMessage::PROPOSAL ||
           send.consensus_message().kind() == wire::ConsensusMessage::ACK;
  }
  if (send.has_sequencer()) {
    return send.sequencer_message().kind() == wire::SequencerMessage::ORDERED ||
           send.sequencer_message().kind() == wire::SequencerMessage::ACK ||
           send.sequencer_message().kind() == wire::SequencerMessage::EPOCH_STATE;
  }
  return false;
}

}  // namespace

void Group::Flush(uint64_t view_id, consensus::Outbox* outbox,
                  consensus::Deliveries* deliveries) {
  // A member that hears of a later view knows its own is over: the view's order already
  // decided everything up to the change that ended it, which this member only has to learn
  // (by asking: its estimates and NACKs are answered with the decisions). It makes no order
  // there any more. A restarted daemon starts in the configured view with no memory; two of
  // them would otherwise be a majority of it and agree on a history of their own, replacing the
  // state that a member in the later view still holds (test/restart_rejoin_sim_test.cc: n1 and
  // n2 restarted in turn, n3 in view 2). Each member of the later view names it in whatever it
  // sends (a view notice answers a join request); once none has for the exclusion timeout, they
  // are taken as gone, with the state: the view is used again (a fresh start of the group, as
  // when a majority restarts at once).
  const bool over = view_id == view_id_ && ViewOver();
  for (consensus::OutboxSend& send : outbox->sends) {
    if (send.to == self_) continue;
    if (over && MakesOrder(send)) {
      counters_.order_messages_withheld++;
      continue;
    }
    SendOrderMessage(view_id, &send);
  }
  if (view_id == view_id_ && !outbox->deliveries.empty()) last_progress_ms_ = now_ms_;
  if (view_id == view_id_) {  // a laggard of a retired view learns of the new one by itself
    for (NodeId node : outbox->beyond_log) {
      if (node != self_ && IsMember(node)) rare().beyond_log.push_back(node);
    }
  }
  if (deliveries->empty()) {
    deliveries->swap(outbox->deliveries);  // the usual case: no copy, no allocation
    return;
  }
  deliveries->reserve(deliveries->size() + outbox->deliveries.size());
  for (auto& delivery : outbox->deliveries) deliveries->push_back(std::move(delivery));
}

void Group::Delivered(const consensus::Delivery& delivery) {
  Touch();
  if (delivery.origin != self_) return;
  // (origin, seq) names a broadcast of one process: a restarted daemon numbers its own from 1
  // again in the configured view, where a member that never heard its earlier process (one that
  // started late) counts it and lets it catch up on the decided log, the earlier process's
  // broadcasts included. Those are not this process's, whose own under the same seq stays to be
  // sent again in its next view (cohort-sim --stack --ordering consensus --nodes 5 --late-start
  // 1000 --chaos-ms 1500 --perturb restart:20 --sends 1272..1272, seed 621: node 4's one-way
  // call c45, made just after its restart, was taken for delivered with its earlier process's
  // c21 and never ordered).
  auto own = undelivered_.find(delivery.seq);
  if (own != undelivered_.end() && own->second == delivery.payload) {
    if (order_ != nullptr) order_->spare_payloads().Keep(std::move(own->second));  // Submit's next
    undelivered_.erase(own);
  }
}

std::string Group::SparePayload() {
  return order_ != nullptr ? order_->spare_payloads().Take() : std::string();
}

std::map<uint64_t, Group::Retired>::iterator Group::DropRetired(
    std::map<uint64_t, Retired>::iterator retired) {
  rare().dropped_orders += retired->second.order->counters();
  return rare().retired.erase(retired);
}

std::optional<consensus::OrderCounters> Group::order_counters() const {
  if (!member_ && rare_ == nullptr) return std::nullopt;  // (an order not made yet counted nothing)
  consensus::OrderCounters total;
  if (order_ != nullptr) total += order_->counters();
  if (rare_ != nullptr) {
    total += rare_->dropped_orders;
    for (const auto& [view, retired] : rare_->retired) total += retired.order->counters();
  }
  return total;
}

std::string Group::DescribeOrder() const {
  if (!member_) return "no order (not a member)";
  return order_ != nullptr ? order_->Describe() : std::string("no order yet (nothing ordered)");
}

bool Group::HasPending() const {
  return held_count() > 0 || (order_ != nullptr && order_->HasPending());
}

}  // namespace cohort::nso
