// FIFO per client across routes, at the member that orders a request from outside its group.
//
// A client whose daemon is not a member reaches the group by three routes (003 section 4.1): its
// one-way calls and multicasts are forwarded to one member, its open calls go to that member as
// request manager, and its closed calls go to every member, one of which orders them. While that
// member lives the routes meet there, in the order the client sent them. When it fails, the
// client's daemon sends what it had not seen ordered through the next member, and the members
// that kept copies of its closed calls order those themselves: the routes part, and a later
// request could be ordered before an earlier one. So each request from outside names its
// client's previous request to the group that was not yet known ordered when it left
// (Request.after_call_id), and the member that orders it proposes it only after that one: once
// it proposed it itself (its own proposals keep their order), or saw it delivered. A member's
// own request made while its client's last request from outside (made before this node joined
// the view again) is still awaited waits here the same way (Node::SubmitAsMember), released also
// when its daemon stops awaiting that one.
//
// A predecessor not seen here at all after a while (its forward was lost, typically while its
// client's daemon was cut off from the group) is named by Unseen, and the member asks that daemon
// to send it again (Node::AskForPredecessor) rather than wait for its next resend.
//
// Pure and bounded: a request waits at most max(`hold_max_ms`, its deadline + 1 s) for its
// predecessor (one that never comes: its client's daemon died with it, or gave it up at its
// deadline, which for a predecessor with the same deadline has passed by then), then is proposed
// anyway; at most `max_held` wait at once (more, from a peer that names predecessors that do not
// exist, are proposed at once); what this member proposed is remembered until delivered, or for
// `remember_ms`.
#ifndef COHORT_INVOCATION_OUTSIDE_FIFO_H_
#define COHORT_INVOCATION_OUTSIDE_FIFO_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "invocation/reply_cache.h"
#include "proto/wire.pb.h"

namespace cohort::invocation {

class OutsideFifo {
 public:
  using ClientKey = ReplyCache::ClientKey;

  explicit OutsideFifo(uint64_t hold_max_ms, uint64_t remember_ms = 60000,
                       size_t max_held = 65536)
      : hold_max_ms_(hold_max_ms), remember_ms_(remember_ms), max_held_(max_held) {}

  static ClientKey ClientOf(const wire::Request& request) {
    return {request.origin(), request.origin_incarnation(), request.client_nso()};
  }

  // Requests to propose, in order: usually one, held inline (issue 7: a request managed from
  // outside allocated its vector, its copies and a map node per call).
  using Requests = absl::InlinedVector<wire::Request, 1>;
  // A request from outside that this member is to order. Returns what to propose now, in order:
  // the request, then any held behind it; nothing when the request waits for its predecessor.
  // `predecessor_delivered`: the reply cache knows the predecessor (delivered here).
  Requests Admit(wire::Request request, bool predecessor_delivered, uint64_t now_ms);
  // A request from outside was delivered (in total order, whoever proposed it): the requests
  // held behind it become ready (Take).
  void Delivered(const ClientKey& client, uint64_t call_id);
  // What to propose now, in order: the requests whose predecessor was delivered (Delivered, or
  // `known` by the reply cache: a state transfer brought it), and those held longer than
  // hold_max_ms (with what was held behind them). `expired` counts the latter.
  // (A FunctionRef: a std::function of the node's capture was allocated per tick, issue 7.)
  using Known = absl::FunctionRef<bool(const ClientKey& client, uint64_t call_id)>;
  Requests Take(uint64_t now_ms, size_t* expired, Known known) {
    return TakeKnown(now_ms, expired, &known);
  }
  Requests Take(uint64_t now_ms, size_t* expired = nullptr) {
    return TakeKnown(now_ms, expired, nullptr);
  }
  // Predecessors that a request here has waited for `wait_ms` or longer and that are not here
  // themselves (held, or proposed by this member, not yet delivered): most likely lost on the way
  // (their client's daemon was cut off from the group when it sent them), so that the member asks
  // for them. Each is named once, then again every 4 x `wait_ms` while still missing.
  using CallKey = std::pair<ClientKey, uint64_t>;
  std::vector<CallKey> Unseen(uint64_t now_ms, uint64_t wait_ms);
  // This member no longer orders for the group (it left): everything held is dropped (the
  // clients' daemons send it again through another member) and returned, in the order held.
  std::vector<wire::Request> Clear();

  size_t held() const { return held_count_ + ready_.size(); }
  // Requests proposed at once because max_held were waiting.
  uint64_t overflowed() const { return overflowed_; }
  // A request held here waits for `call_id` of `client`.
  bool Awaited(const ClientKey& client, uint64_t call_id) const {
    return held_.count({client, call_id}) > 0;
  }
  // Request `call_id` of `client` waits here (held, or ready and not yet taken).
  bool Holds(const ClientKey& client, uint64_t call_id) const {
    return holding_.count({client, call_id}) > 0;
  }
  size_t remembered() const { return proposed_.size(); }
  bool has_work() const { return !held_.empty() || !ready_.empty() || !proposed_.empty(); }

 private:
  Requests TakeKnown(uint64_t now_ms, size_t* expired, const Known* known);

  struct Held {
    wire::Request request;
    uint64_t until_ms = 0;  // proposed anyway then
    uint64_t since_ms = 0;  // held since
  };
  // Added to a request's deadline: the predecessor's daemon gives it up at its own deadline.
  static constexpr uint64_t kDeadlineSlackMs = 1000;
  // Records `request` as proposed and appends it, and what waited for it, to `out`.
  void Propose(wire::Request request, uint64_t now_ms, Requests* out);

  const uint64_t hold_max_ms_;
  const uint64_t remember_ms_;
  const size_t max_held_;
  size_t held_count_ = 0;  // in held_
  uint64_t overflowed_ = 0;
  std::map<CallKey, std::vector<Held>> held_;  // by the predecessor they wait for
  std::vector<wire::Request> ready_;           // their predecessor was delivered
  std::set<CallKey> holding_;                  // the requests in held_ and ready_
  // By this member, not yet delivered: when. A hash map: an entry made and erased per request
  // allocates nothing once grown.
  absl::flat_hash_map<CallKey, uint64_t> proposed_;
  std::map<CallKey, uint64_t> named_;          // by Unseen: when last
  uint64_t next_sweep_ms_ = 0;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_OUTSIDE_FIFO_H_
