// A small ordered set of node ids (a group's suspects, a round's ACKs and NACKs): sorted inline
// storage, no allocation up to kInline ids. A consensus instance is made per ordered batch, and
// each std::set node of its ACKs was an allocation (issue 7: no per-message allocation).
#ifndef COHORT_CONSENSUS_NODE_SET_H_
#define COHORT_CONSENSUS_NODE_SET_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>

#include "absl/container/inlined_vector.h"

namespace cohort::consensus {

class NodeSet {
 public:
  using NodeId = uint32_t;
  static constexpr size_t kInline = 8;

  NodeSet() = default;
  explicit NodeSet(const std::set<NodeId>& ids) : ids_(ids.begin(), ids.end()) {}  // sorted

  // As std::set: true when `id` was not in the set.
  bool insert(NodeId id) {
    auto at = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (at != ids_.end() && *at == id) return false;
    ids_.insert(at, id);
    return true;
  }
  size_t erase(NodeId id) {
    auto at = std::lower_bound(ids_.begin(), ids_.end(), id);
    if (at == ids_.end() || *at != id) return 0;
    ids_.erase(at);
    return 1;
  }
  size_t count(NodeId id) const {
    return std::binary_search(ids_.begin(), ids_.end(), id) ? 1 : 0;
  }
  size_t size() const { return ids_.size(); }
  bool empty() const { return ids_.empty(); }
  void clear() { ids_.clear(); }
  // In increasing order, as a std::set's.
  auto begin() const { return ids_.begin(); }
  auto end() const { return ids_.end(); }

 private:
  absl::InlinedVector<NodeId, kInline> ids_;
};

// A small map from node ids, as NodeSet is a set: sorted inline pairs, no allocation up to
// NodeSet::kInline ids (a DECIDED or DECISION sent to each participant of an instance took a
// std::map node per member, issue 7).
template <typename V>
class NodeMap {
 public:
  using NodeId = NodeSet::NodeId;

  // As std::map: the value of `id`, made (value-initialised) if absent.
  V& operator[](NodeId id) {
    auto at = LowerBound(entries_, id);
    if (at == entries_.end() || at->first != id) at = entries_.insert(at, {id, V{}});
    return at->second;
  }
  auto find(NodeId id) const {
    auto at = LowerBound(entries_, id);
    return at != entries_.end() && at->first == id ? at : entries_.end();
  }
  size_t count(NodeId id) const { return find(id) != entries_.end() ? 1 : 0; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }
  // By increasing id, as a std::map's.
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  // The first entry whose id is not below `id`, in `entries` (this map's, const or not).
  template <typename Entries>
  static auto LowerBound(Entries& entries, NodeId id) {
    return std::lower_bound(entries.begin(), entries.end(), id,
                            [](const std::pair<NodeId, V>& entry, NodeId key) {
                              return entry.first < key;
                            });
  }

  absl::InlinedVector<std::pair<NodeId, V>, NodeSet::kInline> entries_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_NODE_SET_H_
