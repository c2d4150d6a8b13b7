#include "membership/failure_detector.h"

#include <algorithm>

namespace cohort::membership {

FailureDetector::FailureDetector(FailureDetectorOptions options,
                                 const std::vector<NodeId>& monitored, uint64_t now_ms)
    : options_(options) {
  SetMonitored(monitored, now_ms);
}

void FailureDetector::SetMonitored(const std::vector<NodeId>& monitored, uint64_t now_ms) {
  std::map<NodeId, State> next;
  for (NodeId node : monitored) {
    auto it = states_.find(node);
    State fresh;
    fresh.last_heard_ms = now_ms;
    next[node] = it != states_.end() ? it->second : fresh;
  }
  states_ = std::move(next);
}

void FailureDetector::Heard(NodeId node, uint64_t now_ms, std::vector<SuspicionEvent>* out) {
  auto it = states_.find(node);
  if (it == states_.end()) return;
  State& state = it->second;
  // Heard again, even after its exclusion timeout fired: trusted again, and the exclusion is
  // re-armed. The view change already proposed may still remove it; if not, keeping it suspected
  // would leave two sides of a healed partition suspecting each other for good (each skipping
  // the other's sequencer epochs: cohort-sim --stack --seeds 6052 --ordering sequencer).
  if (state.suspected) {
    SuspicionEvent event{node, SuspicionEvent::Kind::kTrust, now_ms - state.last_heard_ms};
    if (state.suspected_silent) {
      // A wrong suspicion: a longer timeout for this node (header comment).
      const uint64_t raised = std::min(2 * TimeoutOf(state), MaxTimeout());
      if (raised > TimeoutOf(state)) {
        state.timeout_ms = raised;
        event.raised_to_ms = raised;
      }
      state.raised_ms = now_ms;
    }
    out->push_back(event);
    state.suspected = false;
    state.suspected_silent = false;
    state.excluded = false;
  }
  state.last_heard_ms = now_ms;
  state.link_down = false;  // it spoke: a connection is up
}

void FailureDetector::LinkDown(NodeId node) {
  auto it = states_.find(node);
  if (it != states_.end()) it->second.link_down = true;
}

void FailureDetector::LinkUp(NodeId node) {
  auto it = states_.find(node);
  if (it != states_.end()) it->second.link_down = false;
}

void FailureDetector::Tick(uint64_t now_ms, std::vector<SuspicionEvent>* out) {
  if (!monitoring_) return;
  // This node's own pause is nobody's silence (header comment).
  const uint64_t pause_ms =
      last_tick_ms_ != 0 && now_ms > last_tick_ms_ ? now_ms - last_tick_ms_ : 0;
  const bool paused = options_.own_pause_ms != 0 && pause_ms > options_.own_pause_ms;
  last_tick_ms_ = now_ms;
  for (auto& [node, state] : states_) {
    if (paused) state.last_heard_ms = std::min(now_ms, state.last_heard_ms + pause_ms);
    uint64_t silent_ms = now_ms > state.last_heard_ms ? now_ms - state.last_heard_ms : 0;
    if (state.timeout_ms != 0 && now_ms >= state.raised_ms + options_.exclude_timeout_ms) {
      // No wrong suspicion for an exclusion timeout: halve it again.
      state.timeout_ms = state.timeout_ms / 2 > options_.suspect_timeout_ms ? state.timeout_ms / 2
                                                                              : 0;
      state.raised_ms = now_ms;
    }
    const uint64_t timeout_ms = TimeoutOf(state);
    if (!state.suspected && (silent_ms >= timeout_ms || state.link_down)) {
      state.suspected = true;
      state.suspected_silent = silent_ms >= timeout_ms;
      out->push_back({node, SuspicionEvent::Kind::kSuspect, silent_ms, silent_ms < timeout_ms});
    }
    if (!state.excluded && silent_ms >= options_.exclude_timeout_ms) {
      state.excluded = true;
      out->push_back({node, SuspicionEvent::Kind::kExclude, silent_ms});
    }
  }
}

void FailureDetector::SetMonitoring(bool on, uint64_t now_ms) {
  if (on && !monitoring_) {
    const uint64_t idle_ms = now_ms > monitoring_off_ms_ ? now_ms - monitoring_off_ms_ : 0;
    for (auto& [node, state] : states_) {
      // Suspected: its silence goes on from where it stood when monitoring stopped.
      state.last_heard_ms = state.suspected ? state.last_heard_ms + idle_ms : now_ms;
    }
  } else if (!on && monitoring_) {
    monitoring_off_ms_ = now_ms;
  }
  if (on && !monitoring_) last_tick_ms_ = 0;  // the time off is not a pause of this node's
  monitoring_ = on;
}

bool FailureDetector::suspected(NodeId node) const {
  auto it = states_.find(node);
  return it != states_.end() && it->second.suspected;
}

uint64_t FailureDetector::suspect_timeout_ms(NodeId node) const {
  auto it = states_.find(node);
  return it == states_.end() ? 0 : TimeoutOf(it->second);
}

uint64_t FailureDetector::MaxTimeout() const {
  return std::max(options_.suspect_timeout_ms,
                  std::min(16 * options_.suspect_timeout_ms, options_.exclude_timeout_ms / 4));
}

// Within [configured, MaxTimeout()] whatever the options are now (a reload may change them).
uint64_t FailureDetector::TimeoutOf(const State& state) const {
  return std::clamp(state.timeout_ms, options_.suspect_timeout_ms, MaxTimeout());
}

std::map<NodeId, FailureDetector::Learned> FailureDetector::learned() const {
  std::map<NodeId, Learned> out;
  for (const auto& [node, state] : states_) {
    if (state.timeout_ms != 0) out[node] = {state.timeout_ms, state.raised_ms};
  }
  return out;
}

void FailureDetector::Learn(const std::map<NodeId, Learned>& learned) {
  for (const auto& [node, was] : learned) {
    auto it = states_.find(node);
    if (it == states_.end()) continue;
    it->second.timeout_ms = was.timeout_ms;
    it->second.raised_ms = was.raised_ms;
  }
}

bool FailureDetector::excluded(NodeId node) const {
  auto it = states_.find(node);
  return it != states_.end() && it->second.excluded;
}

size_t FailureDetector::trusted_count() const {
  size_t count = 0;
  for (const auto& [node, state] : states_) count += state.suspected ? 0 : 1;
  return count;
}

size_t FailureDetector::heard_within_count(uint64_t now_ms, uint64_t window_ms) const {
  size_t count = 0;
  for (const auto& [node, state] : states_) {
    count += !state.suspected || now_ms < state.last_heard_ms + window_ms ? 1 : 0;
  }
  return count;
}

}  // namespace cohort::membership
