#include "membership/joining.h"

#include <algorithm>
#include <iterator>

namespace cohort::membership {

JoinTimeouts JoinTimeoutsFor(uint64_t suspect_timeout_ms, uint64_t exclude_timeout_ms) {
  return {std::max<uint64_t>(4 * suspect_timeout_ms, 200),
          std::max<uint64_t>(exclude_timeout_ms, 2000)};
}

void Joiner::JoinedView(uint64_t view_id, uint64_t now_ms, NodeId provider) {
  awaiting_state_ = true;
  state_view_ = view_id;
  awaiting_since_ms_ = now_ms;
  progress_ms_ = now_ms;
  provider_ = provider;
}

Joiner::Action Joiner::Tick(uint64_t now_ms, bool member, bool behind, bool provider_suspected) {
  if (awaiting_state_ && now_ms >= awaiting_since_ms_ + timeouts_.state_patience_ms) {
    // Still nothing delivered without the state: ask to be re-added (with a state) and go on
    // waiting; a late state of this view is still taken.
    awaiting_since_ms_ = now_ms;
    last_request_ms_ = now_ms;
    return Action::kStateLateAsk;
  }
  if (awaiting_state_ && (provider_ == 0 || provider_suspected) &&
      now_ms >= std::max(progress_ms_, last_request_ms_) + timeouts_.retry_ms) {
    // The provider is suspected (the aggressive timeout, 004 section 5) and has sent nothing for
    // a while: it has likely crashed, and the state would come only after the patience (up to an
    // exclusion timeout, during which this node counts in the view without answering). Asking
    // now lets a member that suspects it too re-add this node with its own state. A slow but
    // live provider keeps sending chunks, so a suspicion alone does not restart its transfer.
    // Or no provider is known: told its view by a member that did not add it (a member that
    // missed a view change), no state may be on its way at all; if one is, the members do not
    // re-add it for the asking (Admission::ShouldPropose), and its chunks hold this back
    // (refound_survivors_sim_test's randomised case, seed 315: a member told view 2 waited
    // 10 s, the state patience, for a state nobody owed it).
    last_request_ms_ = now_ms;
    return Action::kStateLateAsk;
  }
  if (awaiting_state_ && !member && want_member_ &&
      now_ms >= last_request_ms_ + timeouts_.retry_ms) {
    // Excluded while it waited for the state of the view that added it (a view change agreed
    // meanwhile removed it, e.g. on its silence before it was added): no state makes it a member
    // now, so it asks to be added again at once rather than after the state patience (cohort-sim
    // --stack --link-ms 50 --calls-per-step 3 --nodes 5 --leaves --streams-break, seed 140001: a
    // restarted node out of the view for 1.9 s with nothing cut off, 10 one-way calls given up).
    last_request_ms_ = now_ms;
    return Action::kAskToJoin;
  }
  if (awaiting_state_ || now_ms < last_request_ms_ + timeouts_.retry_ms) return Action::kNone;
  // Behind: first a chance to catch up through the others' retired order, then ask to be re-added.
  bool long_behind = behind && now_ms >= behind_since_ms_ + 4 * timeouts_.retry_ms;
  if (!behind) behind_since_ms_ = now_ms;
  bool outside = !member && want_member_;
  // A node outside the view that does not want in (it left) has nothing to ask, behind or not.
  if (!member && !want_member_) return Action::kNone;
  if (!long_behind && !outside) return Action::kNone;
  last_request_ms_ = now_ms;
  return Action::kAskToJoin;
}

NodeId Admission::ProviderOf(NodeId node, uint64_t view) const {
  auto added = added_.find(node);
  return added == added_.end() || added->second.view != view ? 0 : added->second.provider;
}

void Admission::ProviderGone(NodeId provider) {
  for (auto it = added_.begin(); it != added_.end();) {
    it = it->second.provider == provider ? added_.erase(it) : std::next(it);
  }
}

bool Admission::ShouldPropose(NodeId node, bool is_member, bool sending_state, uint64_t now_ms,
                              uint64_t view, bool provider_suspected) const {
  if (sending_state) return false;
  if (provider_suspected) return true;  // its state may never come from there
  auto added = added_.find(node);
  return !(is_member && added != added_.end() && added->second.view == view &&
           now_ms < added->second.at_ms + timeouts_.state_patience_ms);
}

bool Admission::NoticeDue(NodeId node, uint64_t now_ms) {
  uint64_t& last_ms = last_notice_ms_[node];
  if (last_ms != 0 && now_ms < last_ms + 100) return false;
  last_ms = now_ms;
  return true;
}

}  // namespace cohort::membership
