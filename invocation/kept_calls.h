// Between a daemon's reply cache (invocation/reply_cache.h) and the calls a durable group's
// servant keeps with its state (api::KeptCalls, invocation/kept_state.h). A servant keeps what
// each call answered next to the state that call made; when every member restarted, the daemon
// that re-founds the group loads them into its reply cache, so that a call resent across the
// power cut (by a caller's daemon outside the group) is answered as it was, not executed again
// (003 section 4.1: a server executes a client's call once).
#ifndef COHORT_INVOCATION_KEPT_CALLS_H_
#define COHORT_INVOCATION_KEPT_CALLS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "invocation/reply_cache.h"
#include "proto/api.pb.h"

namespace cohort::invocation {

// The identity of a call as ServantEvent.call carries it (opaque to the servant).
std::string KeptCallIdentity(const ReplyCache::ClientKey& client, uint64_t call_id);

// The cache's calls with their answers, for a servant that takes a transferred state: each
// client's latest, within kKeptCallsMax and kKeptCallsMaxBytes.
void ToKeptCalls(const ReplyCache& cache, api::KeptCalls* out);

// Replaces `cache` with the calls a servant kept, their answers naming `replier`. A client's calls
// below the lowest one kept count as forgotten: a late copy of one is ignored, not executed. An
// error names a call whose identity is not one (the servant gave back something else).
absl::Status LoadKeptCalls(const api::KeptCalls& calls, uint32_t replier, ReplyCache* cache);

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_KEPT_CALLS_H_
