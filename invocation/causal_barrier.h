// Causality between related requests of overlapping groups (003 section 4.4, figure 7): a client
// NSO that sent m1 to group gy and then sends m2 to group gx must not let m2 be delivered before
// m1 is ordered in gy, or a member of gx reacting to m2 with m3 in gy could see m3 ordered before
// m1. The barrier holds a request to another group until the NSO's earlier requests are ordered
// (delivered here, or reported ordered by a member); requests to the same group need no barrier,
// since each group's order is FIFO per sender.
//
// Pure and bounded in time: an entry older than `release_after_ms` releases what it holds (a call
// that never got ordered must not block its client forever). Expire costs what it releases (plus
// entries already ordered), not a walk over every request in flight.
//
// It also counts each client's requests not yet ordered for backpressure
// (limits.max_unordered_requests): a request whose causal wait lapsed is still counted until it
// is ordered or `count_for_ms` after its admission, so a group that orders slowly bounds what a
// client has waiting, not only what it sent in the last `release_after_ms`.
#ifndef COHORT_INVOCATION_CAUSAL_BARRIER_H_
#define COHORT_INVOCATION_CAUSAL_BARRIER_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"

namespace cohort::invocation {

class CausalBarrier {
 public:
  using Submit = std::function<void()>;

  // `count_for_ms` (at least release_after_ms): how long a request is counted in in_flight at
  // most, unless reported ordered sooner.
  explicit CausalBarrier(uint64_t release_after_ms, uint64_t count_for_ms = 0)
      : release_after_ms_(release_after_ms),
        count_for_ms_(std::max(release_after_ms, count_for_ms)) {}

  // Returns true when the request may be submitted now (it is then awaited as unordered);
  // otherwise `submit` is held and handed back by Ordered() or Expire() later.
  // `bytes`: the request's size, counted in in_flight_bytes until it is ordered.
  bool Admit(uint64_t nso, const std::string& group, uint64_t call_id, uint64_t now_ms,
             Submit submit, size_t bytes = 0);
  // The same, with the submission made by `make_held` only when it is held: nothing is made on
  // the usual path (a request submitted at once, issue 7's hot path; a FunctionRef, since a
  // std::function of a capture over 16 bytes allocates).
  bool AdmitOrHold(uint64_t nso, const std::string& group, uint64_t call_id, uint64_t now_ms,
                   size_t bytes, absl::FunctionRef<Submit()> make_held);
  // Request `call_id` is known ordered (or finished): the submissions it released, in order.
  std::vector<Submit> Ordered(uint64_t call_id, uint64_t now_ms);
  // Releases past entries older than release_after_ms; stops counting those older than
  // count_for_ms.
  std::vector<Submit> Expire(uint64_t now_ms);

  size_t held() const;
  // Request `call_id` of `nso` is held (not yet submitted).
  bool Holds(uint64_t nso, uint64_t call_id) const;
  // Requests of `nso` not yet known ordered, held ones included (limits.max_unordered_requests).
  size_t in_flight(uint64_t nso) const;
  // Their bytes (limits.max_unordered_bytes).
  size_t in_flight_bytes(uint64_t nso) const;
  // in_flight and in_flight_bytes summed over every client (the daemon's backlog, for its
  // metrics; a walk over the clients that have requests in flight).
  size_t total_in_flight() const;
  size_t total_in_flight_bytes() const;

 private:
  struct Held {
    std::string group;
    uint64_t call_id = 0;
    Submit submit;
    size_t bytes = 0;
  };
  // A client's requests are counted here; each request's own record is in `tracked_` (no
  // per-client container of call ids, which allocated per call: issue 7).
  struct PerNso {
    std::string group;     // group of the requests awaited
    size_t unordered = 0;  // requests submitted and not yet known ordered
    size_t lapsed = 0;     // of those, past release_after_ms: counted only
    // A list, not a deque: an empty deque allocates, and a client's state is made and erased
    // around each call it makes (holding is rare).
    std::list<Held> held;
    size_t bytes = 0;  // of the unordered (lapsed included) and held requests
  };
  // A request submitted and not yet known ordered.
  struct Tracked {
    uint64_t nso = 0;
    size_t bytes = 0;
    bool lapsed = false;
  };
  void Release(uint64_t nso, PerNso* state, uint64_t now_ms, std::vector<Submit>* out);
  void Track(uint64_t nso, PerNso* state, uint64_t call_id, uint64_t now_ms, size_t bytes);

  // Stops counting `call_id`, lapsed, once count_for_ms has passed since its admission.
  void Forget(uint64_t call_id);
  // A client's requests counted in in_flight: unordered (lapsed included) and held.
  static size_t Count(const PerNso& state);
  // Takes a request out of its client's counts and bytes.
  static void Uncount(PerNso* state, const Tracked& request);

  const uint64_t release_after_ms_;
  const uint64_t count_for_ms_;
  // Hash maps: a client's entry and its call's are made and erased around each call, and a grown
  // hash map allocates nothing for that (issue 7). Only summed over, never walked in order.
  absl::flat_hash_map<uint64_t, PerNso> nsos_;
  absl::flat_hash_map<uint64_t, Tracked> tracked_;  // by call id
  // (admitted at, call id) in admission order, so by time (now_ms never goes back): Expire
  // looks at the front only. Entries ordered meanwhile are skipped there.
  std::deque<std::pair<uint64_t, uint64_t>> by_admission_;
  // The same for the lapsed requests, which are still counted.
  std::deque<std::pair<uint64_t, uint64_t>> lapsed_by_admission_;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_CAUSAL_BARRIER_H_
