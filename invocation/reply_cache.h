// Duplicate suppression for group invocation (003 section 4.1): servers keep the last replies
// per client, so a call that reaches the group twice (a retry through another request manager,
// or a closed-group call multicast by several members) is executed once and answered from the
// cache after that.
//
// Pure and deterministic: OnDelivery is called at every replica at the same point of the total
// order, so every replica makes the same choice. Bounded: `calls_per_client_max` entries per client.
// Every call id between the window's floor and its highest is either in the window or was never
// delivered, so a call delivered after a later one of its client is told apart (kOutOfOrder).
#ifndef COHORT_INVOCATION_REPLY_CACHE_H_
#define COHORT_INVOCATION_REPLY_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>
#include <utility>

#include "consensus/spare.h"
#include "proto/wire.pb.h"

namespace cohort::invocation {

class ReplyCache {
 public:
  enum class Verdict {
    kExecute,     // first delivery of this call: execute it
    kInProgress,  // delivered before, its answer is not back yet
    kAnswered,    // delivered and answered before: resend the cached reply
    kForgotten,   // older than the cache window: neither execute nor answer from the cache
    // First delivery, but a later call of the same client (call ids increase with the order its
    // daemon sent them, wire.proto Request.call_id) was delivered before it: executing it would
    // break FIFO per client. Recorded like kExecute; the caller decides (Node refuses it).
    kOutOfOrder,
  };
  // (origin daemon, its incarnation, client NSO): call ids restart when a daemon restarts.
  using ClientKey = std::tuple<uint32_t, uint64_t, uint64_t>;

  explicit ReplyCache(size_t calls_per_client_max = 256) : calls_per_client_max_(calls_per_client_max) {}

  // The call was delivered in total order. `cached` is set for kAnswered.
  Verdict OnDelivery(ClientKey client, uint64_t call_id, const wire::Reply** cached);
  // The servant answered a call that OnDelivery said to execute.
  void Completed(ClientKey client, uint64_t call_id, const wire::Reply& reply);
  // The client's daemon awaits none of its calls below `below` (Request.replies_taken_below,
  // delivered in total order at every replica): it has their results, or it gave them up (failed,
  // or one-way). Their entries go, and the window's floor moves to `below`: a copy of one
  // delivered later is kForgotten, neither executed nor answered, which is right for each kind
  // (a copy of a call with a result ran before; a call given up is one whose outcome its caller
  // was told is unknown, and FIFO per client forbids running it after the later call that said
  // so). Without it, a client's latest calls_per_client_max calls stayed, with their replies,
  // each as large as its servant made it.
  void TakeRepliesBelow(const ClientKey& client, uint64_t below);
  // Bytes of the replies kept (their payloads and errors).
  size_t reply_bytes() const;

  // The client detached after every request it made here was ordered (Request.retire_client,
  // delivered in total order at every replica): its entry goes, and from now on each of its call
  // ids counts as delivered and forgotten (a late copy is neither executed nor answered). Kept as
  // ranges of NSO ids per origin daemon and incarnation, which its daemon hands out in order, so
  // a daemon's departed clients cost a few bytes in all, not a window each.
  void Retire(const ClientKey& client);
  bool Retired(const ClientKey& client) const;

  size_t clients() const { return clients_.size(); }
  // Calls kept (delivered, not yet forgotten), over the clients.
  size_t calls() const;
  // Ranges of retired NSO ids kept (Retire).
  size_t retired_ranges() const;
  // The call was delivered before (answered, in progress or forgotten).
  bool Known(const ClientKey& client, uint64_t call_id) const;
  // The highest call number of `client` delivered here (0: none kept).
  uint64_t LatestCall(const ClientKey& client) const;

  // State transfer to a joining member (membership). A copy taken at the view change holds
  // exactly the calls delivered before it; FillAnswersFrom completes the answers that were still
  // in progress then from the live cache (the servant answers in delivery order, so by the time
  // its state is read, every earlier call has been answered).
  void FillAnswersFrom(const ReplyCache& live);
  void ToProto(wire::GroupState* state) const;
  void FromProto(const wire::GroupState& state);

 private:
  struct Call {
    bool answered = false;  // false: in progress (`reply` is empty)
    wire::Reply reply;
  };
  using Calls = std::map<uint64_t, Call>;
  struct ClientCalls {
    Calls calls;
    uint64_t forgotten_below = 0;  // call ids below it were evicted (or taken, TakeRepliesBelow)
  };
  static constexpr size_t kSpareCallsMax = 64;

  // Inserts `call_id` (absent) as in progress, into a spare entry if there is one.
  void AddInProgress(Calls* calls, uint64_t call_id);
  // Removes [first, last) from `calls`, keeping up to kSpareCallsMax entries as spares.
  void Forget(Calls* calls, Calls::iterator first, Calls::iterator last);

  size_t calls_per_client_max_;
  std::map<ClientKey, ClientCalls> clients_;
  // Entries of calls forgotten, kept for the next calls delivered: a map node and its reply's
  // strings are reused, not allocated per call (omniORB2, 001 sections 5-6; issue 7). A copy of
  // the cache (state transfer) starts without any.
  consensus::Spare<std::vector<Calls::node_type>> spare_;
  // (origin, incarnation) -> retired NSO ids as ranges: first -> end (exclusive), not adjacent.
  std::map<std::pair<uint32_t, uint64_t>, std::map<uint64_t, uint64_t>> retired_;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_REPLY_CACHE_H_
