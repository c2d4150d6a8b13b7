// The runtime core of one daemon: its NSOs, the groups it hosts, pending invocations and servants.
//
// Everything here runs on ONE thread (the protocol thread in the daemon, the simulator's loop in
// cohort-sim): no locks, no clocks (time comes in through Tick), no sockets (a Transport sends).
// The gRPC API is a thin adapter over these methods (nso/api_service.h).
#ifndef COHORT_NSO_NODE_H_
#define COHORT_NSO_NODE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "consensus/spare.h"
#include "invocation/awaited_calls.h"
#include "invocation/causal_barrier.h"
#include "invocation/outside_fifo.h"
#include "invocation/reply_cache.h"
#include "invocation/reply_collector.h"
#include "membership/joining.h"
#include "membership/manager_watch.h"
#include "membership/state_transfer.h"
#include "membership/view.h"
#include "nso/config.h"
#include "nso/group.h"
#include "nso/stall_clock.h"
#include "nso/tick_counts.h"
#include "nso/transport.h"
#include "proto/api.pb.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

struct InvokeOptions {
  std::string group;
  std::string method;
  std::string payload;
  invocation::Mode mode = invocation::Mode::kAll;
  bool mode_given = false;       // false: the group's default mode
  uint64_t deadline_ms = 0;      // 0: the configured default
  // Open or closed group (003 section 4.1); unset: the group's default style.
  std::optional<GroupConfig::Style> style;
  // Group-to-group (003 section 4.3): the calling group and the call's number in it.
  std::string caller_group;
  uint64_t group_call_id = 0;
};

struct InvokeResult {
  absl::Status status;           // OK once the mode is met; otherwise why not, with `replies` so far
  std::vector<invocation::MemberReply> replies;
  uint64_t view_id = 0;
  uint32_t wanted = 0;
};

// A delivery handed to an attached servant, in the group's total order.
struct ServantDelivery {
  uint64_t delivery = 0;         // answer with this number
  std::string group;
  std::string method;            // empty: a multicast
  std::string payload;
  bool one_way = false;
  uint64_t view_id = 0;
  uint64_t group_seq = 0;        // position in the group's order, the same at every member
  // "$set_state" is streamed: `payload` starts at `state_offset` (0: a new state begins, forget
  // any partial one); `state_last` ends it.
  uint64_t state_offset = 0;
  bool state_last = false;
  // Not empty: the last one, no delivery; the registration ended, and why (RemoveGroup).
  std::string ended;
  // Durable groups (proto/api.proto ServantEvent.call, .kept_calls): a client's call's identity
  // (invocation/kept_calls.h); on the last "$set_state" chunk, the calls the state answered.
  std::string call;
  std::shared_ptr<const api::KeptCalls> kept_calls;
  // "$view" (kViewMethod): the view `view_id` installed, its members (proto/api.proto
  // ServantEvent.view); `group_seq` is the number of deliveries before it.
  std::shared_ptr<const api::ServantView> view;
};

struct GroupInfo {
  std::string name;
  uint64_t view_id = 0;
  struct MemberInfo {
    std::string name;
    NodeId node = 0;
    bool suspected = false;
    bool self = false;
  };
  std::vector<MemberInfo> members;
  const GroupConfig* config = nullptr;
};

// Reserved servant methods: the state of the replicated object, read at a view change by the
// member that transfers it, and installed at the joiner before any other delivery.
inline constexpr char kGetStateMethod[] = "$get_state";
inline constexpr char kSetStateMethod[] = "$set_state";
// To a servant whose kept state (Servant::KeepStateIn) the group re-founds from: take it back
// (nso/node_durable.cc). Its group_seq is that state's position.
inline constexpr char kRestoreKeptMethod[] = "$restore_kept";
// To a servant registered with view events: the group installed a view (ServantDelivery::view).
// In the delivery order, at the same position at every member (virtual synchrony, 003 section 3).
inline constexpr char kViewMethod[] = "$view";

// What a servant of a durable group found on disk when it registered (api.proto
// ServantMessage.Register.keeps_state, kept_position).
struct ServantKeptState {
  bool keeps = false;     // it keeps its state on disk
  uint64_t position = 0;  // the group_seq of its kept state; 0: none found
  uint64_t view = 0;      // the last view it knew of (0: not known)
};
// Requests a member without a servant keeps for it (beyond: it rejoins with state transfer).
inline constexpr size_t kNoServantBufferMax = 100000;

// What the requests from outside a group went through at this node (Prometheus counters).
struct OutsideCounters {
  uint64_t resent = 0;             // one-way calls / multicasts sent again (SendOutside)
  uint64_t given_up = 0;           // ... not known ordered by their deadline
  uint64_t standby_takeovers = 0;  // closed calls ordered here because their orderer failed
  uint64_t managers_silent = 0;    // request managers found silent (membership/manager_watch.h)
  // Requests from outside ordered here after waiting for their client's previous request
  // (invocation/outside_fifo.h): once it was here; or after the longest wait, without it.
  uint64_t fifo_held = 0;
  uint64_t fifo_gave_up = 0;
  uint64_t fifo_asked = 0;  // asks for a predecessor never seen here (AskForPredecessor)
  // Requests delivered after a later request of their client and refused, not executed (at
  // every member alike: node_delivery.cc, ReplyCache::Verdict::kOutOfOrder).
  uint64_t fifo_refused = 0;
};

// How far a servant is behind its deliveries (flow control, nso/group_flow.h): the bytes handed to
// it and not yet read, and the bytes it has read so far (only grows: it shows the servant reads).
struct ServantBacklog {
  uint64_t unread_bytes = 0;
  uint64_t read_bytes = 0;
};

class Node {
 public:
  using InvokeDone = std::function<void(InvokeResult)>;
  using ServantSink = std::function<void(ServantDelivery)>;
  using BacklogProbe = std::function<ServantBacklog()>;
  // Ends the stream of a servant the node ended by itself (cut off, or replaced by a newer one;
  // already unregistered) with `why`.
  using EndHook = std::function<void(absl::Status why)>;

  // `incarnation` must differ at every start of this node (the daemon uses the wall clock).
  Node(const Config& config, Transport* transport, uint64_t incarnation, uint64_t now_ms);
  // The same, sharing the caller's configuration instead of copying it (a daemon's).
  Node(std::shared_ptr<const Config> config, Transport* transport, uint64_t incarnation,
       uint64_t now_ms);
  ~Node();
  // This start restarted the node, whose previous process was `previous` (its incarnation file:
  // nso/incarnation_file.h). The groups of its configuration say so in their configured views
  // (Group::ClaimAsRestarted); groups added later (a reload, CreateGroup) are new to it. Before
  // any traffic.
  void RestartedFrom(uint64_t previous);

  // Transport input and the passage of time.
  // `envelope` is the caller's to drop after: a reply's payload is moved out of it.
  void Receive(NodeId from, wire::Envelope& envelope);
  // The transport's connection to `peer` closed or is back (Transport::SetLinkWatcher): with
  // failure_detector.suspect_on_disconnect, every group suspects the peer at once.
  void LinkChanged(NodeId peer, bool up);
  void Tick(uint64_t now_ms);

  // 003 section 3: every client of the service gets its own NSO.
  // `expires_when_idle`: an API client's NSO, detached after limits.nso_idle_ms unused (the
  // runtime's own and an embedded node's clients are not). `owner`: a fingerprint of the
  // authenticated caller (OwnerFingerprint; 0 without authentication), checked by Detach.
  absl::StatusOr<uint64_t> Attach(const std::string& client_name, bool expires_when_idle = false,
                                  uint64_t owner = 0);
  // The client is done with its NSO: it goes with its servants; requests it sent and that are
  // not yet ordered still are (their resends do not need the NSO). PERMISSION_DENIED when
  // `requester` is not the NSO's owner, NOT_FOUND for an unknown NSO.
  absl::Status Detach(uint64_t nso, uint64_t requester = 0);
  // What Attach and Detach compare: a hash of the authenticated caller's name (0 for none).
  // A NSO lives no longer than its node, so a hash of this process is enough, and it keeps the
  // per-NSO memory (issue 7's 2 KiB limit) small.
  static uint64_t OwnerFingerprint(const std::string& caller);

  absl::StatusOr<GroupInfo> GroupDetails(const std::string& group) const;
  // Watching a group from this daemon (api WatchGroup, node_views.cc): `on_change` gets its
  // details now, then after each change of its view or of the members suspected here (looked
  // at every Tick), and last an error if the group goes (DeleteGroup), which ends the watch.
  using GroupWatcher = std::function<void(absl::StatusOr<GroupInfo>)>;
  absl::StatusOr<uint64_t> WatchGroup(const std::string& group, GroupWatcher on_change);
  void Unwatch(uint64_t watch) { watches_.erase(watch); }
  // A configuration reload: the groups' failure-detector timeouts and silence periods.
  void ApplyTimeouts(const Config& fresh);
  // A reload's limits, from the next request on (the daemon keeps those that wait for a
  // restart at their running values: daemon_reload.cc).
  void ApplyLimits(const LimitsConfig& fresh);
  // The largest answer a servant may give (limits.max_payload_bytes; Answer sends a larger one as
  // an error), said to each servant as it registers.
  uint64_t max_reply_bytes() const { return static_cast<uint64_t>(limits_.max_payload_bytes); }
  // A configuration reload: starts the groups of `fresh` named in `names` that this node does not
  // have yet (a copy of each one's GroupConfig is kept here: a Group refers to it), each at view 1 with its
  // configured members, as at a start. A group whose members are not all peers of the running
  // configuration is not started (logged). Returns the names started.
  // `why` ends the log line of each (" (added by a configuration reload)"). `existed`: the
  // groups existed before this process started (a directory's state it was given), so that a
  // restart claims their configured views as one (RestartedFrom).
  std::vector<std::string> AddGroups(const Config& fresh, const std::vector<std::string>& names,
                                     const char* why,
                                     bool existed = false);
  // The group configurations kept for groups AddGroups started and that still run (one each).
  size_t added_group_configs() const { return added_configs_.size(); }
  // A group made by CreateGroup was deleted (DeleteGroup, ordered in the daemons' own group):
  // the group of that name and incarnation stops here. Its calls end with NOT_FOUND, its
  // servants get a last delivery saying so (`ended`), and everything the node kept for it goes;
  // traffic for it is dropped from now on as for an unknown group. False: no such group here.
  // `why` follows the group's name in the calls' errors and the servants' last delivery.
  bool RemoveGroup(const std::string& name, uint64_t incarnation,
                   const std::string& why = "was deleted (DeleteGroup)");
  // A configuration reload changed the peers (every daemon, self included): names of new peers
  // resolve from now on (a group added later may have them as members), join requests go to
  // them, and removed ones are forgotten. Groups' views are not changed here.
  void SetPeers(std::vector<PeerConfig> peers) { peers_ = std::move(peers); }
  // Proposes a view of `group` whose members are exactly `members` (those added get the state
  // from this node): a reload that added or removed peers, for the daemons' own group. OK and
  // nothing sent when the view has them already; UNAVAILABLE when this node is no member or
  // has no majority; FAILED_PRECONDITION when it cannot give the state to those added.
  absl::Status ProposeMembers(const std::string& group, const std::vector<NodeId>& members);
  // The groups running here (the daemons' own excepted) whose configured members or current
  // view name the peer `name`: a reload may not remove that peer.
  std::vector<std::string> GroupsNaming(const std::string& name) const;
  // This daemon asks to join `group` / leaves it (a view change ordered among the members).
  absl::Status JoinGroup(const std::string& group);
  absl::Status LeaveGroup(const std::string& group);
  absl::Status Multicast(uint64_t nso, const std::string& group, std::string payload);
  // `done` is called exactly once, possibly before Invoke returns.
  void Invoke(uint64_t nso, InvokeOptions options, InvokeDone done);
  // A call's result's reply vector, its contents moved out, given back for the next calls (the
  // local fast path does, once it has written the result: issue 7). Only small ones are kept.
  void RecycleReplies(std::vector<invocation::MemberReply> replies);

  // Servant side: the NSO joins `group` as a server; deliveries come to `sink` in total order.
  // A servant of `group` already attached here is replaced (ReplaceServants).
  // `kept`: the state the servant kept on disk (a durable group: nso/node_durable.cc).
  // `view_events`: the servant gets the group's views too ("$view", node_views.cc).
  absl::StatusOr<uint64_t> RegisterServant(uint64_t nso, const std::string& group, ServantSink sink,
                                           ServantKeptState kept = {}, bool view_events = false);
  void UnregisterServant(uint64_t servant);
  // The servant's hooks, both called on the protocol thread. `probe`: where its deliveries wait
  // to be read (its connection), asked at every Tick; a servant without one (empty) never holds
  // its group (flow control) and is never cut off. `on_end`: ends its stream when the node ends
  // the registration by itself (EndServant: with limits.servant_cutoff_bytes unread, during Tick,
  // or a newer servant of the group replacing it, ReplaceServants); it must not call the node
  // back.
  void SetServantHooks(uint64_t servant, BacklogProbe probe, EndHook on_end);
  // `more`: an answer to "$get_state" continues in further answers (the state is streamed).
  void Answer(uint64_t servant, uint64_t delivery, absl::Status status, std::string payload,
              bool more = false) {
    AnswerSwapping(servant, delivery, status, &payload, more);
  }
  // The same, taking `*payload` by swapping: it is left holding memory of the same use, which a
  // caller that reads answers into one reused buffer gets back for the next (issue 7).
  void AnswerSwapping(uint64_t servant, uint64_t delivery, absl::Status status,
                      std::string* payload, bool more = false);

  NodeId self() const { return self_; }
  const std::string& name() const { return config_.node; }
  size_t pending_calls() const { return calls_.size(); }
  // Requests of this daemon's clients not yet ordered, and their bytes: what
  // limits.max_unordered_requests / max_unordered_bytes bound per client (the backlog).
  size_t unordered_requests() const { return causal_barrier_.total_in_flight(); }
  size_t unordered_bytes() const { return causal_barrier_.total_in_flight_bytes(); }
  bool attached(uint64_t nso) const { return nsos_.count(nso) > 0; }
  size_t attached_nsos() const { return nsos_.size(); }
  uint64_t nsos_detached_idle() const { return nsos_detached_idle_; }
  // Servants cut off for not reading (limits.servant_cutoff_bytes).
  uint64_t servants_cut_off() const { return servants_cut_off_; }
  uint64_t nsos_detached() const { return nsos_detached_; }  // by Detach
  // Departed clients whose replies every member was told to forget (RetireClient), and those
  // that left with requests not yet ordered, whose replies stay.
  uint64_t clients_retired() const { return clients_retired_; }
  uint64_t clients_not_retired() const { return clients_not_retired_; }
  // What the groups this node removed (RemoveGroup: DeleteGroup, a reload) had counted: a
  // daemon's counters summed over its groups (metrics.per_group: false) keep it, and do not
  // fall when a group goes (Prometheus would take the fall for a reset, and the sum since for
  // new counts).
  struct RemovedGroupTotals {
    GroupCounters counters;
    consensus::OrderCounters order;
    uint64_t times_behind = 0;
  };
  const RemovedGroupTotals& removed_group_totals() const { return removed_group_totals_; }
  // The clients with replies kept in `group`'s reply cache here, and the ranges of retired ones.
  size_t reply_cache_clients(const std::string& group) const;
  // The calls `group`'s reply cache keeps here, and the bytes of their replies (metrics).
  std::pair<size_t, size_t> reply_cache_size(const std::string& group) const;
  size_t retired_client_ranges(const std::string& group) const;
  // Deliveries handed to a servant and not answered yet (one-way ones are never answered: they
  // are done once handed over).
  size_t open_deliveries() const { return open_deliveries_.size(); }
  // Requests from outside held here for their client's previous one (outside_fifo.h).
  size_t outside_fifo_held() const {
    size_t count = 0;
    for (const auto& [group, fifo] : outside_fifo_) count += fifo.held();
    return count;
  }
  // One-way calls and multicasts sent from outside their group, not yet known ordered.
  size_t outside_unordered() const {
    size_t count = 0;
    for (const auto& [group, route] : outside_routes_) count += route.pending.size();
    return count;
  }
  const OutsideCounters& outside_counters() const { return outside_counters_; }
  std::vector<const Group*> groups() const;
  // Calls `each` with every group hosted here, in name order (no vector made, unlike groups()).
  void ForEachGroup(absl::FunctionRef<void(const Group&)> each) const {
    for (const auto& [name, group] : groups_) each(*group);
  }

 private:
  // A group at view 1 with its configured members (false, logged: a member is not a peer).
  bool StartGroup(const GroupConfig& group_config, const char* why);
  using CallKey = std::pair<NodeId, uint64_t>;  // (origin daemon, call id)

  // A call whose replies are collected here: our own client's call (`done` answers it), or, at a
  // request manager, a call managed for another daemon (`done` sends the ManagedReply back).
  struct Call {
    std::string group;
    invocation::ReplyCollector collector;
    uint64_t deadline_at_ms = 0;
    uint64_t deadline_ms = 0;
    InvokeDone done;
    // Open group, caller side: the request is re-sent to the next member (same call id) if the
    // request manager has not answered by then (003 section 4.1).
    std::optional<wire::Request> managed_request;
    // Closed group from outside, caller side: sent to every member, ordered by the one named in
    // `orderer` (wire.proto); re-sent naming the next member if that one's stream goes down.
    std::optional<wire::Request> closed_request;
    uint32_t manager_index = 0;
    uint32_t managed_sends = 0;  // times sent through a manager (SendManaged backs off)
    uint64_t sent_at_ms = 0;
    uint64_t retry_at_ms = 0;
    uint64_t nso = 0;  // the client that made it (NsoEntry::awaited)
    // Request manager side (003 section 4.1): the call was made at `origin` (its process
    // `origin_incarnation`), which gets the replies as a ManagedReply (SendManagedReply) instead
    // of `done` being called: a callback capturing this took an allocation per call (issue 7).
    struct ManagedFor {
      NodeId origin = 0;
      uint64_t origin_incarnation = 0;
    };
    std::optional<ManagedFor> managed_for;
  };
  // One-way calls and multicasts from outside the group: no reply tells the caller's node they
  // were ordered, the member's ordered notice does. Until it comes they are kept, and sent again
  // (same call ids, in order) through the next member when the request manager is gone or
  // down, as a managed call is (003 section 4.1); the reply cache drops a second delivery.
  struct OutsideRequest {
    wire::Request request;
    uint64_t sent_at_ms = 0;      // last sent (resends move it)
    uint64_t give_up_at_ms = 0;
    uint64_t first_sent_ms = 0;
  };
  struct OutsideRoute {  // per group
    std::map<uint64_t, OutsideRequest> pending;  // by call id: the order they were sent in
    uint64_t pending_bytes = 0;                  // their payloads' (WatchManagers)
    NodeId manager = 0;                          // the member they were last sent to
    uint64_t unreachable_since_ms = 0;  // the transport to `manager` has been down since
    // When one of `pending` was last reported ordered, or `pending` last became non-empty: the
    // group made progress on this route's backlog since (CheckOutsideRoute).
    uint64_t progress_ms = 0;
  };
  // A closed call from outside that another member orders (wire.proto, Request.orderer): kept
  // until delivered, ordered here if that member is suspected or leaves the view.
  using StandbyKey = std::tuple<NodeId, uint64_t, uint64_t>;  // (origin, incarnation, call id)
  struct StandbyCopy {
    wire::Request request;
    uint64_t arrived_at_ms = 0;
  };
  struct Servant {
    uint64_t nso = 0;
    std::string group;
    ServantSink sink;
    bool view_events = false;  // it gets "$view" deliveries
    // Flow control (TickFlow): its backlog, what it had read at the last Tick, since when it has
    // read nothing with deliveries unread (0: it reads), and whether it was said to be stuck.
    BacklogProbe backlog;
    EndHook on_end;  // SetServantHooks
    uint64_t read_bytes = 0;
    uint64_t idle_since_ms = 0;
    bool stuck = false;
  };
  // A view as the servants get it ("$view"), waiting in order among requests (node_views.cc).
  struct ViewMark {
    uint64_t view_id = 0;
    std::shared_ptr<const api::ServantView> view;
  };
  using PendingViews = std::vector<std::pair<size_t, ViewMark>>;  // each before requests[first]
  // Per group: joining, and state transfer (membership/joining.h, membership/state_transfer.h).
  struct GroupMembership {
    membership::Joiner joiner;          // this node wanting in, or catching up
    membership::Admission admission;    // answering others' join requests
    membership::StateReceiver receiver; // the state of the view this node joined
    // "asking to join" is said at the first ask and then once in 10 s (every 200 ms for as long
    // as no member re-adds it: 2,000 groups wrote 10,000 lines a second).
    LogEvery join_asks;
    std::vector<wire::Request> buffered;  // ordered requests held until the state is installed
    PendingViews buffered_views;          // the views installed among them
    // The servant's state that arrived before any servant attached, in order.
    std::vector<membership::StateReceiver::ServantChunk> pending_servant_state;
    std::vector<wire::Request> no_servant;  // ordered before any servant attached (bounded)
    PendingViews no_servant_views;          // the views installed among them
    bool no_servant_overflow = false;
    // The view the servants' place in the order belongs to (the one before `no_servant`): a
    // servant registering gets it first. Unset: the group's current view.
    std::optional<ViewMark> servant_view;
    // The last servant detached while this daemon was a member: the replica (the servant's
    // object) is gone, so the member must not count as one. It leaves the group (a view change
    // without it, proposed again until it is out), drops the group's deliveries meanwhile instead
    // of keeping them for a later servant (which would apply them to an empty object), and
    // provides no state to joiners. Once out, a servant attaching (again) rejoins with state
    // transfer. Cleared when this daemon is no longer a member, or when a view change re-admits
    // it (awaiting the state) and no part of that state went to the servant that was lost.
    bool servant_lost = false;
    // State transfer to the servant (GiveStateToServant): some of a state's chunks went to a
    // servant, not yet the last; and, that servant lost, the rest of that state is of no use (its
    // start is gone with it: dropped, and the daemon leaves and rejoins for a whole state).
    bool state_partly_given = false;
    bool state_broken = false;
    // Told to leave (LeaveGroup) or leaving after losing its servant: out once the view without
    // this node is installed (node_leaving.cc).
    bool leaving() const { return servant_lost || joiner.left(); }
    // Joiners this node was to give the state of view `declined_view` to, and could not (its
    // servant went between proposing their join and its delivery): TickMembership takes them
    // out again, so that they ask anew and a member with the state re-adds them, instead of
    // waiting out their state patience (up to the exclusion timeout) in a view that counts them.
    std::vector<NodeId> declined;
    uint64_t declined_view = 0;
    uint64_t leave_proposed_ms = 0;
    uint64_t leave_proposed_view = 0;  // the view the last leave proposal was made in
    // Calls and multicasts of this node's clients made while it leaves the group (MustHold()):
    // held until it is out, then made again from outside (node_leaving.cc). Sent as a member's
    // they could be ordered after the view change that removes it and be dropped.
    struct Held {
      uint64_t expires_ms;
      std::function<void(absl::Status)> resume;  // OK: make it again; else: it ends so
    };
    std::vector<Held> held_while_leaving;
    // This node's own requests made as a member and held behind their client's earlier request
    // (OutsideFifo), released while it leaves: broadcast, they would be ordered after the view
    // change that removes it and be dropped (LeftView). Sent once it is out, from outside, with
    // those still held (TickOutsideFifo); or as a member's if it stays after all.
    std::vector<wire::Request> own_released_while_leaving;
    uint64_t stall_warned_ms = 0;  // node_watchdog.cc
    StallClock stall_clock;        // node_watchdog.cc
    // Members of view `restarted_view` that asked to join as another process than the one the
    // view counts (so that one is gone), with the new process: when they are all the other
    // members, this one re-founds the group with them (Node::RefoundIfLast).
    std::map<NodeId, uint64_t> restarted;
    uint64_t restarted_view = 0;
    // In view `restarted_view`: the requests each other survivor said it delivered (SURVIVOR),
    // and the survivor the one with the lowest id chose to re-found the group (0: none yet).
    std::map<NodeId, uint64_t> survivor_offers;
    NodeId refounder = 0;
    void ForRestartedView(uint64_t view_id) {  // forgets the above when the view changed
      if (restarted_view == view_id) return;
      restarted.clear();
      survivor_offers.clear();
      refounder = 0;
      restarted_view = view_id;
    }
    // The process (incarnation) of joiner.provider() when this node joined: a view that counts
    // another one of it, or none, means the state it owed will not come (TickMembership).
    uint64_t provider_process = 0;
    // A durable group while this process claims its configured view (nso/node_durable.cc).
    struct KeptStates {
      uint64_t servant = 0;       // the servant registered here, and what it kept
      ServantKeptState kept;
      // What each other member said its servant kept (KEPT_STATE).
      struct Offer {
        uint64_t process = 0;
        uint64_t position = 0;
        uint64_t view = 0;  // the last view that state knew of
      };
      std::map<NodeId, Offer> offers;
      uint64_t sent_ms = 0;       // this node's last KEPT_STATE
      // Re-founding from this member's kept state: its servant takes it back first.
      struct TakeBack {
        uint64_t delivery = 0;  // "$restore_kept" sent with this number (0: not yet)
        // Answered with an error: the group waits for another servant (never resumed from an
        // object that could not take its state back).
        bool failed = false;
        // Answered with the calls kept with the state, loaded as a reply cache: the group's
        // once this member re-founds it.
        std::optional<invocation::ReplyCache> cache;
      };
      TakeBack take_back;
    };
    std::unique_ptr<KeptStates> kept_states;
  };
  // A state snapshot requested from the servant at a view change (provider side); the transfer
  // starts with the servant's first chunk, streamed to the joiners as the servant reads it.
  struct StateRequest {
    std::string group;
    membership::View view;
    std::vector<NodeId> joiners;
    invocation::ReplyCache cache;  // the reply cache as of the view change
    uint64_t delivered_seq = 0;
    bool started = false;          // the first chunk came: the sender exists
  };
  using TransferKey = std::pair<std::string, uint64_t>;  // (group, view id)

  // Who gets a reply, addressed with the caller's call id (several: duplicate deliveries, or
  // every member of a calling group).
  struct ReplyTarget {
    NodeId to = 0;
    NodeId origin = 0;
    uint64_t origin_incarnation = 0;
    uint64_t call_id = 0;
  };
  // A call as the reply cache knows it.
  using CacheId = std::pair<invocation::ReplyCache::ClientKey, uint64_t>;
  struct OpenDelivery {  // a delivery awaiting its servant's answer
    CacheId cache_id;
    absl::InlinedVector<ReplyTarget, 1> targets;  // usually one: no allocation
    std::string group;
    uint64_t servant = 0;
  };

  absl::Status CheckNso(uint64_t nso) const;
  struct NsoEntry;
  // CheckNso's entry of `nso` (marked used), or its error: the one lookup of a call's client.
  absl::StatusOr<NsoEntry*> UseNso(uint64_t nso);
  // Whether a new request of client `nso` to `group` in `mode` is accepted now: its payload
  // within the limit, then CheckInFlight, CheckReachable and (one-way) CheckOutsideRoute.
  absl::Status Admit(uint64_t nso, const Group& group, invocation::Mode mode,
                     size_t payload_bytes) const;
  // limits.max_unordered_requests / max_unordered_bytes: RESOURCE_EXHAUSTED once `nso` has
  // that many requests, or bytes with `bytes` more, not yet known ordered (backpressure).
  absl::Status CheckInFlight(uint64_t nso, const std::string& group, size_t bytes) const;
  // Likewise for the requests of this daemon that `group`'s flow control holds, all clients'.
  absl::Status CheckHeld(const Group& group, size_t bytes) const;
  // The bound both apply: which limit `count` requests of `bytes`, and one more of `more`, reach.
  enum class BacklogLimit { kNone, kCount, kBytes };
  BacklogLimit BacklogFull(size_t count, size_t bytes, size_t more) const;
  // UNAVAILABLE when fewer members than `mode` and ordering need have been heard lately.
  absl::Status CheckReachable(const Group& group, invocation::Mode mode) const;
  // UNAVAILABLE when this node's oldest one-way request to `group` (outside it) not yet known
  // ordered has waited over half its deadline.
  absl::Status CheckOutsideRoute(const Group& group) const;
  absl::StatusOr<Group*> FindGroup(const std::string& group);
  // Submits a request to the group's total order, here or through a member (request manager).
  void Submit(Group* group, const wire::Request& request);
  // What the causal barrier knows of a request: taken before the request moves into `submit`.
  struct CausalTicket {
    uint64_t client_nso = 0;
    uint64_t call_id = 0;
    size_t bytes = 0;
  };
  static CausalTicket TicketOf(const wire::Request& request) {
    return {request.client_nso(), request.call_id(), request.payload().size()};
  }
  // Through the causal barrier of the request's NSO (003 figure 7).
  // `submit` gets the group, unless it was deleted meanwhile. It is made into a std::function
  // (a heap allocation) only when it is held (issue 7's hot path).
  template <typename SubmitFn>
  void SubmitInCausalOrder(const CausalTicket& ticket, Group* group, SubmitFn submit);
  // The same for a request submitted at once by `submit_now`, which may refer to what the caller
  // holds; `make_held()` makes, only when it is held, a submission that owns a copy of it.
  template <typename SubmitFn, typename MakeHeldFn>
  void SubmitInCausalOrder(const CausalTicket& ticket, Group* group, SubmitFn& submit_now,
                           MakeHeldFn make_held);
  // Submits `request` as a member (SubmitAsMember) through the causal barrier; `request` is
  // copied only if held. With `key`, only while call `key` is still awaited.
  void SubmitRequestInCausalOrder(Group* group, const wire::Request& request,
                                  std::optional<CallKey> key);
  void MarkOrdered(uint64_t call_id);
  // Sends `request` to each of `to` for ordering (a forward: to a request manager, or to every
  // member of a closed group from outside), with the latest view known here if `with_view`. One
  // envelope is kept for it from send to send, its forward's strings keeping their memory (issue
  // 7); a send to this node itself, or nested in another, gets its own.
  void SendForwardTo(absl::Span<const NodeId> to, const std::string& group,
                     const wire::Request& request, bool with_view);
  // A call from outside keeps its request (to send again) in `*into`: `*request`'s contents
  // move there, and the kept `*request` takes the memory a finished one gave back (TakeCall).
  void KeepOutsideRequest(wire::Request* request, bool kept, std::optional<wire::Request>* into);
  void SendEnvelope(NodeId to, const std::string& group, wire::Envelope envelope) {
    SendEnvelopeInPlace(to, group, &envelope);
  }
  // The same, filling in the header of `*envelope`, which the caller may reuse after (the
  // transport keeps no reference to it).
  void SendEnvelopeInPlace(NodeId to, const std::string& group, wire::Envelope* envelope);
  // A request handed to member `to` to order (Envelope.forward).
  void SendForward(NodeId to, const std::string& group, const wire::Request& request);
  // A one-way call or multicast from outside `group`: to its request manager, kept until ordered.
  void SendOutside(Group* group, const wire::Request& request);
  void Reroute(Group* group, OutsideRoute* route, NodeId manager);  // sends all pending again
  void RetryOutsideRequests();
  // Probes the members this node sends requests through from outside their group, and finds the
  // silent ones (silent_managers_, for this tick's retries).
  void WatchManagers();
  // Detaches API clients' NSOs unused for limits.nso_idle_ms (no servant, nothing unordered).
  void ExpireIdleNsos();
  // A Heartbeat with outside_probe: the probe (reply_wanted), its answer, or "not a member".
  void SendOutsideProbe(NodeId to, const std::string& group, bool reply_wanted, bool not_member);
  // `manager` was found silent this tick, or answered "not a member" of `group`, or its
  // connection closed (suspect_on_disconnect: its process died).
  bool ManagerLost(const std::string& group, NodeId manager) const;
  // At the request manager; `*request` is changed (it is ordered in the server group).
  void StartManagedCall(Group* group, wire::Request* request);
  // The replies of a call managed here for another node, to that node (Call::managed_for).
  void SendManagedReply(const std::string& group, Call::ManagedFor to, uint64_t call_id,
                        InvokeResult result);
  void SendManaged(Group* group, Call* call);                  // at the caller's daemon
  void SendClosedOut(Group* group, Call* call);                // at the caller's daemon
  // A member's copy of a closed call from outside that another member orders: true when it is
  // kept (or known delivered) rather than ordered here.
  // (When kept, the copy takes `*request`'s contents: it is left empty.)
  bool StandBy(Group* group, wire::Request* request);
  void TickStandby(Group* group);
  // Flow control (nso/group_flow.h): the largest backlog of the servants of each group that
  // still read (a servant idle for limits.servant_stall_ms with deliveries unread is left out).
  // Cuts off the servants with limits.servant_cutoff_bytes unread. Fills tick_unread_.
  void TickFlow();
  void CutOffServant(uint64_t servant, uint64_t unread_bytes);
  // Unregisters the servants of `group` attached here: a new one registers (one per daemon).
  void ReplaceServants(const std::string& group);
  // Unregisters a servant and ends its stream with `why` (its end hook, if any).
  void EndServant(uint64_t servant, absl::Status why);
  // A request from outside that this member orders (forwarded, managed, or a closed call's copy
  // taken over): proposed after its client's previous one (invocation/outside_fifo.h).
  void OrderFromOutside(Group* group, wire::Request request);
  // A member holding a request from outside whose predecessor it never saw asks the origin for
  // it (Reply.predecessor_missing); the origin sends it again at once.
  void AskForPredecessor(const Group* group, const invocation::OutsideFifo::ClientKey& client,
                         uint64_t call_id);
  void OnPredecessorMissing(NodeId from, const std::string& group, const wire::Reply& ask);
  // The origin's answer: the call asked for failed there (Reply.predecessor_gone); what waits
  // here for it goes on. Taken only from the origin itself.
  void OnPredecessorGone(NodeId from, const std::string& group, const wire::Reply& answer);
  void SendMissingAgain(NodeId asker, const std::string& group, uint64_t last);
  void ProposeFromOutside(Group* group, absl::Span<wire::Request> requests);
  // The request of client `nso` to `group` from outside made before `call_id`, if this node
  // still waits to know it ordered (0: none); records `call_id` as the client's last one.
  uint64_t PreviousOutsideRequest(uint64_t nso, Group* group, uint64_t call_id);
  // The last request of client `nso` this node keeps for `group` to broadcast again once it
  // rejoins (kept_by_client_), if any and recent (0: none).
  uint64_t KeptPredecessor(uint64_t nso, const std::string& group);
  // For a request of client `nso` made here as a member of `group`: its last request made while
  // this node was outside the group, if still awaited (0: none). A member's own requests go
  // straight to the order and would overtake it (found by cohort-sim --stack, session 28).
  uint64_t PendingOutsidePredecessor(uint64_t nso, const std::string& group) const;
  // The NSO is gone: what FIFO per client kept for it (last_outside_request_, member_held_).
  void ForgetOutsideOrder(uint64_t nso);
  // The client sent a request to `group` (remembered for RetireClient).
  static void NoteGroupCalled(NsoEntry* client, const std::string& group);
  // A new request of client `nso` (its entry, if it still has one) to `group` from this node: its
  // call id, origin, client, its place in the client's FIFO order (notify_ordered and
  // after_call_id from outside) and what its client no longer awaits (replies_taken_below).
  // `group_call`: a group's call (003 section 4.3), numbered and cached under its caller group,
  // takes neither of the last two.
  wire::Request ClientRequest(uint64_t nso, const NsoEntry* entry, Group* group,
                              bool group_call = false);
  // The same into `*request`, cleared first (its strings keep their memory).
  void FillClientRequest(wire::Request* request, uint64_t nso, const NsoEntry* entry,
                         Group* group, bool group_call = false);
  // The client `nso` is gone (Detach, or unused for nso_idle_ms). Every member of each group it
  // sent requests to keeps its latest replies, to answer a copy of a call delivered twice: if
  // every request it made is known ordered, a last request of its own, ordered after them
  // (FIFO per client), tells every member to forget them (Request.retire_client). Else they
  // stay (clients_not_retired). Before ForgetOutsideOrder: it names the client's predecessors.
  void RetireClient(uint64_t nso, const std::vector<std::string>& groups);
  // `call_id` of client `nso` to `group`, sent from here while outside it, is still awaited.
  bool StillAwaited(uint64_t nso, const std::string& group, uint64_t call_id) const;
  // A member's own request: submitted to the order, or first held (OrderFromOutside) behind its
  // client's request from outside that it names (after_call_id), or behind the client's last
  // request held so (member_held_), which it would overtake.
  void SubmitAsMember(Group* group, const wire::Request& request);
  // The group's reply cache knows the call (delivered here, or brought by a state transfer).
  bool DeliveredHere(const Group& group, const invocation::ReplyCache::ClientKey& client,
                     uint64_t call_id) const;
  // A request held here waits for `request` (a closed call's copy is then ordered here, not
  // kept standing by).
  bool AwaitedHere(const Group* group, const wire::Request& request) const;
  // A delivered request from outside (or this node's own, which its own may wait for): what
  // waited for it is proposed at the next tick.
  void NoteOutsideDelivered(Group* group, const wire::Request& request);
  void TickOutsideFifo(Group* group);
  // Once this node is out of the group (or stays after all): its requests released while it left
  // (own_released_while_leaving), taken to go from outside; as a member's they are submitted here.
  std::vector<wire::Request> TakeOwnReleased(Group* group);
  // Hands ordered messages to servants; a view change ends the batch (see Group).
  void DeliverAll(Group* group, consensus::Deliveries deliveries);
  // An ordered request: noted as ordered, and executed by the servant (or kept for it).
  // `orderer`: the member whose broadcast delivered it (0: not known, a request applied later
  // from a buffer); it alone sends a non-member's ordered notice.
  // `payload`, when given, is request's own payload, which the call may take, uncopied.
  void ApplyRequest(Group* group, const wire::Request& request, NodeId orderer = 0,
                    std::string* payload = nullptr);
  void DeliverRequest(Group* group, const wire::Request& request, std::string* payload = nullptr);
  // A servant attached here holds the group's replicated state (false while servant_lost).
  bool HasServant(const std::string& group) const;
  bool CanGiveState(const Group* group);
  // This node suspects `provider` (a member of `group` other than itself), the member owing a
  // joiner its state: the joiner asks again, and members re-add it, without waiting.
  bool ProviderSuspected(const Group* group, NodeId provider) const;
  // This node waits for a state from a provider whose process the view no longer counts.
  bool ProviderGone(Group* group);
  // This node is in view `view_id` of `group` and awaits its state from `provider` (0: not
  // known): nothing is delivered until it comes, and its envelopes say so (awaiting_state).
  void AwaitState(Group* group, uint64_t view_id, NodeId provider);
  // Group watches (WatchGroup): each one's group, what it was last told (the view and the
  // members suspected in it), and its watcher.
  struct WatchSeen {
    uint64_t view_id = 0;
    std::vector<NodeId> suspected;
    bool operator!=(const WatchSeen& other) const {
      return view_id != other.view_id || suspected != other.suspected;
    }
  };
  static WatchSeen SeenBy(const Group& group);
  struct Watch {
    std::string group;
    WatchSeen told;
    GroupWatcher on_change;
  };
  std::map<uint64_t, Watch> watches_;
  uint64_t next_watch_ = 1;
  void CheckWatches();
  // Servants' view events (node_views.cc): the group's current view, placed in the order of its
  // deliveries to the servants (held with the requests while they are held).
  ViewMark CurrentViewMark(const Group* group) const;
  void QueueViewMark(Group* group);
  void ApplyViewMark(Group* group, ViewMark mark);
  void SendViewTo(const Group* group, const Servant& servant, const ViewMark& mark);
  // Requests held in order with the views among them, applied by `apply` in that order.
  void ReplayWithViews(Group* group, std::vector<wire::Request> requests, PendingViews views,
                       const std::function<void(const wire::Request&)>& apply);
  bool AnyServantAttached(const std::string& group) const;
  // The group's last servant here detached: its state is gone; leave the group (see
  // GroupMembership::servant_lost).
  void OnServantLost(const std::string& group);
  void TickServantLost(Group* group);

  // Leaving a group (node_leaving.cc): a member told to leave (LeaveGroup, or its servant lost)
  // until the view without it is installed.
  bool Leaving(const Group* group) const;
  // A call or multicast made now waits (HoldWhileLeaving): leaving, or earlier ones wait still.
  bool MustHold(const Group* group) const;
  // Proposes the view without this node (again after the exclusion timeout, until it applies).
  void ProposeLeave(Group* group);
  bool LeaveDueAgain(const Group* group, const GroupMembership& membership) const;
  // Holds a call or multicast made while leaving; OK from HoldWhileLeaving itself: held.
  absl::Status HoldWhileLeaving(Group* group, uint64_t expires_ms,
                                std::function<void(absl::Status)> resume);
  // Re-proposes a leave not yet applied; makes the held calls again once out, or ends those
  // past their deadline.
  void TickLeaving(Group* group);
  // After a view change removed this node: a node that left forgets its undelivered broadcasts.
  void LeftView(Group* group);
  // Warns (at most every 5 s) when a group's work has made no progress for 2 s (node_watchdog.cc).
  // `open`: the group's deliveries awaiting the servant's answer.
  void TickWatchdog(Group* group, size_t open);

  // Membership (node_membership.cc).
  // `add_incarnations`: of each node in `add`, in order (0 or missing: unknown).
  void ProposeViewChange(Group* group, std::vector<NodeId> remove, std::vector<NodeId> add,
                         std::vector<uint64_t> add_incarnations = {});
  // Returns true when the view changed; deliveries of the new view go to `next_view`.
  // `to_view` (0: the next): the new view's id (membership::ViewChangeProposal::to_view).
  // `awaits_readded`: a member removed and added again in this change is the process the calls
  // in progress wait for (nothing was delivered by an earlier one: a durable group re-founded
  // from its kept state), so they go on waiting for its reply.
  bool ApplyViewChange(Group* group, const wire::ViewChange& change,
                       consensus::Deliveries* next_view, uint64_t to_view = 0,
                       bool awaits_readded = false);
  void OnMembership(Group* group, NodeId from, const wire::Envelope& envelope);
  // `from` asked to join as process `incarnation`, not the one the view counts. If every other
  // member of the view has so restarted, re-founds the group with them (true); if the others
  // are survivors too, but no majority, see TryRefound.
  bool RefoundIfLast(Group* group, NodeId from, uint64_t incarnation);
  // What makes a survivor look again whether it re-founds the group (TryRefound).
  enum class RefoundCause { kJoinRequest, kOffer, kInstructed };
  // The survivors of a view whose other members all restarted agree on which of them re-founds
  // the group: true when this node did (kInstructed: a REFOUND told it to).
  bool TryRefound(Group* group, RefoundCause cause);
  // The view `to_view` installed by this node alone: every member in `others` removed and added
  // again as process `processes[i]`, with this node's state (TryRefound, TryRecover). True when
  // it applied. `awaits_readded`: ApplyViewChange's.
  bool InstallRefoundedView(Group* group, const std::vector<NodeId>& others,
                            const std::vector<uint64_t>& processes, uint64_t to_view,
                            bool awaits_readded);
  // Durable groups (node_durable.cc): the state a servant registered with; KEPT_STATE sent
  // while the claim lasts; and the re-founding from the most advanced kept state.
  void NoteKeptState(Group* group, uint64_t servant, const ServantKeptState& kept);
  // This process holds none of the durable group's state but what its servant kept on disk:
  // restarted (Group::durable_claim), or awaiting a state, with that servant registered.
  bool Recovering(Group* group);
  void TickDurable(Group* group);
  void OnKeptState(Group* group, NodeId from, const wire::Envelope& envelope);
  bool TryRecover(Group* group);
  // The servant's answer to "$restore_kept": the calls kept with its state (false: not one).
  bool AnswerRestore(uint64_t servant, uint64_t delivery, const absl::Status& status,
                     const std::string& payload);
  // SURVIVOR and REFOUND (node_restarts.cc).
  void OnSurvivor(Group* group, NodeId from, const wire::Envelope& envelope);
  // Tells restarted processes whose traffic the group refused which process of theirs it counts.
  void SendRestartNotices(Group* group);
  void OnJoinRequest(Group* group, NodeId from, uint64_t from_incarnation,
                     const wire::MembershipMessage& message);
  void OnNewView(Group* group, NodeId from, const wire::MembershipMessage& message);
  void OnStateChunk(Group* group, NodeId from, const wire::MembershipMessage& message);
  void SendJoinRequest(Group* group);
  void SendViewNotice(Group* group, NodeId to);
  void TickMembership(Group* group);
  GroupMembership& MembershipOf(const Group* group);
  void RequestState(Group* group, membership::View view, std::vector<NodeId> joiners);
  void SendStatePieces(const membership::StateSender& sender, const std::string& group,
                       const std::vector<membership::StatePiece>& pieces);
  void ResendStates(Group* group);
  // Takes `payload` only when it returns true (the answer was a state request's).
  bool AnswerStateRequest(uint64_t delivery, const absl::Status& status, std::string& payload,
                          bool more);
  // "I need no more of the state of `view_id`" (installed, or moved past it).
  void SendStateAck(Group* group, NodeId provider, uint64_t view_id);
  void GiveStateToServant(Group* group, std::vector<membership::StateReceiver::ServantChunk> chunks);
  void DeliverInvocation(Group* group, const wire::Request& request,
                         std::string* payload = nullptr);
  // A request of (origin, incarnation) was made by this daemon in its current incarnation.
  bool MadeHere(uint32_t origin, uint64_t incarnation) const {
    return origin == self_ && incarnation == incarnation_;
  }
  // The reply every member gives a request delivered after a later one of its client (counted).
  wire::Reply RefuseOutOfOrder(const Group& group, const wire::Request& request);
  // `payload`, when given, is reply's own payload, which the call may take (a reply this daemon
  // made: its servant's answer to a call of its own client), uncopied.
  void OnReply(const wire::Reply& reply, std::string* payload = nullptr);
  // (The replies' payloads are moved into the call's result.)
  void OnManagedReply(wire::ManagedReply* reply);
  void SendReply(NodeId to, const std::string& group, wire::Reply reply);
  // A servant's answer to its targets (Answer): built in answer_envelope_, reused, unless that
  // is in use further up the stack (an inline servant answering during OnReply).
  void SendAnswer(const OpenDelivery& open, absl::Status status, std::string* payload);
  void SendReplyTo(const ReplyTarget& target, const std::string& group, wire::Reply reply);
  void FinishCall(CallKey call, absl::Status status);
  // Adds a call to calls_ (in the spare node, if any), with a recycled vector for its replies;
  // takes one out (its node kept as spare).
  void AddCall(CallKey key, Call call);
  Call TakeCall(std::map<CallKey, Call>::iterator it);
  void ExpireCalls();
  void RetryManagedCalls();
  std::string NodeName(NodeId node) const;

  // The envelope of every servant answer sent to a peer (SendAnswer): its Reply and strings keep
  // their memory from one answer to the next (issue 7: no allocation per message).
  wire::Envelope answer_envelope_;
  bool answer_envelope_busy_ = false;
  // SendForwardTo's envelope, and the memory of a finished outside call's request for the next.
  wire::Envelope forward_envelope_;
  bool forward_envelope_busy_ = false;
  wire::Request spare_outside_request_;
  // Every delivery is parsed into this message (DeliverAll) unless it is in use further up the
  // stack: its request's strings keep their memory from one delivery to the next, a payload
  // taken by a servant's delivery refilled from spare_payloads.h's (issue 7).
  wire::GroupMessage delivery_message_;
  bool delivery_message_busy_ = false;
  // Tick's numbers per group: calls waiting, open deliveries, the servants' unread bytes.
  TickCounts tick_calls_;
  TickCounts tick_open_;
  TickCounts tick_unread_;

  const std::shared_ptr<const Config> config_owner_;
  std::vector<std::unique_ptr<const GroupConfig>> added_configs_;  // AddGroups: one per group
  uint64_t restarted_from_ = 0;                            // RestartedFrom
  // Envelopes for a group this node does not have, per (sender, group): a streak of them (no
  // two more than kUnknownGroupStreakMs apart) is warned of once it lasts kUnknownGroupWarnMs.
  struct UnknownGroupDrops {
    uint64_t count = 0;
    uint64_t first_ms = 0;
    uint64_t last_ms = 0;
    bool warned = false;
  };
  static constexpr uint64_t kUnknownGroupWarnMs = 2000;
  static constexpr uint64_t kUnknownGroupStreakMs = 10000;
  std::map<std::pair<NodeId, std::string>, UnknownGroupDrops> unknown_group_drops_;
  // Late copies of delivered calls ignored (ReplyCache::Verdict::kForgotten): logged once per 1000.
  uint64_t late_copies_ignored_ = 0;
  // Servants' answers over limits.max_payload_bytes sent as errors (Answer): logged once per 1000.
  uint64_t oversized_replies_ = 0;
  const Config& config_;
  // config_.limits at start, then what ApplyLimits gave (a SIGHUP'd file's limits).
  LimitsConfig limits_;
  // The peers: config_.peers at start, then what SetPeers gave (a SIGHUP'd peers list).
  std::vector<PeerConfig> peers_;
  const PeerConfig* FindPeer(std::string_view name) const { return FindPeerIn(peers_, name); }
  const PeerConfig* FindPeerById(NodeId id) const { return FindPeerByIdIn(peers_, id); }
  Transport* const transport_;
  const NodeId self_;
  const uint64_t incarnation_;
  uint64_t now_ms_;
  // Before groups_, which log through it: the membership events of this tick, gathered.
  GroupEventLog event_log_;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  struct NsoEntry {
    std::string client_name;
    bool expires_when_idle = false;
    mutable uint64_t last_used_ms = 0;  // CheckNso (const) marks each use
    uint64_t owner = 0;                 // OwnerFingerprint of who attached it
    std::vector<std::string> groups_called;  // groups it sent requests to (RetireClient)
    invocation::AwaitedCalls awaited;  // ids of its calls whose results it has not had yet
  };
  // What a request of client `entry` made as call `call_id` tells the members (Request.
  // replies_taken_below): none of its calls below it is awaited here any more.
  static uint64_t RepliesTakenBelow(const NsoEntry& entry, uint64_t call_id) {
    return entry.awaited.empty() ? call_id : std::min(entry.awaited.lowest(), call_id);
  }
  std::map<uint64_t, NsoEntry> nsos_;
  uint64_t next_nso_sweep_ms_ = 0;
  uint64_t nsos_detached_idle_ = 0;
  uint64_t servants_cut_off_ = 0;
  uint64_t nsos_detached_ = 0;
  uint64_t clients_retired_ = 0;
  uint64_t clients_not_retired_ = 0;
  RemovedGroupTotals removed_group_totals_;
  // Starts from this start's incarnation (its low 32 bits, in the high half): a client that
  // outlived a restart of its daemon presents an NSO id the new daemon never gave, so it is told
  // "unknown NSO" (and attaches again) instead of being taken for another client.
  uint64_t next_nso_;
  std::map<CallKey, Call> calls_;
  // The node of the last call finished, kept for the next (a call's map node was allocated and
  // freed per call, issue 7).
  std::map<CallKey, Call>::node_type spare_call_;
  // The request Invoke builds, kept for the next call (its strings keep their memory: two
  // allocations per call, issue 7); a call made while one is being built (an inline servant
  // calling on) builds its own.
  wire::Request invoke_request_;
  bool invoke_request_busy_ = false;
  // Reply vectors that finished calls' results gave back (RecycleReplies), for new calls.
  std::vector<std::vector<invocation::MemberReply>> spare_replies_;
  uint64_t next_call_id_ = 1;
  std::map<std::string, invocation::ReplyCache> reply_caches_;  // by group
  std::map<uint64_t, Servant> servants_;          // by servant id
  uint64_t next_servant_ = 1;
  // Hash maps: made and erased per call, they allocate nothing once grown (issue 7). Not
  // iterated where the order shows (UnregisterServant sorts what it finds).
  absl::flat_hash_map<uint64_t, OpenDelivery> open_deliveries_;  // by delivery number
  absl::flat_hash_map<CacheId, uint64_t> open_delivery_by_call_;
  std::map<std::string, uint64_t> delivered_seq_;  // by group: requests delivered so far
  std::map<std::string, uint32_t> preferred_manager_;  // by group: request manager in use
  std::map<std::string, OutsideRoute> outside_routes_;  // by group
  // By group; a group's entry stays while it is a member (its B-tree keeps its root, issue 7).
  std::map<std::string, consensus::SpareBtreeMap<StandbyKey, StandbyCopy>> standby_;
  std::map<std::string, invocation::OutsideFifo> outside_fifo_;        // by group
  // Each client's last request from here to each group it is not a member of (outside_fifo.h).
  std::map<uint64_t, std::map<std::string, uint64_t, std::less<>>> last_outside_request_;
  // (client NSO, group) -> its last request made here as a member that SubmitAsMember held.
  std::map<std::pair<uint64_t, std::string>, uint64_t> member_held_;
  // (client NSO, group) -> its last request this node broadcast as a member that the view which
  // left this node out had not delivered; it is broadcast again once the node rejoins
  // (Group::InstallView), and the client's next request from outside names it (LeftView).
  struct Kept {
    uint64_t call_id = 0;
    uint64_t until_ms = 0;  // named no longer after this: the node may not rejoin soon
  };
  std::map<std::pair<uint64_t, std::string>, Kept> kept_by_client_;
  OutsideCounters outside_counters_;
  membership::ManagerWatch manager_watch_;
  std::set<NodeId> silent_managers_;  // found silent this tick (WatchManagers)
  // Calls made here that failed (at their deadline, mostly), the latest 4096 (OnPredecessorMissing).
  std::set<uint64_t> failed_here_;
  std::set<NodeId> links_closed_;     // peers whose connection closed and is not back (LinkChanged)
  // (group, member) that answered a forwarded request "not a member" since the last tick.
  std::set<std::pair<std::string, NodeId>> left_managers_;
  std::map<std::string, GroupMembership> membership_;  // by group
  invocation::CausalBarrier causal_barrier_;
  std::map<uint64_t, StateRequest> state_requests_;    // by delivery number
  std::map<uint64_t, std::string> kept_restores_;      // "$restore_kept": group by delivery
  std::map<TransferKey, membership::StateSender> state_senders_;
  uint64_t next_delivery_ = 1;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_NODE_H_
