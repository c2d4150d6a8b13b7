// Node: members that restarted (a new process, nothing remembered) while the view counts their
// earlier process. A member that refuses such a process's traffic tells it so, and the view is
// then over for it: it makes no order there (nso/group.cc Group::Flush) and asks to join
// (SendRestartNotices; the receiving side is Node::OnMembership's VIEW_NOTICE). When every other
// member of its view has so restarted, the member left with the state re-founds the group
// (RefoundIfLast). Outside the fault model (RELIABILITY.md: fewer than half of a view fail at
// once); what it avoids is a group of restarted daemons replacing that state with nothing.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {

void Node::SendRestartNotices(Group* group) {
  for (const auto& [to, counted] : group->TakeRefusedRestarts()) {
    if (!MembershipOf(group).admission.NoticeDue(to, now_ms_)) continue;
    wire::Envelope envelope;
    envelope.mutable_membership()->set_kind(wire::MembershipMessage::VIEW_NOTICE);
    envelope.mutable_membership()->set_counted_incarnation(counted);
    group->SendTo(to, std::move(envelope));
  }
}

bool Node::RefoundIfLast(Group* group, NodeId from, uint64_t incarnation) {
  GroupMembership& membership = MembershipOf(group);
  if (membership.restarted_view != group->view_id()) {
    membership.restarted.clear();
    membership.restarted_view = group->view_id();
  }
  membership.restarted[from] = incarnation;
  // Outside the fault model: a majority of the view restarted (together or in turn) and knows
  // nothing. The view cannot change (no majority of it is left), but its other members'
  // processes are gone for good (each restarted: one daemon per node), so nothing can be
  // agreed in it any more, and this member holds the only state left of the group. It installs
  // the next view by itself, re-adding them (a new process each) with its state, instead of
  // the group waiting for good or starting afresh with nothing. What the gone processes agreed
  // without this member, if anything, is lost with them. Not when its view is over for it (a
  // later view exists, whose state is newer; or it restarted itself) or it holds no state.
  if (group->ViewOver() || !CanGiveState(group) || membership.leaving()) return false;
  std::vector<NodeId> others;
  std::vector<uint64_t> processes;
  for (NodeId member : group->members()) {
    if (member == self_) continue;
    auto joined = membership.restarted.find(member);
    const uint64_t counted = group->MemberIncarnation(member);
    // A later process (daemon incarnations grow: the wall clock at its start) asked to join,
    // so the counted one is gone; not a late message of an earlier one.
    if (joined == membership.restarted.end() || counted == 0 || joined->second <= counted) {
      return false;
    }
    others.push_back(member);
    processes.push_back(joined->second);
  }
  if (others.empty()) return false;
  Log("membership")->warn("group {}: every other member of view {} restarted ([{}]): this "
                          "member holds the only state left and makes view {} with them "
                          "(re-founded; anything their earlier processes agreed without it is "
                          "lost)", group->name(), group->view_id(), absl::StrJoin(others, ","),
                          group->view_id() + 1);
  wire::ViewChange change;
  change.set_from_view(group->view_id());
  for (size_t i = 0; i < others.size(); ++i) {
    change.add_remove(others[i]);
    change.add_add(others[i]);
    change.add_add_incarnations(processes[i]);
  }
  change.set_provider(self_);
  std::vector<consensus::Delivery> next_view;
  if (ApplyViewChange(group, change, &next_view)) DeliverAll(group, std::move(next_view));
  return true;
}

}  // namespace cohort::nso
