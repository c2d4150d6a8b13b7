// Pipelined invocations over the daemon's local fast path (nso/local_api.h): like CallStream
// (call_stream.h) but on a LocalLink: the caller writes its own call frame (no writer thread), and
// results are matched to callers by call number.
//
// Who reads the results: a caller whose call is the only one pending reads its own result (a
// sequential caller, the latency case: one wake-up per call, as omniORB2's calling thread, 001
// section 3); with several pending a helper thread reads and hands each result to its caller (the
// throughput case); the rules, shared with call_stream.h, are in reader_turn.h.
// Waiting callers sleep on their own Notification, not on mu_, and are woken without mu_ held:
// with 64 callers a reader that woke them under mu_ cost 15-40% of the calls/s. Reads wait in
// poll() (LocalLink::Fill says why not in read()).
// Asynchronous calls (InvokeAsync) go on the same link; nobody waits for them, so the helper reads
// their results, and fails them when their wait passes without one (the link is then reset, as for
// a caller that waited in vain).
// A broken link fails the calls on it with UNAVAILABLE and the next call opens a new one; an idle
// link (nobody reads it) that the daemon closed is found by the next call before its frame
// leaves, and that call goes on a new link. An asynchronous call never waits for a link to open
// (up to 5 s with a frozen daemon): it goes over gRPC while a thread reopens the link.
#ifndef COHORT_INVOCATION_LOCAL_CALLS_H_
#define COHORT_INVOCATION_LOCAL_CALLS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/local_link.h"
#include "invocation/pending_calls.h"
#include "invocation/reader_turn.h"
#include "proto/api.pb.h"

namespace cohort {

struct GroupReplies;

namespace internal {

class LocalCalls {
 public:
  // Takes the link Open() made (the proof that the fast path works); reopens with `endpoint`.
  LocalCalls(LocalEndpoint endpoint, std::unique_ptr<LocalLink> first);
  ~LocalCalls();  // shuts the link and joins its helper; no call may be in progress
  LocalCalls(const LocalCalls&) = delete;
  LocalCalls& operator=(const LocalCalls&) = delete;

  // Sends the invocation and waits at most `wait` for its result. Thread-safe. Nullopt when the
  // fast path cannot be opened any more (e.g. the daemon restarted, with a new socket and key):
  // the caller goes over gRPC, which gets the daemon's own answer.
  std::optional<absl::StatusOr<GroupReplies>> Invoke(const api::InvokeRequest& request,
                                                     absl::Duration wait);
  // The same into `*into` (Client::InvokeInto): the reader swaps the replies' strings out of its
  // read buffer (the link's reused frame), which keeps `into`'s old ones for its next read: no
  // allocation or copy per call once both have grown.
  std::optional<absl::Status> InvokeInto(const api::InvokeRequest& request, absl::Duration wait,
                                         GroupReplies* into);
  // Sends the invocation and returns; `*done` gets the result exactly once, within `wait` (under
  // mu_ or not, in any thread: it only hands the result over). False, with `*done` untouched,
  // when the fast path cannot be opened any more (the caller goes over gRPC). Thread-safe.
  using Done = std::function<void(absl::StatusOr<GroupReplies>)>;  // PendingCalls' Done
  bool InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done* done);
  // The same into the caller's memory (Client::InvokeAsyncInto): the reader swaps the replies
  // into `*call->into()` as InvokeInto's, and the call's bookkeeping is kept for the next one:
  // nothing allocated per call once grown (issue 7). False, `call` untouched, as above.
  bool InvokeAsyncInto(const api::InvokeRequest& request, absl::Duration wait, AsyncInto* call);

  // The daemon restarted and the Client attached again: its next link opens at `endpoint` (a
  // new socket and key); the link now up, if any, breaks by itself (its daemon is gone).
  void SetEndpoint(LocalEndpoint endpoint) ABSL_LOCKS_EXCLUDED(open_mu_);

  // Results read by the callers themselves and by the helper thread (for tests).
  ReadCounts reads() const;

 private:
  struct Connection {
    std::unique_ptr<LocalLink> link;
    std::thread helper;
    ReaderTurn turn;         // guarded by LocalCalls::mu_
    api::LocalFrame frame;   // the reader's (whoever holds `turn.reading`)
  };
  using Calls = PendingCalls<Connection>;
  using Pending = Calls::Pending;

  absl::StatusOr<std::shared_ptr<Connection>> Current();
  // For asynchronous calls, which must not wait for a link to open: the live link, else null
  // after starting a reopen in the background (the call goes over gRPC; later ones find the new
  // link).
  std::shared_ptr<Connection> CurrentOrReopenLater() ABSL_LOCKS_EXCLUDED(mu_, reopener_mu_);
  // Invoke; `may_reopen`: a link found closed before the call left is replaced once.
  // `into`: InvokeInto's (else null).
  std::optional<absl::StatusOr<GroupReplies>> Call(const api::InvokeRequest& request,
                                                   absl::Duration wait, bool may_reopen,
                                                   GroupReplies* into);
  // InvokeAsync's and InvokeAsyncInto's body: `make(connection)` makes the call's Pending under
  // mu_; `fail(status)` ends a call that cannot start; `unmake(pending)` gives back, under mu_,
  // one that has not left when the link is found closed (then false: it goes over gRPC).
  template <typename MakeFn, typename FailFn, typename UnmakeFn>
  bool StartAsync(const api::InvokeRequest& request, MakeFn make, FailFn fail, UnmakeFn unmake);
  std::shared_ptr<Connection> Adopt(std::unique_ptr<LocalLink> link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads one frame (without mu_), hands its result to its caller (after mu_) and says whether
  // this reader reads on: a caller (`self`) until its own result has come and what is buffered
  // is read (or its deadline passes: it fails and the link is reset), the helper (`self` null)
  // while any call is pending. A reader that stops has given up `reading`; a caller leaves calls
  // still pending to the helper. False also when the link ended (every call on it failed).
  bool ReadOne(Connection* connection, Pending* self, SteadyTime deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  void HelperLoop(Connection* connection);
  // Fails every call on `connection` with `status` (UNAVAILABLE); the next call opens a new link.
  void Broken(Connection* connection, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex open_mu_;  // one caller at a time replaces a broken link (held without mu_)
  LocalEndpoint endpoint_ ABSL_GUARDED_BY(open_mu_);
  absl::Mutex reopener_mu_;  // held to start or join reopener_ (without mu_)
  std::thread reopener_ ABSL_GUARDED_BY(reopener_mu_);  // CurrentOrReopenLater's last one
  bool reopening_ ABSL_GUARDED_BY(mu_) = false;  // reopener_ runs
  bool closing_ ABSL_GUARDED_BY(mu_) = false;    // the destructor started: no more reopens
  LocalLink* opening_ ABSL_GUARDED_BY(mu_) = nullptr;  // Current()'s link awaiting its hello
  mutable absl::Mutex mu_;
  std::shared_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);
  Calls pending_ ABSL_GUARDED_BY(mu_);
  ReadCounts reads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_LOCAL_CALLS_H_
