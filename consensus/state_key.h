// The bytes of a protocol state machine's StateKey (chandra_toueg.h, sequencer_order.h): every
// value fixed-width or length-prefixed, so that two different states never give the same key.
#ifndef COHORT_CONSENSUS_STATE_KEY_H_
#define COHORT_CONSENSUS_STATE_KEY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "consensus/node_set.h"
#include "google/protobuf/message_lite.h"

namespace cohort::consensus {

class StateKeyWriter {
 public:
  void Put(uint64_t value) { key_.append(reinterpret_cast<const char*>(&value), sizeof(value)); }
  void Put(const std::string& bytes) {
    Put(static_cast<uint64_t>(bytes.size()));
    key_.append(bytes);
  }
  void Put(const google::protobuf::MessageLite& message) { Put(message.SerializeAsString()); }
  // A set is its size and its values in order, a map its size and its pairs in order: the same
  // bytes for a std:: container, a B-tree or a NodeSet of the same entries.
  template <typename T>
  void Put(const std::set<T>& values) { PutEach(values); }
  template <typename T, typename Compare, typename Alloc>
  void Put(const absl::btree_set<T, Compare, Alloc>& values) { PutEach(values); }
  void Put(const NodeSet& values) { PutEach(values); }
  template <typename V>
  void Put(const NodeMap<V>& map) { PutPairs(map); }
  template <typename K, typename V>
  void Put(const std::map<K, V>& map) { PutPairs(map); }
  template <typename K, typename V, typename Compare, typename Alloc>
  void Put(const absl::btree_map<K, V, Compare, Alloc>& map) { PutPairs(map); }
  std::string Take() { return std::move(key_); }

 private:
  template <typename Set>
  void PutEach(const Set& values) {
    Put(static_cast<uint64_t>(values.size()));
    for (const auto& value : values) Put(value);
  }
  template <typename Map>
  void PutPairs(const Map& map) {
    Put(static_cast<uint64_t>(map.size()));
    for (const auto& [key, value] : map) {
      Put(key);
      Put(value);
    }
  }

  std::string key_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_STATE_KEY_H_
