// The group's views as its servants see them ("$view", Servant::OnViewChange). 003 section 3:
// view updates are atomic with respect to message deliveries (virtual synchrony). A view change
// is itself ordered in the old view (node_membership.cc), so a servant gets every delivery of the
// old view, then the new view, then the new view's deliveries, and at every member the view comes
// after the same deliveries. Where requests wait (for the state, or for a servant to attach) the
// views wait among them, in order.

#include <utility>

#include "nso/logging.h"
#include "nso/node.h"

namespace cohort::nso {

Node::WatchSeen Node::SeenBy(const Group& group) {
  WatchSeen seen{group.view_id(), {}};
  for (NodeId member : group.members()) {
    if (group.suspected(member)) seen.suspected.push_back(member);
  }
  return seen;
}

absl::StatusOr<uint64_t> Node::WatchGroup(const std::string& group, GroupWatcher on_change) {
  absl::StatusOr<GroupInfo> info = GroupDetails(group);
  if (!info.ok()) return info.status();
  const uint64_t id = next_watch_++;
  on_change(*std::move(info));
  watches_[id] = {group, SeenBy(*groups_.at(group)), std::move(on_change)};
  return id;
}

void Node::CheckWatches() {
  // At every tick: the group's details (names and all) are made only when something changed.
  for (auto it = watches_.begin(); it != watches_.end();) {
    Watch& watch = it->second;
    auto group = groups_.find(watch.group);
    if (group == groups_.end()) {  // the group went: the watch ends with it
      GroupWatcher on_change = std::move(watch.on_change);
      const absl::Status gone = GroupDetails(watch.group).status();
      it = watches_.erase(it);
      on_change(gone);
      continue;
    }
    WatchSeen seen = SeenBy(*group->second);
    if (seen != watch.told) {
      watch.told = std::move(seen);
      watch.on_change(GroupDetails(watch.group));
    }
    ++it;
  }
}

Node::ViewMark Node::CurrentViewMark(const Group* group) const {
  auto view = std::make_shared<api::ServantView>();
  for (NodeId member : group->members()) {  // sorted by node id (Group::InstallView)
    api::Member* out = view->add_members();
    out->set_name(NodeName(member));
    out->set_node(member);
  }
  view->set_in_view(group->is_member());
  return {group->view_id(), std::move(view)};
}

void Node::QueueViewMark(Group* group) {
  GroupMembership& membership = MembershipOf(group);
  ViewMark mark = CurrentViewMark(group);
  if (membership.joiner.awaiting_state()) {  // after the requests held for the state
    membership.buffered_views.emplace_back(membership.buffered.size(), std::move(mark));
    return;
  }
  ApplyViewMark(group, std::move(mark));
}

void Node::ApplyViewMark(Group* group, ViewMark mark) {
  GroupMembership& membership = MembershipOf(group);
  if (!membership.servant_lost && !HasServant(group->name()) && !membership.no_servant.empty()) {
    // After the requests that wait for a servant (ApplyRequest), given to it in order.
    membership.no_servant_views.emplace_back(membership.no_servant.size(), std::move(mark));
    return;
  }
  if (!membership.servant_lost) {
    for (const auto& [id, servant] : servants_) {
      if (servant.group == group->name() && servant.view_events) SendViewTo(group, servant, mark);
    }
  }
  membership.servant_view = std::move(mark);
}

void Node::SendViewTo(const Group* group, const Servant& servant, const ViewMark& mark) {
  ServantDelivery delivery{0, group->name(), kViewMethod, "", true, mark.view_id,
                           delivered_seq_[group->name()]};
  delivery.view = mark.view;
  servant.sink(std::move(delivery));
}

void Node::ReplayWithViews(Group* group, std::vector<wire::Request> requests, PendingViews views,
                           const std::function<void(const wire::Request&)>& apply) {
  size_t next_view = 0;
  for (size_t i = 0; i <= requests.size(); ++i) {
    while (next_view < views.size() && views[next_view].first <= i) {
      ApplyViewMark(group, std::move(views[next_view++].second));
    }
    if (i < requests.size()) apply(requests[i]);
  }
}

}  // namespace cohort::nso
