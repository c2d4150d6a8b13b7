// Backpressure between a client and its daemon. A daemon refuses a request RESOURCE_EXHAUSTED
// when its client already has limits.max_unordered_requests (or max_unordered_bytes) requests not
// yet ordered, or a local connection has too many calls in flight: nothing of the request was
// accepted, and room comes back as the group orders the earlier ones. Such a refusal carries
// kBacklogNote, so a client can tell it from other RESOURCE_EXHAUSTED errors (a message over
// gRPC's size limit, which no wait cures) and send the request again later: the C++ Client and
// the Python client wait for room (ConnectOptions::backpressure_wait), as a producer blocks on a
// full buffer instead of failing (Kafka's max.block.ms, JGroups' flow control).
#ifndef COHORT_INVOCATION_BACKPRESSURE_H_
#define COHORT_INVOCATION_BACKPRESSURE_H_

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "invocation/doubling_pause.h"
#include "invocation/steady_time.h"

namespace cohort::invocation {

// Ends the message of every backlog refusal; clients in other languages match it too
// (clients/python/cohort_client.py).
inline constexpr absl::string_view kBacklogNote =
    "; backpressure: nothing was accepted, send again once earlier requests are ordered";

// RESOURCE_EXHAUSTED for a request refused because its client's backlog is full; `what` says
// which bound.
inline absl::Status BacklogError(absl::string_view what) {
  return absl::ResourceExhaustedError(absl::StrCat(what, kBacklogNote));
}

inline bool IsBacklog(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         absl::StrContains(status.message(), kBacklogNote);
}

// How long a request refused for backpressure may wait for room: `backpressure_wait`
// (ConnectOptions); a call also at most its deadline, which the wait counts against (a one-way
// call's deadline runs from its acceptance).
inline absl::Duration RoomWait(absl::Duration backpressure_wait, bool one_way,
                               absl::Duration deadline) {
  return one_way ? backpressure_wait : std::min(backpressure_wait, deadline);
}

// What is left of a call's `deadline` for an attempt made after waiting for room since `start`:
// the wait counts against a call's deadline; a one-way call's runs from its acceptance.
inline absl::Duration DeadlineLeft(absl::Duration deadline, bool one_way,
                                   internal::SteadyTime start) {
  return one_way ? deadline : deadline - internal::SteadySince(start);
}

// The outcome of a request whose wait for room (`wait`) ran out after `waited`: the refusal,
// saying how long it waited (as it is when no wait was allowed).
inline absl::Status WaitedOut(const absl::Status& refused, absl::Duration waited,
                              absl::Duration wait) {
  if (wait <= absl::ZeroDuration()) return refused;
  return absl::ResourceExhaustedError(absl::StrCat(
      refused.message(), " (waited ", absl::ToInt64Milliseconds(waited),
      " ms for room: ConnectOptions::backpressure_wait, or the call's deadline)"));
}

// The pauses of a caller waiting for room: 200 us, doubling up to 10 ms (a backlog drains in
// batches of up to consensus.batch_max_messages requests per ordering).
class BacklogPause : public DoublingPause {
 public:
  BacklogPause() : DoublingPause(absl::Microseconds(200), absl::Milliseconds(10)) {}
};

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& result) {
  return result.status();
}

// Sends what `attempt` makes again while the daemon refuses it for backpressure, for at most
// `wait` from `start`, pausing between attempts (BacklogPause); the last result, or WaitedOut.
// Blocks its caller: Client's calls, sends and multicasts, a servant's group-to-group calls.
template <typename AttemptFn>
auto WhileBacklogged(internal::SteadyTime start, absl::Duration wait, AttemptFn attempt)
    -> decltype(attempt()) {
  auto result = attempt();
  BacklogPause pause;
  while (IsBacklog(StatusOf(result))) {
    const absl::Duration next = pause.Next();
    const absl::Duration waited = internal::SteadySince(start);
    if (waited + next > wait) return WaitedOut(StatusOf(result), waited, wait);
    absl::SleepFor(next);  // a relative sleep (nanosleep): the wall clock plays no part
    result = attempt();
  }
  return result;
}

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_BACKPRESSURE_H_
