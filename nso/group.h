// One group as hosted by one daemon: its current view, the total-order protocol of that view, its
// failure detector and the time-silence mechanism (003 section 3). Owned by Node, on the protocol
// thread.
//
// Views: each view runs its own total-order instance; envelopes carry the view id. A view change
// is itself ordered in the old view (ViewChange in GroupMessage), so it happens at the same point
// of the order at every member (virtual synchrony). The old view's order is kept, retired, for a
// while so that a lagging member can still learn the decisions up to the change; whatever it
// delivers after the change is discarded everywhere, and the members re-broadcast their own
// undelivered messages in the new view.
#ifndef COHORT_NSO_GROUP_H_
#define COHORT_NSO_GROUP_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "consensus/spare.h"
#include "consensus/total_order.h"
#include "membership/failure_detector.h"
#include "nso/config.h"
#include "nso/group_event_log.h"
#include "nso/log_every.h"
#include "nso/group_flow.h"
#include "nso/transport.h"

namespace cohort::nso {

struct GroupCounters {
  uint64_t heartbeats_sent = 0;
  uint64_t envelopes_sent = 0;
  uint64_t suspicions = 0;
  uint64_t suspicions_on_disconnect = 0;  // of them, because the member's connection closed
  // Wrong suspicions that raised the member's suspicion timeout (membership/failure_detector.h).
  uint64_t suspect_timeouts_raised = 0;
  uint64_t exclusions = 0;
  uint64_t view_changes = 0;
  // Messages that make an order not sent: this member had heard of a later view (Group::Flush).
  uint64_t order_messages_withheld = 0;
  uint64_t refounded = 0;  // views this node installed by itself to re-found the group
  // Processes never heard in the current view that said which process they follow
  // (Envelope.previous_incarnation): the view counts that one, and they are re-added.
  uint64_t restarts_named = 0;
  // Times every member of the configured view was heard as a restarted process (incarnation
  // files): no member is left to re-add the others, and the group starts afresh (or, durable,
  // resumes from the most advanced state the servants kept).
  uint64_t all_restarted = 0;
  // Views this node installed by itself to re-found a durable group from its servant's kept
  // state, every member having restarted (Node::TryRecover).
  uint64_t recovered_from_kept = 0;
  uint64_t ticks = 0;  // Group::Tick run (an idle event-driven group dozes: Group::Dozing)

  // Field by field: a daemon's counts over the groups it removed (Node::removed_group_totals).
  GroupCounters& operator+=(const GroupCounters& more) {
    heartbeats_sent += more.heartbeats_sent;
    envelopes_sent += more.envelopes_sent;
    suspicions += more.suspicions;
    suspicions_on_disconnect += more.suspicions_on_disconnect;
    suspect_timeouts_raised += more.suspect_timeouts_raised;
    exclusions += more.exclusions;
    view_changes += more.view_changes;
    order_messages_withheld += more.order_messages_withheld;
    refounded += more.refounded;
    restarts_named += more.restarts_named;
    all_restarted += more.all_restarted;
    recovered_from_kept += more.recovered_from_kept;
    ticks += more.ticks;
    return *this;
  }
};
// (A field added above must be added to operator+= too.)
static_assert(sizeof(GroupCounters) == 13 * sizeof(uint64_t), "GroupCounters::operator+=");

class Group {
 public:
  Group(const GroupConfig& group_config, const Config& config, std::vector<NodeId> members,
        Transport* transport, uint64_t incarnation, uint64_t now_ms,
        const std::set<NodeId>* links_closed = nullptr, GroupEventLog* event_log = nullptr);

  const std::string& name() const { return config().name; }
  // GroupConfig::incarnation at the start (a reload's config keeps it; wire.proto).
  uint64_t group_incarnation() const { return group_config_.incarnation; }
  const GroupConfig& config() const { return reloaded_ ? *reloaded_ : group_config_; }
  const std::vector<NodeId>& members() const { return members_; }
  uint64_t view_id() const { return view_id_; }
  bool is_member() const { return member_; }
  // The current view's total order exists (it is made on first use, see Order()).
  bool has_order() const { return order_ != nullptr; }
  bool IsMember(NodeId node) const;
  bool suspected(NodeId node) const;
  // Members that the failure detector does not suspect (self included when a member).
  uint32_t trusted_count() const;
  // Members not suspected or heard within `window_ms` (self included when a member): those a
  // new call may still count on (FailureDetector::heard_within_count).
  uint32_t heard_within_count(uint64_t now_ms, uint64_t window_ms) const;
  // The suspicions are current: the group is lively, or an event-driven group that is watching
  // its members now. An idle event-driven group's suspicions date from when it last watched.
  bool suspicions_current() const { return !event_driven() || detector_->monitoring(); }
  // 004 section 5 / primary partition: a majority of the view is trusted.
  bool HasMajority() const { return trusted_count() >= members_.size() / 2 + 1; }
  // The member a managed call's `index`-th choice of request manager names (members in view
  // order, round robin); none while this node knows no view of the group.
  std::optional<NodeId> ManagerAt(uint32_t index) const {
    if (members_.empty()) return std::nullopt;
    return members_[index % members_.size()];
  }

  // A-broadcast of a request from this member; deliveries (possibly of other messages too) are
  // appended. While the group's flow control holds (nso/group_flow.h), it waits here, after
  // those already waiting, and goes once no member's servants are behind (Tick).
  void Broadcast(std::string payload, consensus::Deliveries* deliveries);
  // A-broadcast of a membership message: never held, but the requests held here go first (the
  // order of this member's broadcasts is kept, e.g. those a leave must follow).
  void BroadcastControl(std::string payload, consensus::Deliveries* deliveries);
  // Flow control: this member's servants have `unread` bytes handed to them and not yet read
  // (Node::TickFlow). The other members are told when they fall behind and catch up.
  void ObserveServants(uint64_t unread);
  // New requests wait: a member's servants are behind (GroupFlow::Holding).
  bool flow_holding() const { return flow_ != nullptr && flow_->state.Holding(now_ms_); }
  // This member's servants are behind now, and how often they fell behind.
  bool servants_behind() const { return flow_ != nullptr && flow_->state.behind(); }
  uint64_t times_behind() const { return flow_ ? flow_->state.times_behind() : 0; }
  // Requests waiting here for the hold to end, and the members (other than this one) holding.
  size_t held_count() const { return flow_ ? flow_->held.size() : 0; }
  size_t held_bytes() const { return flow_ ? flow_->held_bytes : 0; }
  std::vector<NodeId> peers_behind() const {
    return flow_ ? flow_->state.PeersBehind(now_ms_) : std::vector<NodeId>();
  }
  // An envelope for this group from `from` (ordering traffic or heartbeat). Returns the view id
  // the sender is in, so the caller can notice that this node is behind.
  void Receive(NodeId from, const wire::Envelope& envelope,
               consensus::Deliveries* deliveries);
  // `app_pending`: the application has calls in flight in this group (event-driven groups only
  // watch their members while something is pending, 003 section 3).
  void Tick(uint64_t now_ms, bool app_pending, consensus::Deliveries* deliveries);
  // An idle event-driven group dozes: once its Tick found nothing pending, nothing to announce
  // and nothing received, sent or delivered for kDozeAfterMs, its owner ticks it only every
  // kDozeTickMs (a daemon may host thousands of idle groups, and a tick of each every 2 ms cost
  // a core's third with 3,000 of them). Anything it receives, sends or delivers wakes it
  // (Touch); a timer of its owner's for it (a join or leave retried, a state resent) is late by
  // at most kDozeTickMs. Takes the time: true while the owner may skip its Tick.
  bool Dozing(uint64_t now_ms) {
    now_ms_ = now_ms;
    return now_ms < doze_until_ms_;
  }
  static constexpr uint64_t kDozeAfterMs = 200;
  static constexpr uint64_t kDozeTickMs = 20;

  // The transport's connection to `peer` went down or came back (Transport::SetLinkWatcher;
  // the owner's `links_closed` set already says so). A member whose connection closed is
  // suspected at once (FailureDetector::LinkDown), here and in the views to come until it is
  // back.
  void LinkChanged(NodeId peer, bool up, consensus::Deliveries* deliveries);

  // Installs view `view_id` with `members`: a new total-order instance (when this node is a
  // member), the old one retired; this node's undelivered broadcasts are re-broadcast in it. A
  // view without this node keeps them for the next view with it (an excluded member that rejoins
  // sends them again: none is lost), unless DropUndelivered() says it will not come back.
  // `added`: the members the change adds, with their incarnations (0: unknown). `adopted`: the
  // view was told (NEW_VIEW, a state), not delivered, and `added` holds the processes it was told
  // with: this node's old view need not be its predecessor, so nothing else is known of them.
  void InstallView(uint64_t view_id, std::vector<NodeId> members,
                   consensus::Deliveries* deliveries,
                   const std::map<NodeId, uint64_t>& added = {}, bool adopted = false);

  // Forgets this node's broadcasts not delivered (it left: nothing will send them again) and says
  // how many there were.
  size_t DropUndelivered();
  const consensus::SpareBtreeMap<uint64_t, std::string>& undelivered() const {
    return undelivered_;
  }
  size_t undelivered_count() const { return undelivered_.size(); }

  // The node delivered `delivery` (of the current view): it need not be re-broadcast after a
  // view change. Deliveries discarded after a view change are not reported, so this node's own
  // messages among them are re-broadcast in the next view. Only a delivery of the payload this
  // process broadcast under that seq is its own (an earlier process of this node used the seq).
  void Delivered(const consensus::Delivery& delivery);
  // An empty string whose memory a delivered payload left, for the next broadcast's (issue 7).
  std::string SparePayload();
  // The node parsed this delivery: its payload's memory holds a later one's (issue 7).
  void GiveBack(consensus::Delivery* done) {
    if (order_ != nullptr) order_->GiveBack(done);
  }

  // A configuration reload: new failure-detector timeouts and silence period for this group.
  void SetTimeouts(int64_t suspect_timeout_ms, int64_t exclude_timeout_ms, int64_t silence_ms);

  // Sends an envelope to a node, filling in the header (version, group, sender, view).
  void SendTo(NodeId to, wire::Envelope envelope);

  // Members the detector's exclusion timeout fired for since the last call.
  std::vector<NodeId> TakeExclusions();
  // Members heard with a new incarnation (restarted, state lost) since the last call, with it.
  std::vector<std::pair<NodeId, uint64_t>> TakeRestarts();
  // An event-driven group that was idle became active (work arrived) since the last call.
  bool TakeWokeUp() {
    bool woke = woke_up_;
    woke_up_ = false;
    return woke;
  }
  // Members of the current view the order can no longer bring up to date (Outbox::beyond_log)
  // since the last call: they need the state, by a view change re-admitting them.
  std::vector<NodeId> TakeBeyondLog();
  // Any envelope of this group from process `incarnation` of node `from` names the view its
  // sender is in; `awaiting_state`: the sender holds no state of that view yet
  // (Envelope.awaiting_state).
  void NoteView(NodeId from, uint64_t view_id, uint64_t incarnation = 0,
                bool awaiting_state = false);
  // The highest view id heard from another node that held its state.
  uint64_t highest_view_heard() const { return highest_view_heard_; }
  // The highest view id heard from any node, one that awaits its state included.
  uint64_t highest_view_named() const {
    return std::max(highest_view_heard_, rare_ ? rare_->highest_view_named : 0);
  }
  // This node is behind: a process that holds the state of a later view named it, and no later
  // process of its node has been heard since (it may still give that state), or a member of this
  // view counts another process of this node.
  bool Behind() const { return LaterViewHeld(/*recently=*/false) || NotCounted(); }
  // This node awaits the state of its view (a joiner): its envelopes say so.
  void SetAwaitingState(bool awaiting) { awaiting_state_ = awaiting; }
  // This node holds no state of its current view: a joiner awaiting it, or a node outside the
  // view (it left, or was excluded while alive). What it sends naming the view says so
  // (Envelope.awaiting_state), so that the view's word alone does not end a member's (NoteView).
  bool holds_no_state() const { return awaiting_state_ || !member_; }
  // This process restarted a daemon whose previous process was `previous` (read from stable
  // storage, nso/incarnation_file.h), and this group is one of its configuration: its envelopes
  // of the configured view say so (Envelope.previous_incarnation) until a view is installed. A
  // member that never heard this node in that view then counts the earlier process, and takes
  // this one for a restart to re-add with the state, instead of for the member whose
  // acknowledgements it may have forgotten (RELIABILITY.md "A process never heard before it
  // restarted").
  void ClaimAsRestarted(uint64_t previous) { previous_claim_ = previous; }
  // A durable group (GroupConfig::durable) while this process claims its configured view as a
  // restart: it orders nothing there (its requests wait for the next view), and it gives no
  // state, until it is re-added with the state by a member that kept it in memory, or the group
  // is re-founded from the most advanced state the members' servants kept on disk
  // (nso/node_durable.cc).
  bool durable_claim() const { return previous_claim_ != 0 && config().durable; }
  // Every other member of the view was heard as a restarted process (NoteRestartedClaimant).
  bool AllOthersClaim() const {
    return members_.size() == 1 ||
           (rare_ && rare_->restarted_claimants.size() + 1 == members_.size());
  }
  // This node's view is over for it, and it makes no order in it any more (Group::Flush): within
  // the exclusion timeout, another node's process that holds the state of a later view named it
  // (and no later process of that node was heard since), or a member of this view said it counts
  // another process of this node (this one restarted: NoteNotCounted).
  bool ViewOver() const;
  // A member of the current view counts another process of this node in it.
  void NoteNotCounted() { rare().not_counted_ms = now_ms_; }
  bool NotCounted() const { return rare_ && WithinExclusionTimeout(rare_->not_counted_ms); }
  // Restarted processes refused since the last call, with the process this view counts instead.
  std::map<NodeId, uint64_t> TakeRefusedRestarts();
  bool HasRetiredView(uint64_t view_id) const {
    return rare_ != nullptr && rare_->retired.count(view_id) > 0;
  }
  // `node` sent something in the current view (so it installed it).
  bool HeardInView(NodeId node) const { return incarnations_.count(node) > 0; }
  // Which process (daemon incarnation) of `node` is the member of the current view, as far as
  // this node knows: heard in this view, or named when the view change added it, or heard in an
  // earlier view it stayed a member through, or told with the view (NEW_VIEW, a state); this
  // process for this node. 0: unknown.
  uint64_t MemberIncarnation(NodeId node) const;

  const GroupCounters& counters() const { return counters_; }
  void NoteRefounded() { counters_.refounded++; }  // Node::TryRefound
  void NoteRecoveredFromKept() { counters_.recovered_from_kept++; }  // Node::TryRecover
  // What this member's orders counted, over its views (the current order, those kept for
  // laggards, and those dropped); nullopt if it never was a member.
  std::optional<consensus::OrderCounters> order_counters() const;
  bool HasPending() const;
  // Last time this member's order delivered something (or the view was installed), and one line
  // on where the order stands: for the daemon's "ordering stalled" warning (node_watchdog.cc).
  uint64_t last_progress_ms() const { return last_progress_ms_; }
  std::string DescribeOrder() const;

 private:
  struct Retired {
    std::unique_ptr<consensus::TotalOrder> order;
    std::vector<NodeId> members;
    std::map<NodeId, uint64_t> incarnations;
    uint64_t drop_at_ms = 0;
  };

  // False for traffic of another incarnation than the one this view knows (a restart on either
  // side): such a node takes no part until a view change re-admits it with state transfer.
  bool SameIncarnations(NodeId from, const wire::Envelope& envelope,
                        std::map<NodeId, uint64_t>* incarnations);
  // `from` claims this view as a restart, as this process does (ClaimAsRestarted).
  void NoteRestartedClaimant(NodeId from);

  void Flush(uint64_t view_id, consensus::Outbox* outbox,
             consensus::Deliveries* deliveries);
  // Hands `payload` to the order now (into `outbox`), or, while this process claims a durable
  // group's configured view, keeps it for the next view.
  void BroadcastNow(std::string payload, consensus::Outbox* outbox);
  // Held requests go to the order: `all`, or, once nothing holds, a batch's worth per tick
  // (consensus.batch_max_messages / batch_max_bytes), so that a long hold does not end in one
  // burst that puts the slowest servant behind again at once.
  void ReleaseHeld(bool all, consensus::Deliveries* deliveries);
  void SendHeartbeats();
  // "I am alive" to `to`; `reply_wanted`: an idle event-driven member answers it.
  void SendHeartbeat(NodeId to, bool reply_wanted);
  bool event_driven() const { return config().liveness == GroupConfig::Liveness::kEvent; }
  // An idle event-driven member answers `to`'s request for a heartbeat (Heartbeat.reply_wanted),
  // or tells `to`, which still speaks to an earlier incarnation of this node, that it restarted.
  void AnswerHeartbeat(NodeId to);
  void Detect(uint64_t now_ms, consensus::Deliveries* deliveries);
  // `shared`, when given, is the envelope's batch, held apart for the step's sends
  // (consensus::SharedBatch).
  void SendInView(uint64_t view_id, NodeId to, wire::Envelope envelope,
                  consensus::SharedBatch shared = {}) {
    SendEnvelopeInView(view_id, to, &envelope, std::move(shared));
  }
  // The same, filling in `*envelope`'s header (every header field, so a reused envelope carries
  // nothing of its last send).
  void SendEnvelopeInView(uint64_t view_id, NodeId to, wire::Envelope* envelope,
                          consensus::SharedBatch shared);
  // An order's send: a body held alone (a consensus or sequencer message) goes in an envelope
  // reused for every such send of this thread, not one made per message (issue 7).
  void SendOrderMessage(uint64_t view_id, consensus::OutboxSend* send);
  // A membership event of this group, through the owner's GroupEventLog (gathered with the same
  // event of other groups), or logged at once without one.
  void LogEvent(spdlog::level::level_enum level, std::string event, std::string text);
  // Something happened to the group: it is ticked at every tick again, for kDozeAfterMs at
  // least (Dozing).
  void Touch() {
    last_activity_ms_ = now_ms_;
    doze_until_ms_ = 0;
  }
  static membership::FailureDetectorOptions DetectorOptions(uint64_t suspect_timeout_ms,
                                                           uint64_t exclude_timeout_ms);
  // At the end of a Tick that found the group idle: doze if it was so for kDozeAfterMs.
  void MaybeDoze();
  // The current view's total order (self a member), made on first use: an idle event-driven
  // group never touches it, and holds none (memory, issue 7). Nothing reaches an order before
  // it is made, so a late one is in the state an early one would be in.
  consensus::TotalOrder& Order();

  // The node's configuration of this group (it outlives the group: no copy per group), and the
  // copy made only if a reload changes its timeouts (SetTimeouts).
  const GroupConfig& group_config_;
  std::unique_ptr<GroupConfig> reloaded_;
  const Config& config_;
  const NodeId self_;
  // Event-driven: a node that starts announces its (new) incarnation to the members, until it
  // hears from one of them (at most kAnnouncements times), so a restarted member of an idle
  // group is noticed (and re-admitted with the state) or learns of the views it missed.
  static constexpr uint32_t kAnnouncements = 10;
  uint32_t announcements_left_ = 0;  // (beside self_: no padding; a daemon may host many groups)
  Transport* const transport_;
  // The owner's peers whose connection is closed (Node::links_closed_; none when null).
  const std::set<NodeId>* const links_closed_;
  GroupEventLog* const event_log_;  // the owner's; null: log at once
  std::vector<NodeId> members_;
  std::vector<NodeId> peers_;   // members but self
  uint64_t view_id_ = 1;
  uint64_t now_ms_;
  uint64_t doze_until_ms_ = 0;     // Dozing
  uint64_t last_activity_ms_ = 0;  // Touch
  bool member_ = false;                                   // self is in the current view
  bool awaiting_state_ = false;                           // SetAwaitingState
  bool woke_up_ = false;  // the group went from idle to active (TakeWokeUp)
  uint64_t previous_claim_ = 0;                            // ClaimAsRestarted
  std::unique_ptr<consensus::TotalOrder> order_;          // null: not a member, or not used yet
  std::unique_ptr<membership::FailureDetector> detector_;
  // Own broadcasts not yet delivered, by seq (a B-tree: no node per broadcast, issue 7).
  consensus::SpareBtreeMap<uint64_t, std::string> undelivered_;  // (root kept when empty)
  uint64_t last_progress_ms_ = 0;
  uint64_t next_announcement_ms_ = 0;  // announcements_left_
  std::map<NodeId, uint64_t> last_sent_ms_;  // time-silence: last message to each peer
  // What only view changes, restarts, exclusions and laggards need, made on first use (a
  // daemon may host many idle groups: memory, issue 7).
  struct Rare {
    std::map<uint64_t, Retired> retired;  // by view id
    // What the orders of earlier views no longer kept (retired, then dropped) counted: a
    // counter of the group does not fall back at a view change (order_counters).
    consensus::OrderCounters dropped_orders;
    std::vector<NodeId> beyond_log;
    std::vector<NodeId> exclusions;
    std::vector<std::pair<NodeId, uint64_t>> restarts;  // with the new incarnation
    std::set<NodeId> restarts_flagged;
    // MemberIncarnation of the current view's members not heard in it yet (known ones only).
    std::map<NodeId, uint64_t> member_incarnations;
    // Restarted processes whose traffic in this view was refused since the last call, with the
    // process this view counts instead: told so (Node::SendRestartNotices).
    std::map<NodeId, uint64_t> refused_restarts;
    uint64_t not_counted_ms = 0;  // when a member last said it counts another process of this node
    // Views later than this node's named by a process that held their state, by its node: the
    // latest such view of each, the process, when last named. Dropped once a later process of
    // that node is heard (the one that held the state is gone).
    struct LaterView {
      uint64_t view = 0;
      uint64_t incarnation = 0;
      uint64_t heard_ms = 0;
    };
    std::map<NodeId, LaterView> later_views;
    uint64_t highest_view_named = 0;  // by a node that awaited its state
    // While this process claims its configured view as a restart (ClaimAsRestarted): the other
    // members heard claiming it as restarts too.
    std::set<NodeId> restarted_claimants;
  };
  // A process that holds the state of a later view named it (`recently`: within the exclusion
  // timeout), and no later process of its node was heard since.
  bool LaterViewHeld(bool recently) const;
  Rare& rare();
  // Forgets a retired order, counting what it counted in Rare::dropped_orders; the next one.
  std::map<uint64_t, Retired>::iterator DropRetired(std::map<uint64_t, Retired>::iterator retired);
  // `since_ms` (0: never) is less than the exclusion timeout ago.
  bool WithinExclusionTimeout(uint64_t since_ms) const;
  std::unique_ptr<Rare> rare_;
  // Flow control (nso/group_flow.h), made when a member's servants first fall behind: the
  // requests of this member held meanwhile, in the order they were made.
  struct Flow {
    explicit Flow(uint64_t backlog_bytes) : state(backlog_bytes) {}
    GroupFlow state;
    std::deque<std::string> held;
    size_t held_bytes = 0;
  };
  Flow& flow();
  std::unique_ptr<Flow> flow_;
  const uint64_t incarnation_;
  std::map<NodeId, uint64_t> incarnations_;  // of the current view's members, as first heard
  uint64_t highest_view_heard_ = 0;
  GroupCounters counters_;
};

// The total-order protocol the YAML asks for (consensus or sequencer).
std::unique_ptr<consensus::TotalOrder> MakeTotalOrder(const GroupConfig& group_config,
                                                      const Config& config,
                                                      const std::vector<NodeId>& members);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_H_
