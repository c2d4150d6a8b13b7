// Two-timeout failure detection (004 section 5): a short suspicion timeout lets consensus abandon
// a silent coordinator; a long exclusion timeout removes a member from the view. A member that was
// suspected but is heard again is trusted again and is not excluded.
//
// The suspicion timeout adapts per member, as in Chandra and Toueg's construction of an
// eventually accurate detector under partial synchrony (004 section 5 rests on it): a member
// suspected for its silence and then heard again was suspected wrongly, so its timeout doubles
// (up to 16 x the configured one, and at most a quarter of the exclusion timeout). After an
// exclusion timeout with no such mistake it halves again, back to the configured one. Under a
// load that delays every heartbeat (4 MiB payloads on 2 loaded cores) the suspicions stop after a
// few mistakes, instead of each one starting a round or an epoch whose messages delay the
// heartbeats further (large_payload_e2e_test failed so in CI, session 60).
//
// Only silence this node watched counts: with own_pause_ms set, a gap in its own ticks longer
// than that (it was starved of CPU, frozen, or busy with one long piece of work) is added to
// every member's last hearing, since their messages may wait unread in its sockets meanwhile (as
// ManagerWatch does for request managers).
//
// Pure state machine: time comes in as `now_ms`, hearing a member comes in through Heard().
// Event-driven groups (003 section 3) switch monitoring off while idle: no suspicion then.
#ifndef COHORT_MEMBERSHIP_FAILURE_DETECTOR_H_
#define COHORT_MEMBERSHIP_FAILURE_DETECTOR_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace cohort::membership {

using NodeId = uint32_t;

struct FailureDetectorOptions {
  uint64_t suspect_timeout_ms = 50;
  uint64_t exclude_timeout_ms = 10000;
  // A gap between Ticks longer than this is this node's own pause, not its members' silence
  // (0: the owner ticks only when it likes, every gap is watched time).
  uint64_t own_pause_ms = 0;
};

struct SuspicionEvent {
  enum class Kind { kSuspect, kTrust, kExclude };
  NodeId node = 0;
  Kind kind = Kind::kSuspect;
  uint64_t silent_ms = 0;  // how long the node had been silent
  bool link_down = false;  // kSuspect: suspected because its connection closed (LinkDown)
  uint64_t raised_to_ms = 0;  // kTrust: the node's suspicion timeout was raised to this (0: not)
};

class FailureDetector {
 public:
  FailureDetector(FailureDetectorOptions options, const std::vector<NodeId>& monitored,
                  uint64_t now_ms);

  // A message of any kind arrived from `node`.
  void Heard(NodeId node, uint64_t now_ms, std::vector<SuspicionEvent>* out);
  void Tick(uint64_t now_ms, std::vector<SuspicionEvent>* out);

  // The transport lost its connection to `node` (a killed process's socket closes: its kernel
  // sends a FIN or a reset at once). The next Tick suspects the node, without waiting out the
  // suspicion timeout (with monitoring off: the first Tick once it resumes). Only the aggressive
  // timeout is short-cut (004 section 5: a wrong suspicion costs consensus a round); exclusion
  // still waits for the exclusion timeout of silence. A partition or a host that loses power
  // closes nothing: the timeout finds those.
  void LinkDown(NodeId node);
  // The connection is back (hearing the node says so too): suspicion waits for the timeout again.
  void LinkUp(NodeId node);

  // Monitoring off: nobody becomes suspected. Turning it on restarts the silence count of every
  // member not suspected at now; a suspected member stays suspected, and its silence counts only
  // the time it was watched (an idle event-driven group watches nobody: a member that was idle
  // too is not excluded for that at the next request, a crashed one is once it has been watched
  // in silence for the exclusion timeout in all).
  void SetMonitoring(bool on, uint64_t now_ms);
  void SetMonitored(const std::vector<NodeId>& monitored, uint64_t now_ms);
  // New timeouts (a configuration reload); they apply from the next Tick.
  void SetOptions(FailureDetectorOptions options) { options_ = options; }
  // What wrong suspicions taught about each monitored node (its raised suspicion timeout): a new
  // view's detector starts from it, since a view change does not make a slow member faster.
  struct Learned {
    uint64_t timeout_ms = 0;
    uint64_t raised_ms = 0;
  };
  std::map<NodeId, Learned> learned() const;
  void Learn(const std::map<NodeId, Learned>& learned);

  bool suspected(NodeId node) const;
  // The silence after which `node` is suspected now (the configured timeout, or more after
  // wrong suspicions); 0 for a node not monitored.
  uint64_t suspect_timeout_ms(NodeId node) const;
  bool excluded(NodeId node) const;
  size_t trusted_count() const;  // monitored nodes currently not suspected
  // Monitored nodes not suspected, or suspected but heard within the last `window_ms`: a call
  // is refused as unmeetable only on members silent for longer (the admission grace, so a
  // member late under load for a moment is not taken for a crashed one).
  size_t heard_within_count(uint64_t now_ms, uint64_t window_ms) const;
  bool monitoring() const { return monitoring_; }

 private:
  struct State {
    uint64_t last_heard_ms = 0;
    bool suspected = false;
    bool excluded = false;
    bool link_down = false;  // since LinkDown, until LinkUp or Heard
    bool suspected_silent = false;  // suspected for its silence, not for a closed connection
    uint64_t timeout_ms = 0;        // raised suspicion timeout (0: the configured one)
    uint64_t raised_ms = 0;         // when timeout_ms last changed
  };
  uint64_t TimeoutOf(const State& state) const;
  uint64_t MaxTimeout() const;

  FailureDetectorOptions options_;
  std::map<NodeId, State> states_;
  bool monitoring_ = true;
  uint64_t monitoring_off_ms_ = 0;  // when monitoring was last turned off
  uint64_t last_tick_ms_ = 0;       // the last Tick while monitoring (0: none since it resumed)
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_FAILURE_DETECTOR_H_
