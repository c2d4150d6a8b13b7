// Two-timeout failure detection (004 section 5): a short suspicion timeout lets consensus abandon
// a silent coordinator; a long exclusion timeout removes a member from the view. A member that was
// suspected but is heard again is trusted again and is not excluded.
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
};

struct SuspicionEvent {
  enum class Kind { kSuspect, kTrust, kExclude };
  NodeId node = 0;
  Kind kind = Kind::kSuspect;
  uint64_t silent_ms = 0;  // how long the node had been silent
  bool link_down = false;  // kSuspect: suspected because its connection closed (LinkDown)
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

  bool suspected(NodeId node) const;
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
  };
  FailureDetectorOptions options_;
  std::map<NodeId, State> states_;
  bool monitoring_ = true;
  uint64_t monitoring_off_ms_ = 0;  // when monitoring was last turned off
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_FAILURE_DETECTOR_H_
