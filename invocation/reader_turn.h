// Whose turn it is to read a connection's results, shared by the client stub's two pipelined
// paths: local_calls.h (the daemon's local link) and call_stream.h (the gRPC stream). omniORB2
// (001 section 3) has the calling thread read its own reply, with no thread switch; with many
// calls on one connection (MinORB, 000):
// - a caller whose call is the only one pending reads its own result;
// - with several pending a helper thread reads, for as long as any is pending, and after a turn
//   with kLingerPending calls or more pending at once it reads on until a read slice passes
//   without a result (under load it stays ready: no hand-over from a caller, no wake-up of the
//   helper, at each moment nothing is pending);
// - a caller that stops reading leaves calls still pending to the helper.
// One thread at a time reads (`reading`). Every field and method is guarded by the owner's mutex.
#ifndef COHORT_INVOCATION_READER_TURN_H_
#define COHORT_INVOCATION_READER_TURN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/synchronization/mutex.h"

namespace cohort::internal {

// Results read by the callers themselves and by the helper thread (for tests).
struct ReadCounts {
  uint64_t by_callers = 0;
  uint64_t by_helper = 0;
};

struct ReaderTurn {
  static constexpr size_t kLingerPending = 4;

  bool broken = false;        // the connection is gone: no call is registered, the helper leaves
  bool reading = false;       // a caller or the helper reads
  size_t pending = 0;         // calls waiting for their result on the connection
  bool helper_asked = false;  // the helper is to read as soon as no one else does
  size_t helper_peak = 0;     // most calls pending at once in the helper's turn
  absl::CondVar helper_wake;

  void AskHelper() {
    helper_asked = true;
    helper_wake.Signal();
  }

  // The helper thread, with `mu` (the owner's) held: waits until it is asked and nobody reads,
  // then takes the turn. False once the connection is broken: the helper leaves.
  bool AwaitHelperTurn(absl::Mutex* mu) {
    while (!broken && !(helper_asked && !reading)) helper_wake.Wait(mu);
    if (broken) return false;
    helper_asked = false;
    reading = true;
    helper_peak = pending;
    return true;
  }

  // After one read by the helper: whether it reads on. `took`: the read completed a pending call;
  // `idle`: the read's slice passed without a result.
  bool HelperReadsOn(bool took, bool idle) {
    helper_peak = std::max(helper_peak, pending + (took ? 1 : 0));
    return pending > 0 || (helper_peak >= kLingerPending && !idle);
  }

  // The reader stops; a caller (not the helper) leaves calls still pending to the helper (which
  // may also have been asked while it read).
  void Stop(bool caller) {
    reading = false;
    if (caller && (pending > 0 || helper_asked)) AskHelper();
  }
};

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_READER_TURN_H_
