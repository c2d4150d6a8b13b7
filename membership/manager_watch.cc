#include "membership/manager_watch.h"

#include <algorithm>
#include <cstdint>

namespace cohort::membership {

ManagerWatch::Actions ManagerWatch::Tick(uint64_t now_ms, const std::map<NodeId, Use>& in_use) {
  Actions actions;
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
    if (silent_for >= use.silence_ms) {
      actions.silent.push_back(node);
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
