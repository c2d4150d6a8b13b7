#include "membership/failure_detector.h"

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
    next[node] = it != states_.end() ? it->second : State{now_ms, false, false};
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
    out->push_back({node, SuspicionEvent::Kind::kTrust, now_ms - state.last_heard_ms});
    state.suspected = false;
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
  for (auto& [node, state] : states_) {
    uint64_t silent_ms = now_ms > state.last_heard_ms ? now_ms - state.last_heard_ms : 0;
    if (!state.suspected && (silent_ms >= options_.suspect_timeout_ms || state.link_down)) {
      state.suspected = true;
      out->push_back({node, SuspicionEvent::Kind::kSuspect, silent_ms,
                      silent_ms < options_.suspect_timeout_ms});
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
  monitoring_ = on;
}

bool FailureDetector::suspected(NodeId node) const {
  auto it = states_.find(node);
  return it != states_.end() && it->second.suspected;
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
