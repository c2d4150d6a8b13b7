// Memory kept for reuse by the object that holds it (a map node, a shared batch): a copy of the
// holder starts without it, so two copies never share or fight over one (the exhaustive explorer
// copies protocol states, test/consensus_explorer.h). Reusing such memory instead of allocating
// per message or per instance is issue 7's first deliverable (omniORB2, 001 sections 5-6).
#ifndef COHORT_CONSENSUS_SPARE_H_
#define COHORT_CONSENSUS_SPARE_H_

#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/strings/string_view.h"

namespace cohort::consensus {

// Memory kept for reuse holds at most about this many bytes per object (a batch, a reply, a
// frame): past it, the memory goes with the message, so a burst of large messages does not
// leave every holder keeping the largest.
inline constexpr size_t kSpareBytesMax = 64 * 1024;

template <typename T>
struct Spare {
  Spare() = default;
  Spare(const Spare&) {}
  Spare& operator=(const Spare&) { return *this; }
  Spare(Spare&&) = default;
  Spare& operator=(Spare&&) = default;

  T value{};
};

// Blocks a container freed, kept for its next allocations of the same size: a std::map or
// absl::btree_map that holds one entry at a time (one call in flight) otherwise allocates and
// frees a node (a btree its root) per entry.
class SparePool {
 public:
  static constexpr int kKept = 4;
  SparePool() = default;
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;
  ~SparePool() {
    for (int i = 0; i < count_; ++i) ::operator delete(kept_[i].block);
  }
  // A kept block of `bytes`, or nullptr.
  void* Take(size_t bytes) {
    for (int i = count_ - 1; i >= 0; --i) {
      if (kept_[i].bytes != bytes) continue;
      void* block = kept_[i].block;
      kept_[i] = kept_[--count_];
      return block;
    }
    return nullptr;
  }
  // Keeps `block` unless kKept are kept already (then the caller frees it).
  bool Keep(void* block, size_t bytes) {
    if (count_ == kKept || bytes > kSpareBytesMax) return false;
    kept_[count_++] = {block, bytes};
    return true;
  }

 private:
  struct Kept {
    void* block = nullptr;
    size_t bytes = 0;
  };
  Kept kept_[kKept];
  int count_ = 0;
};

// An allocator over a SparePool, shared by a container and its rebinds (its nodes). A copy of
// the container gets a pool of its own (select_on_container_copy_construction), as Spare above;
// a moved container takes its pool along. Not for containers used by several threads.
template <typename T>
class SpareAllocator {
 public:
  using value_type = T;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  SpareAllocator() : pool_(std::make_shared<SparePool>()) {}
  // Copied, never moved: a moved-from container (emptied, used again) keeps a pool.
  SpareAllocator(const SpareAllocator&) = default;
  SpareAllocator& operator=(const SpareAllocator&) = default;
  template <typename U>
  SpareAllocator(const SpareAllocator<U>& other) : pool_(other.pool_) {}  // NOLINT: rebinds

  T* allocate(size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned");
    if (void* kept = pool_->Take(n * sizeof(T))) return static_cast<T*>(kept);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* block, size_t n) {
    if (!pool_->Keep(block, n * sizeof(T))) ::operator delete(block);
  }
  SpareAllocator select_on_container_copy_construction() const { return SpareAllocator(); }

  template <typename U>
  bool operator==(const SpareAllocator<U>& other) const { return pool_ == other.pool_; }
  template <typename U>
  bool operator!=(const SpareAllocator<U>& other) const { return pool_ != other.pool_; }

 private:
  template <typename U>
  friend class SpareAllocator;
  std::shared_ptr<SparePool> pool_;
};

// A B-tree map whose nodes come from a SparePool: one that empties and fills again per message
// (one call in flight) does not free and allocate its root each time (issue 7).
template <typename K, typename V>
using SpareBtreeMap = absl::btree_map<K, V, std::less<K>, SpareAllocator<std::pair<const K, V>>>;
template <typename K>
using SpareBtreeSet = absl::btree_set<K, std::less<K>, SpareAllocator<K>>;

// Strings given back once used, whose memory holds the next copies of payloads: a delivery's
// payload, once the runtime has parsed it (TotalOrder::GiveBack), holds a later delivery's copy
// instead of each copy allocating its own (issue 7). Copies of the holder start without any.
class SpareStrings {
 public:
  explicit SpareStrings(size_t max_kept = 4) : max_kept_(max_kept) {}

  // An empty string, with a kept string's memory if one is kept.
  std::string Take() {
    std::string taken;
    if (!kept_.value.empty()) {
      taken.swap(kept_.value.back());
      kept_.value.pop_back();
      taken.clear();
    }
    return taken;
  }
  // A string holding `bytes`, in a kept string's memory if one is kept.
  std::string Copy(absl::string_view bytes) {
    std::string copy = Take();
    copy.assign(bytes.data(), bytes.size());
    return copy;
  }
  // Gives `*target`, a string about to be refilled, a kept string's memory if it has none of
  // its own (its contents are dropped).
  void Refill(std::string* target) {
    if (kept_.value.empty() || target->capacity() > std::string().capacity()) return;
    target->swap(kept_.value.back());
    kept_.value.pop_back();
    target->clear();
  }
  // Keeps `used`'s memory (its contents are dropped) unless max_kept are kept, it has none of
  // its own (a short string's is inline) or more than kSpareBytesMax.
  void Keep(std::string&& used) {
    if (kept_.value.size() >= max_kept_ || used.capacity() <= std::string().capacity() ||
        used.capacity() > kSpareBytesMax) {
      return;
    }
    if (kept_.value.capacity() == 0) kept_.value.reserve(max_kept_);
    kept_.value.emplace_back().swap(used);
  }
  size_t kept() const { return kept_.value.size(); }
  size_t max_kept() const { return max_kept_; }

 private:
  size_t max_kept_;
  Spare<std::vector<std::string>> kept_;
};

}  // namespace cohort::consensus

#endif  // COHORT_CONSENSUS_SPARE_H_
