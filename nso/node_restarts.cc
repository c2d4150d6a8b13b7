// Node: members that restarted (a new process, nothing remembered) while the view counts their
// earlier process. A member that refuses such a process's traffic tells it so, and the view is
// then over for it: it makes no order there (nso/group.cc Group::Flush) and asks to join
// (SendRestartNotices; the receiving side is Node::OnMembership's VIEW_NOTICE). When every other
// member of its view has so restarted, the member left with the state re-founds the group
// (RefoundIfLast); when several members are left but no majority, the one of them that
// delivered most does (TryRefound, SURVIVOR and REFOUND). Outside the fault model
// (RELIABILITY.md: fewer than half of a view fail at once); what it avoids is a group of
// restarted daemons replacing that state with nothing, or waiting for good.
#include <algorithm>
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
  membership.ForRestartedView(group->view_id());
  membership.restarted[from] = incarnation;
  return TryRefound(group, RefoundCause::kJoinRequest);
}

bool Node::TryRefound(Group* group, RefoundCause cause) {
  GroupMembership& membership = MembershipOf(group);
  membership.ForRestartedView(group->view_id());
  // Outside the fault model: a majority of the view restarted (together or in turn) and knows
  // nothing. The view cannot change (no majority of it is left), but the restarted members'
  // earlier processes are gone for good (each restarted: one daemon per node), so nothing can
  // be agreed in it any more, and the members left (the survivors) hold the only state left of
  // the group. One of them installs the next view by itself, re-adding every other member (the
  // restarted ones as their new processes) with its state, instead of the group waiting for
  // good or starting afresh with nothing. What the gone processes agreed without the survivors,
  // if anything, is lost with them. Not when its view is over for it (a later view exists, whose
  // state is newer; or it restarted itself) or it holds no state.
  if (group->ViewOver() || !CanGiveState(group) || membership.leaving()) return false;
  std::vector<NodeId> survivors{self_};
  std::vector<NodeId> others;  // re-added, as `processes`
  std::vector<uint64_t> processes;
  bool any_restarted = false;
  for (NodeId member : group->members()) {
    if (member == self_) continue;
    auto joined = membership.restarted.find(member);
    const uint64_t counted = group->MemberIncarnation(member);
    if (counted == 0) return false;  // its process unknown here
    if (joined != membership.restarted.end() && joined->second > counted) {
      // A later process (daemon incarnations grow: the wall clock at its start) asked to join,
      // so the counted one is gone; not a late message of an earlier one.
      any_restarted = true;
      processes.push_back(joined->second);
    } else if (!group->suspected(member)) {
      survivors.push_back(member);  // its counted process is heard (or not watched: idle)
      processes.push_back(counted);
    } else {
      return false;  // silent and not restarted: it may come back
    }
    others.push_back(member);
  }
  // With a majority of the view left, the view changes as usual (Node::OnJoinRequest).
  if (!any_restarted || survivors.size() >= group->members().size() / 2 + 1) return false;
  const std::string& name = group->name();
  const uint64_t delivered = delivered_seq_[name];
  if (survivors.size() > 1 && cause != RefoundCause::kInstructed) {
    // Several survivors: the one that delivered most re-founds (ties: the lowest id), so that
    // none of what a survivor applied is lost; the survivor with the lowest id chooses it from
    // what each says (SURVIVOR), once, and tells it (REFOUND). No survivor can deliver anything
    // new meanwhile (no majority), only catch up on another's decisions, up to the most any
    // delivered: a choice made on what a survivor said before catching up stays right.
    if (cause == RefoundCause::kJoinRequest) {
      for (NodeId survivor : survivors) {
        if (survivor == self_) continue;
        wire::Envelope offer;
        offer.mutable_membership()->set_kind(wire::MembershipMessage::SURVIVOR);
        offer.mutable_membership()->set_view_id(group->view_id());
        offer.mutable_membership()->set_delivered(delivered);
        group->SendTo(survivor, std::move(offer));
      }
    }
    if (*std::min_element(survivors.begin(), survivors.end()) != self_) return false;
    if (membership.refounder != 0 &&
        std::find(survivors.begin(), survivors.end(), membership.refounder) == survivors.end()) {
      // The one chosen restarted before it re-founded the group (it would have given this
      // member the next view; or it did, and that view died with it, unheard): choose again
      // among those left. A chosen one that is silent but not restarted still holds it back
      // (above: it may come back).
      Log("membership")->warn("group {}: node {}, chosen to re-found the group, restarted first: "
                              "choosing again", group->name(), membership.refounder);
      membership.refounder = 0;
    }
    if (membership.refounder == 0) {
      NodeId best = self_;
      uint64_t most = delivered;
      for (NodeId survivor : survivors) {
        if (survivor == self_) continue;
        auto offer = membership.survivor_offers.find(survivor);
        if (offer == membership.survivor_offers.end()) return false;  // not heard yet
        if (offer->second > most || (offer->second == most && survivor < best)) {
          best = survivor;
          most = offer->second;
        }
      }
      membership.refounder = best;
      Log("membership")->warn("group {}: the members of view {} other than [{}] restarted; of "
                              "those left, node {} delivered most ({} requests) and re-founds "
                              "the group", name, group->view_id(), absl::StrJoin(survivors, ","),
                              best, most);
    }
    if (membership.refounder != self_) {
      wire::Envelope refound;
      refound.mutable_membership()->set_kind(wire::MembershipMessage::REFOUND);
      refound.mutable_membership()->set_view_id(group->view_id());
      group->SendTo(membership.refounder, std::move(refound));
      return false;
    }
  }
  // Past any view a restarted member's process was told of and awaits the state of (its provider
  // died before giving it; no one holds that view's state: Group::NoteView), so that none takes
  // the new view for its own.
  const uint64_t to_view = std::max(group->view_id(), group->highest_view_named()) + 1;
  Log("membership")->warn("group {}: every other member of view {} restarted or is no majority "
                          "left with it ([{}] left): this member holds the most state left and "
                          "makes view {} with all of them (re-founded; anything the restarted "
                          "members' earlier processes agreed without it is lost)", name,
                          group->view_id(), absl::StrJoin(survivors, ","), to_view);
  if (InstallRefoundedView(group, others, processes, to_view, /*awaits_readded=*/false)) {
    group->NoteRefounded();
  }
  return true;
}

bool Node::InstallRefoundedView(Group* group, const std::vector<NodeId>& others,
                                const std::vector<uint64_t>& processes, uint64_t to_view,
                                bool awaits_readded) {
  wire::ViewChange change;
  change.set_from_view(group->view_id());
  for (size_t i = 0; i < others.size(); ++i) {
    change.add_remove(others[i]);
    change.add_add(others[i]);
    change.add_add_incarnations(processes[i]);
  }
  change.set_provider(self_);
  consensus::Deliveries next_view;
  if (!ApplyViewChange(group, change, &next_view, to_view, awaits_readded)) return false;
  DeliverAll(group, std::move(next_view));
  return true;
}

void Node::OnSurvivor(Group* group, NodeId from, const wire::Envelope& envelope) {
  const wire::MembershipMessage& message = envelope.membership();
  // Only from the process this view counts, about this view.
  if (!group->is_member() || !group->IsMember(from) || message.view_id() != group->view_id() ||
      envelope.incarnation() == 0 || envelope.incarnation() != group->MemberIncarnation(from)) {
    return;
  }
  GroupMembership& membership = MembershipOf(group);
  membership.ForRestartedView(group->view_id());
  if (message.kind() == wire::MembershipMessage::REFOUND) {
    TryRefound(group, RefoundCause::kInstructed);
    return;
  }
  membership.survivor_offers[from] = message.delivered();
  TryRefound(group, RefoundCause::kOffer);
}

}  // namespace cohort::nso
