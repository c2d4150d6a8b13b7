#include "membership/view.h"

#include <algorithm>

namespace cohort::membership {
namespace {

bool Contains(const std::vector<NodeId>& nodes, NodeId node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

}  // namespace

std::optional<NextView> ApplyChange(const View& current, const ViewChangeProposal& change) {
  if (change.from_view != current.id) return std::nullopt;
  NextView next;
  next.view.id = std::max(current.id + 1, change.to_view);
  for (NodeId member : current.members) {
    if (!Contains(change.remove, member)) {
      next.view.members.push_back(member);
    } else if (!Contains(change.add, member)) {
      next.removed.push_back(member);
    }
  }
  for (NodeId node : change.add) {
    next.view.members.push_back(node);
    if (!Contains(next.joiners, node)) next.joiners.push_back(node);
  }
  std::sort(next.view.members.begin(), next.view.members.end());
  next.view.members.erase(std::unique(next.view.members.begin(), next.view.members.end()),
                          next.view.members.end());
  if (next.view.members.empty()) return std::nullopt;
  return next;
}

}  // namespace cohort::membership
