// The calls a pipelined connection of the client stub waits for, by call number: shared by its
// two paths, call_stream.h (the gRPC stream) and local_calls.h (the daemon's local link), whose
// connections carry many outstanding calls (MinORB, 000) and match results to callers by number.
// A waiting caller's Pending lives on its stack; an asynchronous call's on the heap until Finish.
// Everything but Finish is guarded by the owner's mutex (as ReaderTurn, reader_turn.h), and
// `Connection` has a ReaderTurn `turn` counting its calls pending.
#ifndef COHORT_INVOCATION_PENDING_CALLS_H_
#define COHORT_INVOCATION_PENDING_CALLS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "invocation/backend.h"
#include "invocation/steady_time.h"

namespace cohort {

struct GroupReplies;

namespace internal {

// The asynchronous calls on a connection by the end of their wait: nobody waits for them, so the
// helper fails those whose wait passed without a result. The set's nodes are kept for the next
// calls (extract and insert again): a call in flight at a time allocated and freed one per call
// (issue 7). (consensus/spare.h's SpareAllocator keeps 4 blocks: with 16 calls in flight it
// left 0.5 allocations per call, a SpareBtreeSet 0.1; these spares leave none.)
class AsyncDeadlines {
 public:
  void Add(SteadyTime deadline, uint64_t call) {
    if (spare_.empty()) {
      by_time_.emplace(deadline, call);
      return;
    }
    Set::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.value() = {deadline, call};
    by_time_.insert(std::move(node));
  }
  void Remove(SteadyTime deadline, uint64_t call) {
    Set::node_type node = by_time_.extract({deadline, call});
    if (!node.empty() && spare_.size() < kSpareNodes) spare_.push_back(std::move(node));
  }
  // Whether a call's wait has passed by `now`.
  bool AnyBy(SteadyTime now) const { return !by_time_.empty() && by_time_.begin()->first <= now; }
  // The calls whose wait has passed by `now`, forgotten here.
  std::vector<uint64_t> TakeExpired(SteadyTime now) {
    std::vector<uint64_t> expired;
    while (!by_time_.empty() && by_time_.begin()->first <= now) {
      expired.push_back(by_time_.begin()->second);
      by_time_.erase(by_time_.begin());
    }
    return expired;
  }

 private:
  using Set = std::set<std::pair<SteadyTime, uint64_t>>;
  static constexpr size_t kSpareNodes = 256;  // a burst's worth; more are freed
  Set by_time_;
  std::vector<Set::node_type> spare_;
};

// `Replies` is GroupReplies (client.h), a parameter so that this header needs only its name.
template <typename Connection, typename Replies = GroupReplies>
class PendingCalls {
 public:
  using Done = std::function<void(absl::StatusOr<Replies>)>;

  struct Pending {
    Connection* connection = nullptr;
    uint64_t call = 0;
    bool done = false;          // guarded by the owner's mutex
    SteadyNotification noted;  // done: a caller waiting for it needs not the owner's mutex
    absl::StatusOr<Replies> result;
    // The caller's own memory for the replies (Client::InvokeInto): its reader fills it, and
    // `result` then holds an empty Replies (no allocation).
    Replies* into = nullptr;
    Done on_done;               // an asynchronous call: nobody waits, this takes the result
    // Or an asynchronous call into the caller's memory (`into` is its into()): its Pending
    // is the owner's, kept for the next such call (NewAsyncInto, FinishTaken).
    AsyncInto* async_into = nullptr;
    SteadyTime deadline;        // an asynchronous call's (it fails when its wait passes)

    bool asynchronous() const { return on_done || async_into != nullptr; }
  };

  // Registers `pending` (its connection, and for an asynchronous call `on_done` and `deadline`,
  // set) under the next call number, which it returns; its connection counts it pending.
  uint64_t Add(Pending* pending) {
    pending->call = next_call_++;
    calls_[pending->call] = pending;
    if (pending->asynchronous()) deadlines_.Add(pending->deadline, pending->call);
    ++pending->connection->turn.pending;
    return pending->call;
  }

  // Removes a pending call and marks it done; nullptr if it is not pending (a result for it is
  // dropped: its caller gave up, or it failed already).
  Pending* Take(uint64_t call) {
    auto it = calls_.find(call);
    if (it == calls_.end()) return nullptr;
    Pending* pending = it->second;
    calls_.erase(it);
    Forget(pending);
    --pending->connection->turn.pending;
    return pending;
  }

  // A Pending for an asynchronous call into the caller's memory (`call`), kept from an earlier
  // one when there is one (no allocation per call, issue 7). Under the owner's mutex.
  Pending* NewAsyncInto(Connection* connection, AsyncInto* call, SteadyTime deadline) {
    Pending* pending = nullptr;
    if (spare_.empty()) {
      pending = new Pending;
    } else {
      pending = spare_.back().release();
      spare_.pop_back();
    }
    pending->connection = connection;
    pending->done = false;
    pending->into = call->into();
    pending->async_into = call;
    pending->deadline = deadline;
    return pending;
  }
  // A taken asynchronous call into the caller's memory: its Pending is kept for the next one,
  // and its AsyncInto returned, for the owner to Finish (under its mutex or after). Under the
  // owner's mutex.
  AsyncInto* Recycle(Pending* pending) {
    AsyncInto* call = pending->async_into;
    pending->async_into = nullptr;
    pending->into = nullptr;
    pending->connection = nullptr;
    if (spare_.size() < kSparePending) {
      spare_.emplace_back(pending);
    } else {
      delete pending;
    }
    return call;
  }
  // Finish for a call taken under the owner's mutex, held still.
  void FinishTaken(Pending* pending, const absl::Status& status) {
    if (pending->async_into != nullptr) {
      Recycle(pending)->Finish(status);
      return;
    }
    Finish(pending, status);
  }

  // Hands a taken call its result and wakes its caller (with or without the owner's mutex); an
  // asynchronous call's `on_done` gets it, and its Pending is freed. (Not for a call into the
  // caller's memory: FinishTaken, Recycle.)
  static void Finish(Pending* pending, absl::StatusOr<Replies> result) {
    if (pending->on_done) {
      Done done = std::move(pending->on_done);
      delete pending;
      done(std::move(result));
      return;
    }
    pending->result = std::move(result);
    pending->noted.Notify();  // its caller may return at once: `pending` is not touched after
  }

  // Fails every call on `connection` with `status` (it broke), in the order they were made.
  void FailAll(Connection* connection, const absl::Status& status) {
    std::vector<Pending*> failed;
    for (const auto& [call, pending] : calls_) {
      if (pending->connection == connection) failed.push_back(pending);
    }
    std::sort(failed.begin(), failed.end(),
              [](const Pending* a, const Pending* b) { return a->call < b->call; });
    for (Pending* pending : failed) {
      calls_.erase(pending->call);
      Forget(pending);
    }
    connection->turn.pending = 0;
    for (Pending* pending : failed) FinishTaken(pending, status);
  }

  // Fails with `status()` the asynchronous calls whose wait has passed by `now`; true if there were
  // any (the daemon answers every call by its deadline, and the wait has slack past it: it is
  // stuck, and the owner resets the connection).
  bool FailExpired(SteadyTime now, absl::Status (*status)()) {
    if (!deadlines_.AnyBy(now)) return false;  // the usual case: no status made (allocated)
    const absl::Status failed = status();
    std::vector<uint64_t> expired = deadlines_.TakeExpired(now);
    for (uint64_t call : expired) {
      if (Pending* pending = Take(call)) FinishTaken(pending, failed);
    }
    return !expired.empty();
  }

 private:
  void Forget(Pending* pending) {
    if (pending->asynchronous()) deadlines_.Remove(pending->deadline, pending->call);
    pending->done = true;
  }

  // A hash map: a call's entry, made and erased per call, allocates nothing once it has grown (a
  // std::map allocated a node per call, issue 7).
  absl::flat_hash_map<uint64_t, Pending*> calls_;
  AsyncDeadlines deadlines_;
  uint64_t next_call_ = 1;
  static constexpr size_t kSparePending = 256;
  std::vector<std::unique_ptr<Pending>> spare_;  // NewAsyncInto's, kept
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_PENDING_CALLS_H_
