#include "nso/group_flow.h"

#include <algorithm>

namespace cohort::nso {

std::optional<bool> GroupFlow::Observe(uint64_t unread, uint64_t now_ms) {
  if (backlog_bytes_ == 0) return std::nullopt;
  const bool was = behind_;
  if (!behind_ && unread >= backlog_bytes_) {
    behind_ = true;
    times_behind_++;
  } else if (behind_ && unread <= backlog_bytes_ / 2) {
    behind_ = false;
  }
  if (behind_ != was || (behind_ && now_ms >= told_at_ms_ + kRefreshMs)) {
    told_at_ms_ = now_ms;
    return behind_;
  }
  return std::nullopt;
}

void GroupFlow::Heard(NodeId peer, bool behind, uint64_t now_ms) {
  if (behind) {
    peer_until_ms_[peer] = now_ms + kExpiryMs;
  } else {
    peer_until_ms_.erase(peer);
  }
}

bool GroupFlow::Holding(uint64_t now_ms) const {
  if (behind_) return true;
  return std::any_of(peer_until_ms_.begin(), peer_until_ms_.end(),
                     [now_ms](const auto& peer) { return now_ms < peer.second; });
}

std::vector<NodeId> GroupFlow::PeersBehind(uint64_t now_ms) const {
  std::vector<NodeId> behind;
  for (const auto& [peer, until_ms] : peer_until_ms_) {
    if (now_ms < until_ms) behind.push_back(peer);
  }
  return behind;
}

void GroupFlow::Retain(const std::vector<NodeId>& members) {
  for (auto it = peer_until_ms_.begin(); it != peer_until_ms_.end();) {
    if (std::find(members.begin(), members.end(), it->first) == members.end()) {
      it = peer_until_ms_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace cohort::nso
