#include "membership/manager_watch.h"

#include <algorithm>
#include <cstdint>

namespace cohort::membership {

void ManagerWatch::Heard(NodeId node, uint64_t now_ms) {
  auto it = watched_.find(node);
  if (it != watched_.end()) it->second.heard_ms = now_ms;
  auto reported = reported_.find(node);
  if (reported == reported_.end()) return;
  // Reported silent, and yet it speaks: a wrong report (header comment).
  Raised& raised = raised_[node];
  raised.factor = std::min<uint32_t>(2 * raised.factor, 8);
  raised.since_ms = now_ms;
  raised.calm_ms = reported->second.calm_ms;
  reported_.erase(reported);
}

uint32_t ManagerWatch::allowance_factor(NodeId node) const {
  auto it = raised_.find(node);
  return it == raised_.end() ? 1 : it->second.factor;
}

ManagerWatch::Actions ManagerWatch::Tick(uint64_t now_ms, const std::map<NodeId, Use>& in_use) {
  Actions actions;
  for (auto it = raised_.begin(); it != raised_.end();) {
    Raised& raised = it->second;
    if (now_ms >= raised.since_ms + raised.calm_ms) {
      raised.factor /= 2;
      raised.since_ms = now_ms;
    }
    it = raised.factor <= 1 ? raised_.erase(it) : std::next(it);
  }
  for (auto it = reported_.begin(); it != reported_.end();) {
    const bool calm = now_ms >= it->second.at_ms + it->second.calm_ms;
    it = calm ? reported_.erase(it) : std::next(it);
  }
  // A gap in our own ticks longer than the shortest probe period (at least 2 ms): this node was
  // paused, and its managers' messages may wait unread in its sockets. Nobody is silent for that.
  uint64_t shortest_probe_ms = UINT64_MAX;
  for (const auto& [node, use] : in_use) {
    shortest_probe_ms = std::min(shortest_probe_ms, use.probe_ms);
  }
  const bool paused = last_tick_ms_ != 0 && !in_use.empty() &&
                      now_ms > last_tick_ms_ + std::max<uint64_t>(shortest_probe_ms, 2);
  last_tick_ms_ = now_ms;
  for (auto it = watched_.begin(); it != watched_.end();) {
    it = in_use.count(it->first) ? std::next(it) : watched_.erase(it);
  }
  for (const auto& [node, use] : in_use) {
    auto [it, added] = watched_.try_emplace(node);
    Watched& watched = it->second;
    if (added || paused) watched.heard_ms = std::max(watched.heard_ms, now_ms);
    const uint64_t silent_for = now_ms - std::min(now_ms, watched.heard_ms);
    const uint64_t silence_ms =
        std::max(use.silence_ms, std::min(use.silence_ms * allowance_factor(node), use.calm_ms));
    if (silent_for >= silence_ms) {
      actions.silent.push_back(node);
      reported_[node] = {now_ms, use.calm_ms};
      watched_.erase(it);
      continue;
    }
    const uint64_t last = std::max(watched.heard_ms, watched.probed_ms);
    if (silent_for >= use.probe_ms && now_ms >= last + use.probe_ms) {
      watched.probed_ms = now_ms;
      actions.probe.push_back(node);
    }
  }
  return actions;
}

}  // namespace cohort::membership
