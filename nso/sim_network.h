// The in-process deterministic simulated network and clock (STYLE.md example 3, TigerBeetle VOPR).
//
// One single-threaded event queue ordered by (time_ms, insertion sequence): messages in flight and
// timer callbacks. Every random choice (delay, drop, duplicate) comes from one seeded Rng, so a
// seed replays exactly. Faults: per-message delay in [delay_min_ms, delay_max_ms] (reordering falls
// out of random delays), drop, duplicate, partitions, crash and restart of a node. A crashed node
// neither sends nor receives, and messages in flight to it are lost (also after a restart).
#ifndef COHORT_NSO_SIM_NETWORK_H_
#define COHORT_NSO_SIM_NETWORK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nso/rng.h"
#include "nso/transport.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

// What is done to one message: the send-th Send() of the run (1-based).
struct MessagePerturbation {
  uint64_t send = 0;
  bool drop = false;          // lost
  uint64_t delay_ms = 0;      // arrives this much later than drawn
  uint64_t duplicate_ms = 0;  // also arrives again this long after the original
  // Its sender crashes right after it, if SimNetwork::SetPerturbHook's hook agrees (passed
  // restart_ms: when the hook's owner restarts it; 0: its own choice).
  bool crash = false;
  uint64_t restart_ms = 0;
};

struct SimNetworkOptions {
  uint64_t seed = 1;
  uint64_t delay_min_ms = 1;           // every message takes a delay in [min, max]
  uint64_t delay_max_ms = 1;
  uint32_t drop_per_million = 0;       // chance a message is lost
  uint32_t duplicate_per_million = 0;  // chance a message is delivered twice (second copy later)
  size_t events_max = 1 << 22;         // bound on the queue: sends beyond it are dropped
  // Transport::Reachable as a TCP stream's: false once the peer crashed or a partition separates
  // the two. Off: always true (the whole-stack simulator's schedules were swept that way).
  bool streams_break = false;
  // Messages singled out (cohort-sim --perturb: every message of a run in turn), sorted by
  // their place in the run; random draws stay aligned with the unperturbed run's.
  std::vector<MessagePerturbation> perturbations;
  bool record_send_kinds = false;  // keep each Send()'s body kind (send_kinds())
};

struct SimCounters {
  uint64_t messages_sent = 0;        // Send() calls
  uint64_t messages_dropped = 0;     // lost: random drop, partition, crash, queue bound
  uint64_t messages_duplicated = 0;  // extra copies scheduled
  uint64_t messages_delivered = 0;   // handed to a receiver
  uint64_t timers_fired = 0;
};

class SimNetwork {
 public:
  explicit SimNetwork(SimNetworkOptions options);
  ~SimNetwork();
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  // The transport of `node`, created on first use and owned by the network.
  Transport* Endpoint(NodeId node);

  uint64_t now_ms() const { return now_ms_; }

  // Runs `callback` at now_ms() + delay_ms (after everything already queued for that time).
  void After(uint64_t delay_ms, std::function<void()> callback);

  // Runs every event with time <= time_ms, then sets the clock to time_ms.
  void RunUntil(uint64_t time_ms);
  // Runs events until the queue is empty or the clock would pass time_limit_ms.
  // True when the queue emptied.
  bool RunUntilQuiet(uint64_t time_limit_ms);
  // Runs the next event; false when the queue is empty.
  bool RunOne();
  bool empty() const { return events_.empty(); }

  // Fault injection.
  void SetDelay(uint64_t delay_min_ms, uint64_t delay_max_ms);
  void SetLoss(uint32_t drop_per_million, uint32_t duplicate_per_million);
  // Nodes in different sets cannot talk; nodes in no set form one more set together.
  void Partition(const std::vector<std::vector<NodeId>>& sets);
  void Heal();
  // A host that stops (power lost) or a process that hangs for good: nothing tells the peers.
  void Crash(NodeId node);
  // A process killed (kill -9, a segfault): crashed as by Crash, and its kernel closes its
  // connections, so every peer it can reach hears of it one link delay later
  // (Transport::SetLinkWatcher, up = false). A connection reset loses what was in flight on it:
  // each peer, with probability 1/2, loses every message the node sent it still in flight.
  void Kill(NodeId node);
  // Back up with a new incarnation; the peers that heard of its kill see its link come back.
  void Restart(NodeId node);
  bool crashed(NodeId node) const { return crashed_.count(node) > 0; }
  const SimNetworkOptions& options() const { return options_; }

  const SimCounters& counters() const { return counters_; }
  // A hash of every delivery (time, from, to, envelope bytes): same seed, same trace.
  uint64_t trace_hash() const { return trace_hash_; }
  // The messages SimNetworkOptions::perturbations singled out so far ("" for none): kind,
  // sender, receiver, time and what was done, "; then " between them.
  const std::string& perturbed() const { return perturbed_; }
  const std::string& perturbed_kind() const { return perturbed_kind_; }  // the first's body
  // MessagePerturbation::crash: `hook(sender, restart_ms)` is called right after the message is
  // sent; true: the sender is crashed at once (Crash), and the hook's owner does the rest (it
  // may not destroy the sender's process from inside its send). False: the run's rules forbid it.
  void SetPerturbHook(std::function<bool(NodeId, uint64_t)> hook) {
    perturb_hook_ = std::move(hook);
  }
  uint32_t perturb_crashes() const { return perturb_crashes_; }  // senders crashed so far
  // With SimNetworkOptions::record_send_kinds: the body of every Send() so far, in order (the
  // Envelope's body field number; 0: none).
  const std::vector<uint8_t>& send_kinds() const { return send_kinds_; }
  Rng* rng() { return &rng_; }

 private:
  class SimEndpoint;
  struct Event {
    NodeId from = 0;
    NodeId to = 0;
    uint64_t incarnation = 0;  // of `to` when sent; a restart makes the message stale
    bool is_timer = false;
    wire::Envelope envelope;
    std::function<void()> callback;
  };
  using EventKey = std::pair<uint64_t, uint64_t>;  // (time_ms, insertion sequence)

  void Send(NodeId from, NodeId to, wire::Envelope envelope);
  // Schedules a sent message (and its copy), unless it is lost.
  void Enqueue(NodeId from, NodeId to, wire::Envelope envelope, bool drop, bool duplicate,
               uint64_t delay_ms, uint64_t duplicate_delay_ms);
  // A message singled out: what to do to it, noted in perturbed_.
  void Perturb(const MessagePerturbation& perturbation, NodeId from, NodeId to,
               const wire::Envelope& envelope, bool* drop, bool* duplicate, uint64_t* delay_ms,
               uint64_t* duplicate_delay_ms);
  // Tells every live peer of `node` that its link to it went down or came up, a delay later.
  void NotifyLinks(NodeId node, bool up);
  void Schedule(uint64_t time_ms, Event event);
  void Deliver(Event& event);
  bool Connected(NodeId a, NodeId b) const;
  void Hash(uint64_t value);

  SimNetworkOptions options_;
  Rng rng_;
  uint64_t now_ms_ = 0;
  uint64_t sequence_ = 0;
  std::map<EventKey, Event> events_;
  std::map<NodeId, std::unique_ptr<SimEndpoint>> endpoints_;
  std::set<NodeId> crashed_;
  std::set<NodeId> killed_;  // crashed by Kill, not restarted since
  std::map<NodeId, uint64_t> incarnation_;
  std::map<NodeId, size_t> partition_of_;  // empty = no partition
  SimCounters counters_;
  uint64_t trace_hash_ = 1469598103934665603ULL;
  std::string perturbed_;
  std::string perturbed_kind_;
  std::function<bool(NodeId, uint64_t)> perturb_hook_;
  uint32_t perturb_crashes_ = 0;
  size_t next_perturbation_ = 0;  // into options_.perturbations
  std::vector<uint8_t> send_kinds_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_SIM_NETWORK_H_
