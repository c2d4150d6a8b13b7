// The daemon's stall warning: a group whose work waits and makes no progress for 2 s gets one
// warning line (at most every 5 s) saying where its order and its deliveries stand. Nothing is
// changed by it; it names the stuck part when a replica stops applying (issue 6 diagnostics).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {
namespace {
constexpr uint64_t kStallMs = 2000;
constexpr uint64_t kWarnEveryMs = 5000;
}  // namespace

void Node::TickWatchdog(Group* group, size_t open) {
  if (!group->is_member()) return;
  auto found = membership_.find(group->name());  // none for an idle group: nothing waits
  const bool order_waits = group->HasPending();
  const bool requests_wait = found != membership_.end() && (!found->second.buffered.empty() ||
                                                            !found->second.no_servant.empty());
  const bool work_waits = order_waits || requests_wait || open > 0;
  if (!work_waits) {
    if (found != membership_.end()) found->second.stall_clock.Observe(false, 0, now_ms_);
    return;
  }
  GroupMembership& membership = membership_[group->name()];
  const uint64_t stalled_ms =
      membership.stall_clock.Observe(true, group->last_progress_ms(), now_ms_);
  if (stalled_ms < kStallMs) return;
  if (membership.stall_warned_ms != 0 && now_ms_ < membership.stall_warned_ms + kWarnEveryMs) return;
  membership.stall_warned_ms = now_ms_;
  // Flow control (nso/group_flow.h) holds new requests on purpose: said, with who holds them.
  std::string flow;
  if (group->held_count() > 0 || group->flow_holding()) {
    std::vector<std::string> behind;
    if (group->servants_behind()) behind.push_back("this member");
    for (NodeId peer : group->peers_behind()) behind.push_back(NodeName(peer));
    flow = absl::StrCat(", ", group->held_count(), " requests held by flow control (servants "
                        "behind at: ", behind.empty() ? "none now" : absl::StrJoin(behind, ", "),
                        ")");
  }
  Log("group")->warn(
      "group {}: no delivery for {} ms in view {} while work waits: {}; {} requests held for the "
      "state ({}), {} for a servant, {} deliveries awaiting the servant's answer{}{}{}",
      group->name(), stalled_ms, group->view_id(), group->DescribeOrder(),
      membership.buffered.size(),
      membership.joiner.awaiting_state() ? "awaiting state" : "state installed",
      membership.no_servant.size(), open, HasServant(group->name()) ? "" : ", no servant attached",
      membership.servant_lost ? ", servant lost (leaving)" : "", flow);
}

}  // namespace cohort::nso
