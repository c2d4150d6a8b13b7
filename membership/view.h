// Group views and their changes (004 section 5; 003 section 3). A view is numbered; the next view
// is computed from a ViewChange that was delivered in the total order of the current view, so
// every member that installs view v + 1 computes the same members from the same change, after the
// same deliveries of view v (virtual synchrony).
//
// Pure functions: no I/O, no clock.
#ifndef COHORT_MEMBERSHIP_VIEW_H_
#define COHORT_MEMBERSHIP_VIEW_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace cohort::membership {

using NodeId = uint32_t;

struct View {
  uint64_t id = 1;
  std::vector<NodeId> members;  // sorted, unique
  // Which process (daemon incarnation) of each member the view counts, in the order of
  // `members` (0 or missing: unknown). Filled where a joiner is told the view (NEW_VIEW, state
  // chunks: nso/group.h Group::MemberIncarnation); ApplyChange leaves it empty.
  std::vector<uint64_t> incarnations;

  // The process the view counts of `node` (0: unknown, or no member).
  uint64_t IncarnationOf(NodeId node) const {
    for (size_t i = 0; i < members.size() && i < incarnations.size(); ++i) {
      if (members[i] == node) return incarnations[i];
    }
    return 0;
  }
};

// A proposed change of the view `from_view`: exclusions, leaves and joins at once. A restarted
// member (new incarnation) is removed and added in the same change, and gets the state again.
struct ViewChangeProposal {
  uint64_t from_view = 0;
  std::vector<NodeId> remove;
  std::vector<NodeId> add;
  NodeId provider = 0;  // the member that sends the state to the joiners (the proposer)
  // The id of the next view; 0 (the usual): from_view + 1. Past every view heard of when a
  // member re-founds the group (nso/node_restarts.cc): a view named only by processes that await
  // its state is passed over, and none of them may take the new view for the one it is in.
  uint64_t to_view = 0;
};

struct NextView {
  View view;
  std::vector<NodeId> removed;  // members of the old view that are gone (not re-added)
  std::vector<NodeId> joiners;  // members that need the state (added, or removed and re-added)
};

// The view that follows `current` after `change` is delivered, or nullopt when the change is
// stale (it names another view: several members may propose the same exclusion, only the first
// delivered applies) or would leave the group empty.
std::optional<NextView> ApplyChange(const View& current, const ViewChangeProposal& change);

// 004 section 5 (primary partition): `count` members out of a view of `view_size` may decide.
inline bool IsMajority(size_t count, size_t view_size) { return count >= view_size / 2 + 1; }

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_VIEW_H_
