// Deterministic simulation of the whole stack (STYLE.md example 3): real Nodes (NSOs, groups,
// total order, failure detector, membership, invocation, reply cache) over the simulated network
// and clock, with replicated-counter servants and clients invoking in every mode. Faults: crashes
// (fewer than half of the nodes at once) and restarts, servant crashes under a live daemon,
// partitions and heals, loss, duplication,
// delay and clock drift (every node reads its own clock: a seeded offset and rate, so its
// failure-detector, silence, retransmission and deadline timers fire early or late relative to
// the other nodes'). After the faults stop it checks liveness; throughout it checks safety:
//   views: every node that installed view v installed the same members;
//   order and virtual synchrony: every replica's sequence of applied calls is a prefix of one
//     common sequence (state transfer included), with no call applied twice;
//   exactly once: every acknowledged call is applied exactly once in the final sequence;
//   liveness: once healed, all live nodes share one view holding all of them, every call made
//     during the run has completed (replies or an error, by its deadline), and new calls from
//     every node complete.
#ifndef COHORT_TEST_STACK_SIM_H_
#define COHORT_TEST_STACK_SIM_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nso/sim_network.h"

namespace cohort::sim {

struct StackSimOptions {
  uint64_t seed = 1;
  uint32_t nodes = 0;             // 0: 3 to 5, chosen by the seed
  bool sequencer = false;         // ordering of the group
  // The group is event-driven (003 section 3: its members exchange messages only while requests
  // are pending; no heartbeats, no failure detection when idle) instead of lively.
  bool event_driven = false;
  bool faults = true;             // crashes, restarts, partitions, loss
  // With faults: a servant (the application object) crashes while its daemon stays up, and a
  // fresh one, without state, attaches 50-1500 ms later. Its own generator: the other faults of
  // a seed stay the same with or without.
  bool servant_crashes = true;
  // With faults: a member leaves the group (LeaveGroup, as `cohortctl leave` or a SIGTERM does)
  // while its clients keep calling, and joins again (JoinGroup, with state transfer) 50-1500 ms
  // later. Its own generator, like servant crashes; off by default so that the seeds' runs stay
  // what they were.
  bool leaves = false;
  // Clients come and go: before a call, with this percent chance, its caller's client detaches
  // (its calls in flight go on) and a new one attaches and makes the call; a client that had
  // every request ordered is retired at every member (Node::RetireClient). Its own generator;
  // 0 (off) by default so that the seeds' runs stay what they were.
  uint32_t client_churn_percent = 0;
  // Servants read their deliveries at a pace (node k's one per 1 ms, or, by k mod 3, one per 12
  // or 6 ms divided by calls_per_step: they keep up on average, not in bursts) and tell their
  // nodes their backlog, with limits.servant_backlog_bytes of 8 bytes: flow control
  // (nso/group_flow.h) holds the group's requests whenever a servant has two calls unread. Off by
  // default so that the seeds' runs stay what they were.
  bool slow_servants = false;
  // With slow_servants and servant crashes: half of the servant faults are a servant that stops
  // reading for 100-1500 ms instead of crashing. With limits.servant_stall_ms 300 and
  // servant_cutoff_bytes 200, one stopped long enough is cut off (Node::CutOffServant): its node
  // unregisters it, and, as after a crash, a fresh one attaches 50-1500 ms later. Off by default
  // so that the seeds' runs stay what they were.
  bool stuck_servants = false;
  bool slow_only = false;         // only delays: bursts above the suspicion timeout, below exclusion
  uint64_t chaos_ms = 4000;       // simulated time with faults
  uint64_t settle_limit_ms = 30000;
  uint64_t suspect_timeout_ms = 50;
  uint64_t exclude_timeout_ms = 800;
  uint32_t call_every_ms = 15;    // a client call every this often (simulated)
  uint32_t calls_per_step = 1;    // calls started together, each from a caller chosen at random
  uint64_t crash_one_at_ms = 0;   // > 0: crash one node (not node 1) at this time, nothing else
  // Clock drift: node k's clock reads offset_k + t * (1'000'000 + drift_ppm_k) / 1'000'000 at
  // simulated time t, with drift_ppm_k uniform in [-drift_ppm_max, +drift_ppm_max] and offset_k
  // in [0, clock_offset_ms_max], both from the seed (a restart keeps the machine's clock).
  // 0: every node reads the simulated clock.
  // A node outside the group (it hosts no member) also calls, in every mode and style: its
  // closed calls are ordered by one member while the others stand by, its one-way and open calls
  // go through a request manager and are resent until ordered. It never crashes; partitions cut
  // it off with the majority's side of the network.
  bool outside_caller = true;
  bool streams_break = false;     // nso::SimNetworkOptions::streams_break
  // Of the node crashes, the share (per cent) that are process kills: the peers' connections to
  // it close (nso::SimNetwork::Kill) and suspect it at once; the others are silent crashes.
  uint32_t kill_percent = 50;
  uint32_t drift_ppm_max = 50000;  // +-5%
  uint64_t clock_offset_ms_max = 1000000;
  // Every message takes link_delay_min_ms..link_delay_max_ms (uniform) while no fault slows the
  // network. With both 1, a fault-free call's simulated time counts its hops on the critical path.
  uint64_t link_delay_min_ms = 1;
  uint64_t link_delay_max_ms = 3;
  // Staggered start: each node but node 1, with probability 1/2, starts at a time drawn in
  // 1..late_start_ms instead of 0 (a deployment whose daemons come up one by one; the others
  // never heard of it, and it takes the state by catching up or by a transfer). Until then it
  // counts as crashed. 0: every node starts at 0.
  uint64_t late_start_ms = 0;
  // Each node keeps its last incarnation on disk (cohortd's incarnation_file): a restarted node
  // says which process it follows (nso::Node::RestartedFrom). false: a restart passes for a
  // first start to a member that never heard the earlier process.
  bool incarnation_files = false;
  // Messages of the run singled out, sorted by their place: each lost, delayed or delivered
  // again late, or its sender crashes right after it if the fault model allows, and restarts
  // without its state restart_ms later (0: when the faults stop). cohort-sim --perturb takes
  // every message of a run in turn.
  std::vector<nso::MessagePerturbation> perturbations;
  bool record_send_kinds = false;  // fill StackSimResult::send_kinds
};

// Simulated times of the successful calls of one kind: caller inside or outside the group,
// invocation mode, closed or open.
struct CallKindTimes {
  uint64_t count = 0;
  uint64_t min_ms = 0;
  uint64_t p50_ms = 0;
  uint64_t max_ms = 0;
};

struct StackSimResult {
  bool ok = true;
  std::string violation;
  uint32_t nodes = 0;
  uint64_t faults = 0;
  uint64_t calls = 0;
  uint64_t calls_acknowledged = 0;
  uint64_t views_installed = 0;    // highest view id reached
  uint64_t servant_views = 0;      // views the servants got as "$view" (checked alike everywhere)
  uint64_t state_transfers = 0;
  uint64_t servant_crashes = 0;
  uint64_t leaves = 0;
  uint64_t late_starts = 0;  // nodes that started late (StackSimOptions::late_start_ms)
  // Restarted processes never heard in a view that said which process they follow, counted by
  // a member (nso::GroupCounters::restarts_named; StackSimOptions::incarnation_files).
  uint64_t restarts_named = 0;
  // With slow_servants: times a member's servants fell behind (nso::Group::times_behind).
  uint64_t servants_behind = 0;
  // With stuck_servants: servants that stopped reading, and of them those cut off by their node.
  uint64_t servants_stuck = 0;
  uint64_t servants_cut_off = 0;
  uint64_t crash_to_view_ms_max = 0;  // longest time from a crash to the view excluding it
  int32_t drift_ppm_min = 0;          // slowest and fastest node clock of the run
  int32_t drift_ppm_max = 0;
  uint64_t end_ms = 0;
  // Simulated time from a call to its successful completion (a one-way call completes once it is
  // accepted for ordering), over the calls that succeeded; and the slowest of them, described.
  uint64_t call_ms_max = 0;
  uint64_t call_ms_p50 = 0;
  std::string slowest_call;
  // FIFO per client (the outside caller's across routes): whether it was checked, over how many
  // applied calls (of them, the outside caller's), the members' holds that ended without the
  // predecessor, and the calls refused because a later one of their client was delivered before
  // them (counted once per member that delivered them).
  bool fifo_checked = false;
  uint64_t fifo_calls_applied = 0;
  uint64_t outside_calls_applied = 0;
  uint64_t fifo_gave_up = 0;
  uint64_t fifo_refused = 0;
  uint64_t calls_refused = 0;  // calls whose caller got the refusal (still waiting for them)
  // StackSimOptions::client_churn_percent: clients replaced, and of the ones that left, those
  // retired (every request ordered) or not, summed over the nodes that did not crash.
  uint64_t clients_replaced = 0;
  uint64_t clients_retired = 0;
  uint64_t clients_not_retired = 0;
  // One-way calls accepted (OK to their caller) by a daemon that did not crash or restart until
  // the end, and applied by no replica (without stable storage, a crash of the caller's daemon
  // may lose what it accepted; nothing else should).
  uint64_t one_way_lost = 0;
  std::string one_way_lost_example;
  uint64_t messages_sent = 0;  // by every node, over the whole run
  // Of them, those sent before the faults stopped (the checks of liveness that follow assume a
  // network that loses nothing).
  uint64_t messages_sent_in_chaos = 0;
  std::string perturbed;       // the messages StackSimOptions::perturbations singled out, if sent
  std::string perturbed_kind;  // the first one's body: "consensus", "heartbeat", ...
  uint32_t perturb_crashes = 0;  // senders crashed right after their message
  uint64_t trace_hash = 0;     // nso::SimNetwork::trace_hash at the end
  std::vector<uint8_t> send_kinds;  // with record_send_kinds: nso::SimNetwork::send_kinds
  // By kind: "member closed first", "outside open all", ... (see CallKindName).
  std::map<std::string, CallKindTimes> call_times;
};

StackSimResult RunStackSimulation(const StackSimOptions& options);

// The cohort-sim flags that replay a run with `options` (those other than the defaults, and the
// ordering), and the whole command for its seed.
std::string ReplayFlags(const StackSimOptions& options);
// A perturbation as cohort-sim --perturb spells it: "drop", "crash+delay:3000", "restart:20".
std::string PerturbationName(const nso::MessagePerturbation& perturbation);
std::string ReplayCommand(const StackSimOptions& options);

// The middle value of values (the upper one of an even count); 0 for none.
uint64_t Median(std::vector<uint64_t> values);

}  // namespace cohort::sim

#endif  // COHORT_TEST_STACK_SIM_H_
