#include "test/stack_sim.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/sim_network.h"

namespace cohort::sim {
namespace {

using nso::NodeId;
constexpr char kGroup[] = "g";
constexpr uint64_t kTickMs = 2;
constexpr uint64_t kCallDeadlineMs = 1500;  // every call's, one-way calls' included

struct Replica {
  std::unique_ptr<nso::Node> node;
  bool alive = false;
  uint64_t incarnation = 0;
  uint64_t client_nso = 0;
  uint64_t servant = 0;
  uint64_t servant_generation = 0;  // a crashed servant's late deliveries are not applied
  int64_t value = 0;
  std::vector<std::string> applied;  // call ids applied by the servant, in order
  std::string incoming_state;        // state chunks received so far (streamed state transfer)
  uint64_t view_id = 0;
  std::vector<NodeId> view_members;
  uint64_t servant_view_id = 0;  // the last "$view" its servant got (0: none yet)
  uint64_t crashed_at_ms = 0;
  int32_t drift_ppm = 0;       // the node's clock rate error (StackSimOptions::drift_ppm_max)
  uint64_t clock_offset_ms = 0;
  // StackSimOptions::slow_servants: deliveries waiting for the servant (with its generation),
  // their payload bytes, the bytes it has read, and whether a read is scheduled.
  std::deque<std::pair<uint64_t, nso::ServantDelivery>> paced;
  uint64_t unread_bytes = 0;
  uint64_t read_bytes = 0;
  bool reading = false;
  bool stuck = false;  // StackSimOptions::stuck_servants: it reads nothing for now
};

class StackSim {
 public:
  explicit StackSim(const StackSimOptions& options)
      : options_(options),
        net_(NetOptions(options)),
        rng_(options.seed * 7919 + 17),
        servant_rng_(options.seed * 15485863 + 5),
        kill_rng_(options.seed * 32452843 + 7),
        leave_rng_(options.seed * 49979687 + 11),
        late_rng_(options.seed * 67867967 + 13),
        churn_rng_(options.seed * 86028121 + 19) {
    result_.nodes = options.nodes ? options.nodes : 3 + rng_.Uniform(3);
    // A generator of its own, so the clocks do not change the rest of a seed's schedule.
    nso::Rng clock_rng(options.seed * 104729 + 3);
    result_.drift_ppm_min = INT32_MAX;
    result_.drift_ppm_max = INT32_MIN;
    for (NodeId id = 1; id <= result_.nodes; ++id) {
      Replica& replica = replicas_[id];
      const uint64_t span = 2 * uint64_t{options.drift_ppm_max};
      replica.drift_ppm = static_cast<int32_t>(clock_rng.Uniform(span + 1)) -
                          static_cast<int32_t>(options.drift_ppm_max);
      replica.clock_offset_ms = clock_rng.Uniform(options.clock_offset_ms_max + 1);
      result_.drift_ppm_min = std::min(result_.drift_ppm_min, replica.drift_ppm);
      result_.drift_ppm_max = std::max(result_.drift_ppm_max, replica.drift_ppm);
    }
    const uint64_t span = 2 * uint64_t{options.drift_ppm_max};
    outsider_.drift_ppm =
        static_cast<int32_t>(clock_rng.Uniform(span + 1)) - static_cast<int32_t>(options.drift_ppm_max);
    outsider_.clock_offset_ms = clock_rng.Uniform(options.clock_offset_ms_max + 1);
    net_.SetPerturbHook(
        [this](NodeId id, uint64_t restart_ms) { return PerturbCrash(id, restart_ms); });
  }

  StackSimResult Run();

 private:
  static nso::SimNetworkOptions NetOptions(const StackSimOptions& options) {
    nso::SimNetworkOptions net;
    net.seed = options.seed;
    net.delay_min_ms = options.link_delay_min_ms;
    net.delay_max_ms = options.link_delay_max_ms;
    net.streams_break = options.streams_break;
    net.perturbations = options.perturbations;
    net.record_send_kinds = options.record_send_kinds;
    return net;
  }
  nso::Config MakeConfig(NodeId id) const;
  // What node `id`'s clock reads now (monotonic: the rate stays within +-100%).
  uint64_t LocalMs(NodeId id) const {
    const Replica& replica = id == outsider_id() ? outsider_ : replicas_.at(id);
    const uint64_t now_ms = net_.now_ms();
    const int64_t skew_ms = static_cast<int64_t>(now_ms) * replica.drift_ppm / 1000000;
    return replica.clock_offset_ms + now_ms + skew_ms;
  }
  void Boot(NodeId id);
  NodeId outsider_id() const { return result_.nodes + 1; }
  Replica& ReplicaOf(NodeId id) { return id == outsider_id() ? outsider_ : replicas_[id]; }
  void BootOutsider();
  void Crash(NodeId id);
  // A crashed node back up with a new incarnation and no state.
  void Restart(NodeId id);
  // A perturbation's crash (StackSimOptions::perturbations): node `id` crashes right after the
  // message singled out, if the fault model allows one more crash, and restarts restart_ms later
  // (0: when the faults stop). True: the network has cut it off at once, and its Node is
  // destroyed as soon as its send returns.
  bool PerturbCrash(NodeId id, uint64_t restart_ms);
  // StackSimOptions::late_start_ms: node `id` starts at `at_ms`, not at 0.
  void StartLate(NodeId id, uint64_t at_ms);
  void ScheduleTick(NodeId id, uint64_t incarnation);
  // A fresh servant (no state) attaches to node id's daemon.
  void AttachServant(NodeId id);
  // StackSimOptions::slow_servants: the servant of node `id` reads one delivery per pace.
  void QueueForServant(NodeId id, uint64_t generation, nso::ServantDelivery delivery);
  void ScheduleServantRead(NodeId id, uint64_t pace_ms);
  // The servant crashes; its daemon stays up. A new one attaches after a while.
  void CrashServant(NodeId id);
  void MaybeCrashServant();
  // StackSimOptions::stuck_servants: the servant of node `id` stops reading for a while; and
  // what follows its node's cut-off (a crash's aftermath: a fresh servant attaches later).
  void StickServant(NodeId id);
  void ServantCutOff(NodeId id, uint64_t generation);
  // A member leaves the group; it joins again 50-1500 ms later (StackSimOptions::leaves).
  void MaybeLeave();
  void Rejoin(NodeId id);
  void OnServant(NodeId id, uint64_t generation, nso::ServantDelivery delivery);
  void Call(NodeId id, invocation::Mode mode, nso::GroupConfig::Style style);
  void RecordView(NodeId id);
  void CheckPrefix(const std::vector<std::string>& log, const std::string& what);
  void Chaos();
  void InjectFault();
  void Heal();
  bool Settled();
  void Fail(const std::string& why) {
    if (result_.ok) {
      result_.ok = false;
      result_.violation = absl::StrCat("t=", net_.now_ms(), "ms: ", why);
    }
  }
  // Nodes without a usable state: crashed, cut off, or restarted and not yet given the state.
  // The fault model keeps them fewer than half (a majority restarting at once, with no stable
  // storage, would be a fresh start of the group).
  bool CanDisable(uint32_t count) const;
  uint32_t disabled() const {
    std::set<NodeId> all = crashed_;
    all.insert(cut_off_.begin(), cut_off_.end());
    all.insert(amnesiac_.begin(), amnesiac_.end());
    all.insert(servantless_.begin(), servantless_.end());
    all.insert(left_.begin(), left_.end());
    all.insert(crashing_.begin(), crashing_.end());
    all.insert(stuck_.begin(), stuck_.end());
    return all.size();
  }

  const StackSimOptions options_;
  nso::SimNetwork net_;
  nso::Rng rng_;
  nso::Rng servant_rng_;  // servant crashes
  nso::Rng kill_rng_;     // which crashes are kills (its own, so the fault schedule stays)
  nso::Rng leave_rng_;    // StackSimOptions::leaves
  nso::Rng late_rng_;     // StackSimOptions::late_start_ms
  nso::Rng churn_rng_;    // StackSimOptions::client_churn_percent
  StackSimResult result_;
  std::map<NodeId, Replica> replicas_;
  Replica outsider_;  // StackSimOptions::outside_caller: node nodes + 1, no member, no servant
  std::set<NodeId> crashed_;
  std::set<NodeId> cut_off_;   // the minority side of the current partition
  std::set<NodeId> amnesiac_;  // restarted, state not transferred yet
  // Cut off by a perturbation's crash, their Node not destroyed yet (PerturbCrash): a second
  // crash at the same moment must count them (two at t = 920 ms of seed 706, n = 5, took down
  // half of a 4-member view, beyond the fault model).
  std::set<NodeId> crashing_;
  std::set<NodeId> servantless_;  // daemon up, its servant crashed, no new one attached yet
  std::set<NodeId> stuck_;        // its servant reads nothing (it may be cut off)
  std::set<NodeId> left_;         // told to leave (LeaveGroup), not yet told to join again
  std::map<uint64_t, std::vector<NodeId>> views_;  // view id -> members, as first installed
  // "$view" as the servants got it: view id -> members, calls applied before it, group_seq.
  struct ServantViewSeen {
    std::vector<NodeId> members;
    size_t applied = 0;
    uint64_t group_seq = 0;
    NodeId first_at = 0;
  };
  std::map<uint64_t, ServantViewSeen> servant_views_;
  void OnServantView(NodeId id, const nso::ServantDelivery& delivery);
  std::vector<std::string> reference_;             // longest applied sequence seen
  std::set<std::string> acknowledged_;
  uint64_t next_call_ = 1;
  uint64_t outstanding_ = 0;
  std::string last_failure_;
  // Durations of the calls that succeeded, by kind (StackSimResult::call_times).
  std::map<std::string, std::vector<uint64_t>> call_ms_by_kind_;
  const bool trace_ = std::getenv("COHORT_SIM_TRACE") != nullptr;
  // With COHORT_SIM_TRACE, the nodes' log lines name the node and the simulated time.
  void As(NodeId id) {
    if (!trace_) return;
    const char* level = std::getenv("COHORT_SIM_TRACE");
    nso::ConfigureLogging(std::string(level).size() > 1 ? level : "info", "text",
                          absl::StrCat("t=", net_.now_ms(), " n", id));
  }
  std::map<NodeId, uint64_t> pending_exclusion_;  // crashed node -> crash time
  // FIFO per client (for the outsider across routes, invocation/outside_fifo.h): every call by
  // number (issue order), its client as the daemons know it, and when it was made.
  struct CallMade {
    NodeId node = 0;
    uint64_t incarnation = 0;  // a restarted daemon's calls are another client's
    uint64_t client_nso = 0;
    uint64_t issued_ms = 0;
  };
  std::map<uint64_t, CallMade> calls_made_;
  std::set<uint64_t> one_way_accepted_;  // numbers of the one-way calls accepted
  uint64_t fifo_gave_up_ = 0;  // members' OutsideCounters::fifo_gave_up, crashed ones' included
  uint64_t fifo_refused_ = 0;  // ... and fifo_refused
  void CheckClientFifo();
  // Adds a node's FIFO counters and its groups' restarts_named (at its crash, or at the end) to
  // the run's.
  void AddNodeCounters(const nso::Node& node) {
    fifo_gave_up_ += node.outside_counters().fifo_gave_up;
    fifo_refused_ += node.outside_counters().fifo_refused;
    result_.clients_retired += node.clients_retired();
    result_.clients_not_retired += node.clients_not_retired();
    for (const nso::Group* group : node.groups()) {
      result_.restarts_named += group->counters().restarts_named;
      result_.servants_behind += group->times_behind();
    }
  }
};

nso::Config StackSim::MakeConfig(NodeId id) const {
  nso::Config config;
  config.node = absl::StrCat("n", id);
  config.node_id = id;
  nso::GroupConfig group;
  group.name = kGroup;
  for (NodeId peer = 1; peer <= result_.nodes; ++peer) {
    config.peers.push_back({absl::StrCat("n", peer), peer, absl::StrCat("sim:", peer)});
    group.members.push_back(absl::StrCat("n", peer));
  }
  if (options_.outside_caller) {
    config.peers.push_back({absl::StrCat("n", outsider_id()), outsider_id(),
                            absl::StrCat("sim:", outsider_id())});
  }
  group.ordering = options_.sequencer ? nso::GroupConfig::Ordering::kSequencer
                                      : nso::GroupConfig::Ordering::kConsensus;
  group.liveness = options_.event_driven ? nso::GroupConfig::Liveness::kEvent
                                         : nso::GroupConfig::Liveness::kLively;
  group.silence_ms = 10;
  group.suspect_timeout_ms = options_.suspect_timeout_ms;
  group.exclude_timeout_ms = options_.exclude_timeout_ms;
  config.groups.push_back(group);
  config.failure_detector.suspect_timeout_ms = options_.suspect_timeout_ms;
  config.failure_detector.exclude_timeout_ms = options_.exclude_timeout_ms;
  if (options_.slow_servants) config.limits.servant_backlog_bytes = 8;
  if (options_.stuck_servants) {
    config.limits.servant_stall_ms = 300;
    config.limits.servant_cutoff_bytes = 200;
  }
  return config;
}

void StackSim::Boot(NodeId id) {
  if (trace_) std::fprintf(stderr, "t=%llu BOOT node %u\n", (unsigned long long)net_.now_ms(), id);
  Replica& replica = replicas_[id];
  replica.incarnation++;
  replica.alive = true;
  replica.value = 0;
  replica.applied.clear();
  replica.view_id = 0;
  nso::Transport* transport = net_.Endpoint(id);
  As(id);
  replica.node = std::make_unique<nso::Node>(MakeConfig(id), transport,
                                             id * 1000 + replica.incarnation, LocalMs(id));
  if (options_.incarnation_files && replica.incarnation > 1) {
    replica.node->RestartedFrom(id * 1000 + replica.incarnation - 1);
  }
  transport->SetReceiver([this, id](NodeId from, wire::Envelope envelope) {
    Replica& r = replicas_[id];
    if (!r.alive || !r.node) return;
    As(id);
    r.node->Receive(from, envelope);
  });
  transport->SetLinkWatcher([this, id](NodeId peer, bool up) {
    Replica& r = replicas_[id];
    if (!r.alive || !r.node) return;
    As(id);
    r.node->LinkChanged(peer, up);
  });
  uint64_t incarnation = replica.incarnation;
  servantless_.erase(id);
  AttachServant(id);
  replica.client_nso = *replica.node->Attach("client");
  ScheduleTick(id, incarnation);
}

void StackSim::BootOutsider() {
  const NodeId id = outsider_id();
  outsider_.incarnation = 1;
  outsider_.alive = true;
  nso::Transport* transport = net_.Endpoint(id);
  As(id);
  outsider_.node = std::make_unique<nso::Node>(MakeConfig(id), transport, id * 1000 + 1, LocalMs(id));
  transport->SetReceiver([this, id](NodeId from, wire::Envelope envelope) {
    As(id);
    outsider_.node->Receive(from, envelope);
  });
  transport->SetLinkWatcher([this, id](NodeId peer, bool up) {
    As(id);
    outsider_.node->LinkChanged(peer, up);
  });
  outsider_.client_nso = *outsider_.node->Attach("client");
  ScheduleTick(id, 1);
}

void StackSim::AttachServant(NodeId id) {
  Replica& replica = replicas_[id];
  uint64_t generation = ++replica.servant_generation;
  As(id);
  replica.value = 0;
  replica.applied.clear();
  replica.servant_view_id = 0;
  uint64_t servant_nso = *replica.node->Attach("servant");
  replica.paced.clear();
  replica.unread_bytes = 0;
  replica.stuck = false;
  stuck_.erase(id);
  replica.servant = *replica.node->RegisterServant(
      servant_nso, kGroup, [this, id, generation](nso::ServantDelivery delivery) {
        if (options_.slow_servants) return QueueForServant(id, generation, std::move(delivery));
        // The servant runs after the current step, in delivery order (like the real stream).
        net_.After(0, [this, id, generation, delivery = std::move(delivery)]() mutable {
          OnServant(id, generation, std::move(delivery));
        });
      },
      nso::ServantKeptState{}, /*view_events=*/true);
  if (options_.slow_servants) {
    replica.node->SetServantHooks(
        replica.servant,
        [this, id] {
          return nso::ServantBacklog{replicas_[id].unread_bytes, replicas_[id].read_bytes};
        },
        // After the node's Tick (it must not be called back from it).
        [this, id, generation](const absl::Status&) {
          net_.After(0, [this, id, generation] { ServantCutOff(id, generation); });
        });
  }
}

void StackSim::QueueForServant(NodeId id, uint64_t generation, nso::ServantDelivery delivery) {
  Replica& replica = replicas_[id];
  replica.unread_bytes += delivery.payload.size();
  replica.paced.emplace_back(generation, std::move(delivery));
  if (replica.reading) return;
  replica.reading = true;
  // By node id mod 3: below the rate calls come at (calls_per_step every 15 ms), so that the
  // servants keep up on average and fall behind in bursts (a partition healing, a catch-up).
  const uint64_t per_step = std::max<uint32_t>(options_.calls_per_step, 1);
  const uint64_t pace_ms[] = {std::max<uint64_t>(12 / per_step, 1), 1,
                              std::max<uint64_t>(6 / per_step, 1)};
  ScheduleServantRead(id, pace_ms[id % 3]);
}

void StackSim::ScheduleServantRead(NodeId id, uint64_t pace_ms) {
  net_.After(pace_ms, [this, id, pace_ms] {
    Replica& replica = replicas_[id];
    if (replica.stuck) return ScheduleServantRead(id, pace_ms);
    if (replica.paced.empty()) {
      replica.reading = false;
      return;
    }
    auto [generation, delivery] = std::move(replica.paced.front());
    replica.paced.pop_front();
    replica.unread_bytes -= delivery.payload.size();
    replica.read_bytes += delivery.payload.size();
    OnServant(id, generation, std::move(delivery));
    ScheduleServantRead(id, pace_ms);
  });
}

void StackSim::CrashServant(NodeId id) {
  Replica& replica = replicas_[id];
  if (trace_) {
    std::fprintf(stderr, "t=%llu SERVANT CRASH node %u\n", (unsigned long long)net_.now_ms(), id);
  }
  CheckPrefix(replica.applied, absl::StrCat("node ", id, " at its servant's crash"));
  As(id);
  replica.node->UnregisterServant(replica.servant);
  replica.servant = 0;
  replica.paced.clear();
  replica.unread_bytes = 0;
  replica.servant_generation++;
  replica.applied.clear();
  replica.value = 0;
  servantless_.insert(id);
  amnesiac_.erase(id);
  result_.faults++;
  result_.servant_crashes++;
  uint64_t incarnation = replica.incarnation;
  net_.After(50 + servant_rng_.Uniform(1450), [this, id, incarnation] {
    Replica& r = replicas_[id];
    if (!r.alive || r.incarnation != incarnation || !servantless_.count(id)) return;
    if (trace_) {
      std::fprintf(stderr, "t=%llu SERVANT ATTACH node %u\n", (unsigned long long)net_.now_ms(), id);
    }
    servantless_.erase(id);
    amnesiac_.insert(id);  // until the group's state is installed in the new servant
    AttachServant(id);
  });
}

void StackSim::StickServant(NodeId id) {
  Replica& replica = replicas_[id];
  if (trace_) {
    std::fprintf(stderr, "t=%llu SERVANT STUCK node %u\n", (unsigned long long)net_.now_ms(), id);
  }
  replica.stuck = true;
  stuck_.insert(id);
  result_.faults++;
  result_.servants_stuck++;
  const uint64_t generation = replica.servant_generation;
  net_.After(100 + servant_rng_.Uniform(1400), [this, id, generation] {
    Replica& r = replicas_[id];
    if (!r.stuck || r.servant_generation != generation) return;  // cut off, crashed meanwhile
    if (trace_) {
      std::fprintf(stderr, "t=%llu SERVANT READS AGAIN node %u\n",
                   (unsigned long long)net_.now_ms(), id);
    }
    r.stuck = false;
    stuck_.erase(id);
  });
}

void StackSim::ServantCutOff(NodeId id, uint64_t generation) {
  Replica& replica = replicas_[id];
  if (!replica.alive || replica.servant_generation != generation) return;
  if (trace_) {
    std::fprintf(stderr, "t=%llu SERVANT CUT OFF node %u\n", (unsigned long long)net_.now_ms(),
                 id);
  }
  result_.servants_cut_off++;
  replica.stuck = false;
  stuck_.erase(id);
  CrashServant(id);  // its node unregistered it already: what follows is a crash's aftermath
}

void StackSim::MaybeCrashServant() {
  if (servant_rng_.Uniform(4) != 0) return;
  NodeId id = 1 + servant_rng_.Uniform(result_.nodes);
  const Replica& replica = replicas_[id];
  if (!replica.alive || crashed_.count(id) || cut_off_.count(id) || servantless_.count(id) ||
      amnesiac_.count(id) || left_.count(id) || stuck_.count(id)) {
    return;
  }
  if (disabled() >= (result_.nodes - 1) / 2 || !CanDisable(1)) return;
  if (options_.stuck_servants && servant_rng_.Uniform(2) == 0) {
    return StickServant(id);
  }
  CrashServant(id);
}

void StackSim::MaybeLeave() {
  if (leave_rng_.Uniform(4) != 0) return;
  NodeId id = 1 + leave_rng_.Uniform(result_.nodes);
  Replica& replica = replicas_[id];
  if (!replica.alive || crashed_.count(id) || cut_off_.count(id) || servantless_.count(id) ||
      amnesiac_.count(id) || left_.count(id)) {
    return;
  }
  if (disabled() >= (result_.nodes - 1) / 2 || !CanDisable(1)) return;
  As(id);
  if (!replica.node->LeaveGroup(kGroup).ok()) return;  // no majority in sight: not now
  if (trace_) std::fprintf(stderr, "t=%llu LEAVE node %u\n", (unsigned long long)net_.now_ms(), id);
  left_.insert(id);
  result_.faults++;
  result_.leaves++;
  const uint64_t incarnation = replica.incarnation;
  net_.After(50 + leave_rng_.Uniform(1450), [this, id, incarnation] {
    const Replica& r = replicas_[id];
    if (r.alive && r.incarnation == incarnation && left_.count(id)) Rejoin(id);
  });
}

void StackSim::Rejoin(NodeId id) {
  if (trace_) std::fprintf(stderr, "t=%llu JOIN node %u\n", (unsigned long long)net_.now_ms(), id);
  left_.erase(id);
  As(id);
  // Out: it gets the group's state when added again. Still in (its leave not yet agreed), it
  // stays: joining again ends the leave (a proposal already made may still take it out, and it
  // then asks to join by itself).
  absl::StatusOr<nso::GroupInfo> info = replicas_[id].node->GroupDetails(kGroup);
  if (info.ok() && std::none_of(info->members.begin(), info->members.end(),
                                [id](const nso::GroupInfo::MemberInfo& m) { return m.node == id; })) {
    amnesiac_.insert(id);  // until the group's state is installed in its servant
  }
  if (absl::Status joined = replicas_[id].node->JoinGroup(kGroup); !joined.ok()) {
    Fail(absl::StrCat("node ", id, ": JoinGroup: ", joined.ToString()));
  }
}

void StackSim::ScheduleTick(NodeId id, uint64_t incarnation) {
  net_.After(kTickMs, [this, id, incarnation] {
    Replica& replica = ReplicaOf(id);
    if (!replica.alive || replica.incarnation != incarnation) return;
    As(id);
    replica.node->Tick(LocalMs(id));
    if (id != outsider_id()) RecordView(id);
    ScheduleTick(id, incarnation);
  });
}

void StackSim::RecordView(NodeId id) {
  Replica& replica = replicas_[id];
  absl::StatusOr<nso::GroupInfo> info = replica.node->GroupDetails(kGroup);
  if (!info.ok() || info->view_id == replica.view_id) return;
  std::vector<NodeId> members;
  for (const auto& member : info->members) members.push_back(member.node);
  replica.view_id = info->view_id;
  replica.view_members = members;
  result_.views_installed = std::max(result_.views_installed, info->view_id);
  auto [known, first] = views_.emplace(info->view_id, members);
  if (!first && known->second != members) {
    Fail(absl::StrCat("view ", info->view_id, " differs: node ", id, " has [",
                      absl::StrJoin(members, ","), "], another has [",
                      absl::StrJoin(known->second, ","), "]"));
  }
  for (auto it = pending_exclusion_.begin(); it != pending_exclusion_.end();) {
    if (std::find(members.begin(), members.end(), it->first) == members.end()) {
      result_.crash_to_view_ms_max =
          std::max(result_.crash_to_view_ms_max, net_.now_ms() - it->second);
      it = pending_exclusion_.erase(it);
    } else {
      ++it;
    }
  }
}

// Virtual synchrony as the servants see it (node_views.cc): every servant that gets view v gets
// the same members, after the same calls of the common sequence (and the same deliveries), and
// each servant's views only move forward.
void StackSim::OnServantView(NodeId id, const nso::ServantDelivery& delivery) {
  Replica& replica = replicas_[id];
  if (!delivery.view) return Fail(absl::StrCat("node ", id, ": \"$view\" without its view"));
  std::vector<NodeId> members;
  for (const auto& member : delivery.view->members()) members.push_back(member.node());
  if (trace_) {
    std::fprintf(stderr, "t=%llu node %u servant view %llu [%s] after %zu calls, seq %llu\n",
                 (unsigned long long)net_.now_ms(), id, (unsigned long long)delivery.view_id,
                 absl::StrJoin(members, ",").c_str(), replica.applied.size(),
                 (unsigned long long)delivery.group_seq);
  }
  const bool listed = std::find(members.begin(), members.end(), id) != members.end();
  if (listed != delivery.view->in_view()) {
    return Fail(absl::StrCat("node ", id, ": servant view ", delivery.view_id, " says in_view ",
                             delivery.view->in_view(), " with members [",
                             absl::StrJoin(members, ","), "]"));
  }
  if (delivery.view_id <= replica.servant_view_id) {
    return Fail(absl::StrCat("node ", id, ": servant got view ", delivery.view_id, " after view ",
                             replica.servant_view_id));
  }
  replica.servant_view_id = delivery.view_id;
  auto [seen, first] = servant_views_.emplace(
      delivery.view_id, ServantViewSeen{members, replica.applied.size(), delivery.group_seq, id});
  result_.servant_views = servant_views_.size();
  if (first) return;
  if (seen->second.members != members || seen->second.applied != replica.applied.size() ||
      seen->second.group_seq != delivery.group_seq) {
    Fail(absl::StrCat("servant view ", delivery.view_id, ": node ", id, " got [",
                      absl::StrJoin(members, ","), "] after ", replica.applied.size(),
                      " calls (seq ", delivery.group_seq, "), node ", seen->second.first_at,
                      " got [", absl::StrJoin(seen->second.members, ","), "] after ",
                      seen->second.applied, " calls (seq ", seen->second.group_seq, ")"));
  }
}

void StackSim::CheckPrefix(const std::vector<std::string>& log, const std::string& what) {
  std::set<std::string> seen;
  for (const std::string& call : log) {
    if (!seen.insert(call).second) return Fail(absl::StrCat(what, ": call ", call, " applied twice"));
  }
  size_t common = std::min(log.size(), reference_.size());
  for (size_t i = 0; i < common; ++i) {
    if (log[i] != reference_[i]) {
      return Fail(absl::StrCat(what, ": position ", i, " holds ", log[i], " but another replica "
                               "applied ", reference_[i], " there"));
    }
  }
  if (log.size() > reference_.size()) reference_ = log;
}

void StackSim::OnServant(NodeId id, uint64_t generation, nso::ServantDelivery delivery) {
  Replica& replica = replicas_[id];
  if (!replica.alive || replica.servant_generation != generation) return;
  As(id);
  if (delivery.method == nso::kGetStateMethod) {
    // Streamed in three parts (the last possibly empty), as a large state would be.
    std::string state = absl::StrCat(replica.value, "|", absl::StrJoin(replica.applied, ","));
    size_t third = state.size() / 3;
    replica.node->Answer(replica.servant, delivery.delivery, absl::OkStatus(),
                         state.substr(0, third), true);
    replica.node->Answer(replica.servant, delivery.delivery, absl::OkStatus(),
                         state.substr(third, third), true);
    return replica.node->Answer(replica.servant, delivery.delivery, absl::OkStatus(),
                                state.substr(2 * third), false);
  }
  if (delivery.method == nso::kSetStateMethod) {
    if (delivery.state_offset == 0) replica.incoming_state.clear();
    if (delivery.state_offset != replica.incoming_state.size()) {
      return Fail(absl::StrCat("node ", id, ": state chunk at ", delivery.state_offset,
                               " after ", replica.incoming_state.size(), " bytes"));
    }
    replica.incoming_state += delivery.payload;
    if (!delivery.state_last) return;
    delivery.payload = std::move(replica.incoming_state);
    replica.incoming_state.clear();
    CheckPrefix(replica.applied, absl::StrCat("node ", id, " before state transfer"));
    result_.state_transfers++;
    amnesiac_.erase(id);
    std::vector<std::string> parts = absl::StrSplit(delivery.payload, absl::MaxSplits('|', 1));
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &replica.value)) {
      return Fail(absl::StrCat("node ", id, ": malformed state transferred"));
    }
    replica.applied = parts[1].empty() ? std::vector<std::string>{}
                                       : std::vector<std::string>(absl::StrSplit(parts[1], ','));
    return CheckPrefix(replica.applied, absl::StrCat("node ", id, " after state transfer"));
  }
  if (delivery.method == nso::kViewMethod) return OnServantView(id, delivery);
  if (delivery.method != "add") return;
  if (trace_) {
    std::fprintf(stderr, "t=%llu node %u servant %llu view %llu applies %s at position %zu\n",
                 (unsigned long long)net_.now_ms(), id, (unsigned long long)generation,
                 (unsigned long long)delivery.view_id, delivery.payload.c_str(),
                 replica.applied.size());
  }
  replica.value++;
  replica.applied.push_back(delivery.payload);
  CheckPrefix(replica.applied, absl::StrCat("node ", id));
  // A restarted node applying the group's first call rebuilds the whole state from the decided
  // log, as any laggard does: it needs no transfer. (Seen with cohort-sim --perturb restart:MS:
  // a node killed 2 ms after its start, before anyone heard its first process, is counted as
  // the member it was, and catches up from position 0.)
  if (replica.applied.size() == 1 && result_.ok) amnesiac_.erase(id);
  if (!delivery.one_way) {
    replica.node->Answer(replica.servant, delivery.delivery, absl::OkStatus(),
                         absl::StrCat(replica.value));
  }
}

void StackSim::Call(NodeId id, invocation::Mode mode, nso::GroupConfig::Style style) {
  Replica& replica = ReplicaOf(id);
  std::string call = absl::StrCat("c", next_call_++);
  nso::InvokeOptions options;
  options.group = kGroup;
  options.method = "add";
  options.payload = call;
  options.mode = mode;
  options.mode_given = true;
  options.deadline_ms = kCallDeadlineMs;
  options.style = style;
  result_.calls++;
  outstanding_++;
  As(id);
  if (trace_) {
    std::fprintf(stderr, "t=%llu CALL %s from node %u mode %d %s\n",
                 (unsigned long long)net_.now_ms(), call.c_str(), id, static_cast<int>(mode),
                 style == nso::GroupConfig::Style::kOpen ? "open" : "closed");
  }
  if (options_.client_churn_percent > 0 &&
      churn_rng_.Uniform(100) < options_.client_churn_percent) {
    // The caller's client goes (Detach: its calls in flight go on) and a new one makes the call.
    if (replica.node->Detach(replica.client_nso).ok()) {
      replica.client_nso = *replica.node->Attach("client");
      ++result_.clients_replaced;
    }
  }
  const uint64_t started_ms = net_.now_ms();
  const uint64_t number = next_call_ - 1;
  calls_made_[number] = {id, replica.incarnation, replica.client_nso, started_ms};
  static constexpr const char* kModeNames[] = {"one-way", "first", "majority", "all"};
  const std::string kind =
      absl::StrCat(id == outsider_id() ? "outside " : "member ",
                   style == nso::GroupConfig::Style::kOpen ? "open " : "closed ",
                   kModeNames[static_cast<int>(mode)]);
  replica.node->Invoke(replica.client_nso, options, [this, id, call, mode, started_ms, kind,
                                                     number](nso::InvokeResult result) {
    outstanding_--;
    if (!result.status.ok()) {
      last_failure_ = absl::StrCat(call, ": ", result.status.ToString());
      if (trace_) {
        std::fprintf(stderr, "t=%llu FAILED %s\n", (unsigned long long)net_.now_ms(),
                     last_failure_.c_str());
      }
      return;
    }
    const uint64_t took_ms = net_.now_ms() - started_ms;
    call_ms_by_kind_[kind].push_back(took_ms);
    if (took_ms >= result_.call_ms_max) {
      result_.call_ms_max = took_ms;
      result_.slowest_call = absl::StrCat(call, " (", kind, ") from node ", id, ", started at t=",
                                          started_ms, "ms: ", took_ms, " ms");
    }
    if (mode != invocation::Mode::kOneWay && result.replies.size() < result.wanted) {
      return Fail(absl::StrCat("call ", call, " acknowledged with ", result.replies.size(), " of ",
                               result.wanted, " replies"));
    }
    if (trace_) {
      std::string replies;
      for (const auto& reply : result.replies) {
        absl::StrAppend(&replies, " ", reply.member, "=", reply.status.ToString(), ":", reply.payload);
      }
      std::fprintf(stderr, "t=%llu ACK %s mode %d:%s\n", (unsigned long long)net_.now_ms(),
                   call.c_str(), static_cast<int>(mode), replies.c_str());
    }
    // A call delivered after a later one of its client is refused by every member alike
    // (ReplyCache::Verdict::kOutOfOrder): not acknowledged, and no member executed it.
    size_t refused = 0;
    for (const auto& reply : result.replies) {
      if (reply.status.code() == absl::StatusCode::kAborted) ++refused;
    }
    if (refused > 0 && refused < result.replies.size()) {
      return Fail(absl::StrCat("call ", call, " refused as out of its client's order by ", refused,
                               " of its ", result.replies.size(), " repliers, executed by the others"));
    }
    if (refused > 0) {
      ++result_.calls_refused;
      last_failure_ = absl::StrCat(call, ": ", result.replies[0].status.ToString());
      return;
    }
    if (mode != invocation::Mode::kOneWay) {
      acknowledged_.insert(call);
      result_.calls_acknowledged++;
    } else {
      one_way_accepted_.insert(number);
    }
  });
}

void StackSim::Restart(NodeId id) {
  crashed_.erase(id);
  amnesiac_.insert(id);  // until the group's state is installed in its servant
  pending_exclusion_.erase(id);
  net_.Restart(id);
  Boot(id);
}

void StackSim::StartLate(NodeId id, uint64_t at_ms) {
  // Down until then, as a crashed node (the fault model counts it), never heard by the others.
  net_.Crash(id);
  crashed_.insert(id);
  ++result_.late_starts;
  net_.After(at_ms, [this, id] {
    if (!crashed_.count(id)) return;  // restarted already by a fault, or when the faults stopped
    if (trace_) {
      std::fprintf(stderr, "t=%llu LATE START node %u\n", (unsigned long long)net_.now_ms(), id);
    }
    Restart(id);  // no state yet: it catches up from the decided log or gets a transfer
  });
}

bool StackSim::PerturbCrash(NodeId id, uint64_t restart_ms) {
  if (id == outsider_id() || !replicas_.count(id)) return false;  // the outsider never crashes
  const Replica& replica = replicas_.at(id);
  if (!replica.alive || crashed_.count(id) || crashing_.count(id) || cut_off_.count(id)) {
    return false;
  }
  if (disabled() >= (result_.nodes - 1) / 2 || !CanDisable(1)) return false;
  crashing_.insert(id);
  net_.After(0, [this, id, restart_ms] {
    crashing_.erase(id);
    if (!replicas_[id].alive || crashed_.count(id)) return;
    amnesiac_.erase(id);
    servantless_.erase(id);
    Crash(id);
    if (restart_ms == 0) return;
    net_.After(restart_ms, [this, id] {
      if (!crashed_.count(id)) return;  // restarted already, when the faults stopped
      if (trace_) {
        std::fprintf(stderr, "t=%llu RESTART node %u\n", (unsigned long long)net_.now_ms(), id);
      }
      Restart(id);
    });
  });
  return true;
}

void StackSim::Crash(NodeId id) {
  if (trace_) std::fprintf(stderr, "t=%llu CRASH node %u\n", (unsigned long long)net_.now_ms(), id);
  Replica& replica = replicas_[id];
  CheckPrefix(replica.applied, absl::StrCat("node ", id, " at its crash"));
  if (replica.node) AddNodeCounters(*replica.node);
  replica.alive = false;
  replica.node.reset();
  if (kill_rng_.Uniform(100) < options_.kill_percent) {
    net_.Kill(id);
  } else {
    net_.Crash(id);
  }
  crashed_.insert(id);
  left_.erase(id);  // a restart boots it wanting in
  replica.stuck = false;
  stuck_.erase(id);
  pending_exclusion_[id] = net_.now_ms();
  result_.faults++;
}

// The fault model (issue 6): fewer than half of a view fail at once. Disabling `count` more nodes
// must leave a majority of the latest view functional: alive, connected, holding its state (a
// servant with the state attached) and in that view.
bool StackSim::CanDisable(uint32_t count) const {
  if (views_.empty()) return false;
  const auto& [view_id, members] = *views_.rbegin();
  uint32_t functional = 0;
  for (NodeId member : members) {
    const Replica& replica = replicas_.at(member);
    if (replica.alive && !crashing_.count(member) && !cut_off_.count(member) &&
        !amnesiac_.count(member) && !servantless_.count(member) && !stuck_.count(member) &&
        replica.view_id == view_id) {
      functional++;
    }
  }
  return functional >= count + members.size() / 2 + 1;
}

void StackSim::InjectFault() {
  uint32_t n = result_.nodes;
  uint32_t tolerated = (n - 1) / 2;
  switch (rng_.Uniform(5)) {
    case 0:  // crash a node (the first one, coordinator and first sequencer, half the time)
      if (disabled() < tolerated && CanDisable(1)) {
        NodeId victim = rng_.Uniform(2) == 0 ? 1 : 1 + rng_.Uniform(n);
        if (!crashed_.count(victim) && !cut_off_.count(victim)) {
          amnesiac_.erase(victim);
          servantless_.erase(victim);
          Crash(victim);
        }
      }
      break;
    case 1:  // restart a crashed node: it rejoins with state transfer
      if (!crashed_.empty()) {
        Restart(*crashed_.begin());
        result_.faults++;
      }
      break;
    case 2:  // partition a minority away
      if (cut_off_.empty() && disabled() < tolerated) {
        uint32_t size = 1 + rng_.Uniform(tolerated - disabled());
        while (size > 0 && !CanDisable(size)) size--;
        if (size == 0) break;
        std::vector<NodeId> minority;
        for (NodeId id = 1; id <= n && minority.size() < size; ++id) {
          if (!crashed_.count(id) && !amnesiac_.count(id) && rng_.Uniform(2) == 0) {
            minority.push_back(id);
          }
        }
        if (minority.empty()) break;
        cut_off_.insert(minority.begin(), minority.end());
        if (trace_) {
          std::fprintf(stderr, "t=%llu PARTITION [%s] away\n", (unsigned long long)net_.now_ms(),
                       absl::StrJoin(minority, ",").c_str());
        }
        net_.Partition({minority});
        result_.faults++;
      }
      break;
    case 3:  // heal the partition
      if (!cut_off_.empty()) {
        cut_off_.clear();
        if (trace_) std::fprintf(stderr, "t=%llu HEAL\n", (unsigned long long)net_.now_ms());
        net_.Heal();
        result_.faults++;
      }
      break;
    case 4:  // loss, duplication and delay (up to 10 ms more than the links' own, --link-ms)
      net_.SetLoss(rng_.Uniform(30000), rng_.Uniform(10000));
      net_.SetDelay(options_.link_delay_min_ms, options_.link_delay_min_ms + rng_.Uniform(10));
      result_.faults++;
      break;
  }
}

void StackSim::Chaos() {
  uint64_t end_ms = net_.now_ms() + options_.chaos_ms;
  uint64_t next_fault_ms = net_.now_ms() + 100 + rng_.Uniform(300);
  uint64_t next_slow_ms = net_.now_ms();
  uint64_t next_servant_fault_ms = net_.now_ms() + 100 + servant_rng_.Uniform(300);
  uint64_t next_leave_ms = net_.now_ms() + 100 + leave_rng_.Uniform(300);
  while (net_.now_ms() < end_ms && result_.ok) {
    uint64_t step_end = net_.now_ms() + options_.call_every_ms;
    std::vector<NodeId> alive;
    for (auto& [id, replica] : replicas_) {
      if (replica.alive) alive.push_back(id);
    }
    if (options_.outside_caller) alive.push_back(outsider_id());
    for (uint32_t k = 0; k < options_.calls_per_step; ++k) {
      NodeId caller = alive[rng_.Uniform(alive.size())];
      static constexpr invocation::Mode kModes[] = {
          invocation::Mode::kOneWay, invocation::Mode::kFirst, invocation::Mode::kMajority,
          invocation::Mode::kAll};
      Call(caller, kModes[rng_.Uniform(4)],
           rng_.Uniform(2) ? nso::GroupConfig::Style::kOpen : nso::GroupConfig::Style::kClosed);
    }
    if (options_.crash_one_at_ms && net_.now_ms() >= options_.crash_one_at_ms && crashed_.empty() &&
        result_.faults == 0) {
      Crash(2 + rng_.Uniform(result_.nodes - 1));
    }
    if (options_.faults && net_.now_ms() >= next_fault_ms) {
      InjectFault();
      next_fault_ms = net_.now_ms() + 100 + rng_.Uniform(300);
    }
    if (options_.faults && options_.servant_crashes && net_.now_ms() >= next_servant_fault_ms) {
      MaybeCrashServant();
      next_servant_fault_ms = net_.now_ms() + 100 + servant_rng_.Uniform(300);
    }
    if (options_.faults && options_.leaves && net_.now_ms() >= next_leave_ms) {
      MaybeLeave();
      next_leave_ms = net_.now_ms() + 100 + leave_rng_.Uniform(300);
    }
    if (options_.slow_only && net_.now_ms() >= next_slow_ms) {
      // Bursts of delay above the suspicion timeout but well below the exclusion timeout.
      uint64_t burst_ms = rng_.Uniform(2) ? options_.suspect_timeout_ms * 2 : 5;
      net_.SetDelay(options_.link_delay_min_ms, options_.link_delay_min_ms - 1 + burst_ms);
      next_slow_ms = net_.now_ms() + 100 + rng_.Uniform(200);
    }
    net_.RunUntil(step_end);
  }
}

void StackSim::Heal() {
  if (trace_) std::fprintf(stderr, "t=%llu END OF FAULTS\n", (unsigned long long)net_.now_ms());
  result_.messages_sent_in_chaos = net_.counters().messages_sent;
  net_.Heal();
  cut_off_.clear();
  net_.SetLoss(0, 0);
  net_.SetDelay(options_.link_delay_min_ms, options_.link_delay_max_ms);
  for (NodeId id : std::set<NodeId>(crashed_)) {
    amnesiac_.insert(id);
    net_.Restart(id);
    Boot(id);
    pending_exclusion_.erase(id);
  }
  crashed_.clear();
  for (NodeId id : std::set<NodeId>(stuck_)) replicas_[id].stuck = false;
  stuck_.clear();
  for (NodeId id : std::set<NodeId>(servantless_)) {
    servantless_.erase(id);
    amnesiac_.insert(id);
    AttachServant(id);
  }
  for (NodeId id : std::set<NodeId>(left_)) Rejoin(id);
}

bool StackSim::Settled() {
  // Recovered: one full view, and every replica holds the group's state (a restarted node or a
  // new servant whose state has not arrived is still recovering: a joiner whose provider could
  // not give the state asks again after its state-late timeout, membership/joining.h).
  if (!amnesiac_.empty()) return false;
  uint64_t view = 0;
  for (auto& [id, replica] : replicas_) {
    if (replica.view_members.size() != result_.nodes) return false;
    if (view != 0 && replica.view_id != view) return false;
    view = replica.view_id;
  }
  return true;
}

StackSimResult StackSim::Run() {
  for (NodeId id = 1; id <= result_.nodes; ++id) {
    if (id == 1 || options_.late_start_ms == 0 || late_rng_.Uniform(2) == 0) {
      Boot(id);
      continue;
    }
    StartLate(id, 1 + late_rng_.Uniform(options_.late_start_ms));
  }
  if (options_.outside_caller) BootOutsider();
  net_.RunUntil(200);
  Chaos();
  Heal();
  if (options_.event_driven) {
    // An event-driven group watches its members only while requests are pending (003 section
    // 3): idle, nobody checks who is alive or which view the others are in, so a member excluded
    // while cut off hears of its exclusion when the group next has traffic. Requests arrive:
    // one from every node (whether it succeeds is not required; the calls after settling are).
    for (NodeId id = 1; id <= result_.nodes; ++id) {
      Call(id, invocation::Mode::kMajority, nso::GroupConfig::Style::kClosed);
    }
  }
  // Liveness: every node ends in one view with all nodes, and new calls from every node complete.
  uint64_t limit_ms = net_.now_ms() + options_.settle_limit_ms;
  // Settled and still settled after longer than an exclusion timeout: no view change in flight.
  auto stable = [&] {
    if (!Settled()) return false;
    uint64_t view = replicas_.begin()->second.view_id;
    net_.RunUntil(net_.now_ms() + options_.exclude_timeout_ms + 500);
    return Settled() && replicas_.begin()->second.view_id == view;
  };
  while (result_.ok && net_.now_ms() < limit_ms && !stable()) net_.RunUntil(net_.now_ms() + 20);
  if (result_.ok && !Settled()) {
    std::string views;
    for (auto& [id, replica] : replicas_) {
      absl::StrAppend(&views, " n", id, ":v", replica.view_id, "[",
                      absl::StrJoin(replica.view_members, ","), "]");
    }
    Fail(absl::StrCat("after healing, the nodes did not settle in one full view:", views));
  }
  net_.RunUntil(net_.now_ms() + 1000);  // let the calls of the chaos phase finish or expire
  uint64_t acknowledged_before = result_.calls_acknowledged;
  const uint32_t callers = result_.nodes + (options_.outside_caller ? 1 : 0);
  for (NodeId id = 1; id <= callers && result_.ok; ++id) {
    Call(id, invocation::Mode::kAll, nso::GroupConfig::Style::kClosed);
  }
  while (result_.ok && outstanding_ > 0 && net_.now_ms() < limit_ms + 5000) {
    net_.RunUntil(net_.now_ms() + 20);
  }
  net_.RunUntil(net_.now_ms() + 500);
  // Requests from outside that a member holds for their client's previous one (at most
  // max(60 x suspect timeout, 3 s), invocation/outside_fifo.h) are ordered before the replicas
  // are compared.
  auto holding = [&] {
    for (auto& [id, replica] : replicas_) {
      if (replica.node && replica.node->outside_fifo_held() > 0) return true;
    }
    return false;
  };
  while (result_.ok && holding() && net_.now_ms() < limit_ms + 10000) {
    net_.RunUntil(net_.now_ms() + 20);
  }
  net_.RunUntil(net_.now_ms() + 500);
  // Every call ever made has completed (with its replies or an error, at its deadline at the
  // latest): nothing stays pending once the faults have stopped. (A crashed node's Node completes
  // its calls as CANCELLED when it is destroyed.)
  if (result_.ok && outstanding_ > 0) {
    Fail(absl::StrCat("after healing, ", outstanding_, " calls never completed"));
  }
  if (result_.ok && result_.calls_acknowledged < acknowledged_before + callers) {
    Fail(absl::StrCat("after healing, only ", result_.calls_acknowledged - acknowledged_before,
                      " of ", callers, " wait-for-all calls completed; last failure ",
                      last_failure_));
  }
  // Nothing is left waiting for a servant's answer once every call completed (a one-way call's
  // delivery is never answered, so it must not be kept: it leaked, and the ticks that scanned the
  // leak slowed the daemon down, issue 7).
  for (auto& [id, replica] : replicas_) {
    if (result_.ok && replica.node && replica.node->open_deliveries() != 0) {
      Fail(absl::StrCat("node ", id, " still holds ", replica.node->open_deliveries(),
                        " deliveries awaiting an answer after every call completed"));
    }
  }
  // Every replica applied the same sequence; every acknowledged call exactly once.
  for (auto& [id, replica] : replicas_) {
    CheckPrefix(replica.applied, absl::StrCat("node ", id, " at the end"));
    if (result_.ok && replica.applied.size() != reference_.size()) {
      Fail(absl::StrCat("node ", id, " applied ", replica.applied.size(), " calls, another ",
                        reference_.size()));
    }
  }
  CheckClientFifo();
  std::set<std::string> final_calls(reference_.begin(), reference_.end());
  for (const std::string& call : acknowledged_) {
    if (result_.ok && !final_calls.count(call)) {
      Fail(absl::StrCat("acknowledged call ", call, " was lost"));
    }
  }
  for (uint64_t number : one_way_accepted_) {
    const CallMade& made = calls_made_.at(number);
    if (ReplicaOf(made.node).incarnation != made.incarnation) continue;  // its daemon restarted
    const std::string call = absl::StrCat("c", number);
    if (final_calls.count(call)) continue;
    if (result_.one_way_lost++ == 0) {
      result_.one_way_lost_example = absl::StrCat(call, " from node ", made.node, " at t=",
                                                  made.issued_ms, "ms");
    }
  }
  result_.end_ms = net_.now_ms();
  result_.messages_sent = net_.counters().messages_sent;
  result_.perturbed = net_.perturbed();
  result_.perturbed_kind = net_.perturbed_kind();
  result_.perturb_crashes = net_.perturb_crashes();
  result_.trace_hash = net_.trace_hash();
  result_.send_kinds = net_.send_kinds();
  std::vector<uint64_t> all_ms;
  for (const auto& [kind, times] : call_ms_by_kind_) {
    all_ms.insert(all_ms.end(), times.begin(), times.end());
    const auto [min, max] = std::minmax_element(times.begin(), times.end());
    result_.call_times[kind] = {times.size(), *min, Median(times), *max};
  }
  result_.call_ms_p50 = Median(std::move(all_ms));
  return result_;
}

void StackSim::CheckClientFifo() {
  // Every client's calls are applied in the order it made them, in every run: the outside
  // caller's across routes, and a member's too when it was out of the view for a while (its calls
  // took the outside routes then). A member orders a request from outside without its predecessor
  // only after the longest wait (invocation/outside_fifo.h), and a call delivered after a later
  // one of its client is refused by every member, not executed (ReplyCache::Verdict::kOutOfOrder).
  if (!result_.ok) return;
  for (auto& [id, replica] : replicas_) {
    if (replica.node) AddNodeCounters(*replica.node);
  }
  result_.fifo_gave_up = fifo_gave_up_;
  result_.fifo_refused = fifo_refused_;
  std::map<std::tuple<NodeId, uint64_t, uint64_t>, uint64_t> last_applied;  // per client
  for (const std::string& call : reference_) {
    uint64_t number = 0;
    if (call.size() <= 1 || !absl::SimpleAtoi(call.substr(1), &number)) continue;
    auto made = calls_made_.find(number);
    if (made == calls_made_.end()) continue;
    const CallMade& y = made->second;
    if (y.node == outsider_id()) ++result_.outside_calls_applied;
    ++result_.fifo_calls_applied;
    uint64_t& last = last_applied[{y.node, y.incarnation, y.client_nso}];
    if (last > number) {
      return Fail(absl::StrCat("node ", y.node, "'s client's c", last, " (made at t=",
                               calls_made_[last].issued_ms, "ms) was applied before its c", number,
                               " (made at t=", y.issued_ms, "ms): FIFO per client broken"));
    }
    last = number;
  }
  result_.fifo_checked = true;
}

}  // namespace

uint64_t Median(std::vector<uint64_t> values) {
  if (values.empty()) return 0;
  auto middle = values.begin() + values.size() / 2;
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

std::string PerturbationName(const nso::MessagePerturbation& perturbation) {
  if (perturbation.crash && perturbation.restart_ms != 0) {
    return absl::StrCat("restart:", perturbation.restart_ms);
  }
  std::string what;
  if (perturbation.drop) {
    what = "drop";
  } else if (perturbation.duplicate_ms != 0) {
    what = absl::StrCat("duplicate:", perturbation.duplicate_ms);
  } else if (perturbation.delay_ms != 0) {
    what = absl::StrCat("delay:", perturbation.delay_ms);
  }
  if (perturbation.crash) what = what.empty() ? "crash" : "crash+" + what;
  return what;
}

std::string ReplayFlags(const StackSimOptions& options) {
  const StackSimOptions defaults;
  std::string flags = std::string(" --ordering ") + (options.sequencer ? "sequencer" : "consensus");
  if (options.drift_ppm_max != defaults.drift_ppm_max) {
    flags += " --drift-ppm " + std::to_string(options.drift_ppm_max);
  }
  if (options.event_driven) flags += " --liveness event";
  if (options.streams_break) flags += " --streams-break";
  if (options.leaves) flags += " --leaves";
  if (options.client_churn_percent > 0) {
    flags += " --client-churn " + std::to_string(options.client_churn_percent);
  }
  if (options.slow_servants) flags += " --slow-servants";
  if (options.stuck_servants) flags += " --stuck-servants";
  if (options.kill_percent != defaults.kill_percent) {
    flags += " --kill-percent " + std::to_string(options.kill_percent);
  }
  if (options.crash_one_at_ms) flags += " --crash-one-at " + std::to_string(options.crash_one_at_ms);
  if (options.slow_only) flags += " --slow-only";
  if (!options.faults && !options.slow_only && !options.crash_one_at_ms) flags += " --fault-free";
  if (options.nodes) flags += " --nodes " + std::to_string(options.nodes);
  if (options.link_delay_min_ms == options.link_delay_max_ms) {
    flags += " --link-ms " + std::to_string(options.link_delay_min_ms);
  }
  if (options.calls_per_step != defaults.calls_per_step) {
    flags += " --calls-per-step " + std::to_string(options.calls_per_step);
  }
  if (options.suspect_timeout_ms != defaults.suspect_timeout_ms) {
    flags += " --suspect-ms " + std::to_string(options.suspect_timeout_ms);
  }
  if (options.late_start_ms != 0) flags += " --late-start " + std::to_string(options.late_start_ms);
  if (options.incarnation_files) flags += " --incarnation-files";
  if (options.chaos_ms != defaults.chaos_ms) {
    flags += " --chaos-ms " + std::to_string(options.chaos_ms);
  }
  if (!options.perturbations.empty()) {
    const nso::MessagePerturbation& first = options.perturbations.front();
    flags += absl::StrCat(" --perturb ", PerturbationName(first), " --sends ", first.send, "..",
                          first.send);
    if (options.perturbations.size() > 1) {
      const nso::MessagePerturbation& then = options.perturbations[1];
      flags += absl::StrCat(" --then ", PerturbationName(then), " --then-offsets ",
                            then.send - first.send, "..", then.send - first.send);
    }
  }
  return flags;
}

std::string ReplayCommand(const StackSimOptions& options) {
  return absl::StrCat("cohort-sim --stack --seeds ", options.seed, "..", options.seed,
                      ReplayFlags(options));
}

StackSimResult RunStackSimulation(const StackSimOptions& options) {
  StackSim sim(options);
  return sim.Run();
}

}  // namespace cohort::sim
