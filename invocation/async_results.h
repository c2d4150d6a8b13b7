// Where the results of a Client's asynchronous invocations (Client::InvokeAsync) reach the
// application. The stub library's paths hand a result over wherever it is known: on a reader
// thread, under their own locks, on an embedded node's protocol thread, or at once in the calling
// thread when the call cannot start. None of those may run application code, so each result is
// queued here and one thread of the Client runs the callbacks, one at a time, in the order the
// results came, holding no lock of the library: a callback may invoke again (InvokeAsync or
// Invoke). A callback that blocks holds up the results behind it.
//
// The thread starts with the first asynchronous call (most Clients make none). Destroying this
// object waits until every expected callback has run: a Client's destructor first ends its
// connections (their pending calls fail and are handed over) and then destroys this.
#ifndef COHORT_INVOCATION_ASYNC_RESULTS_H_
#define COHORT_INVOCATION_ASYNC_RESULTS_H_

#include <cstdint>
#include <map>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/steady_time.h"

namespace cohort::internal {

class AsyncResults {
 public:
  using Callback = std::function<void(absl::StatusOr<GroupReplies>)>;

  AsyncResults() = default;
  ~AsyncResults();
  AsyncResults(const AsyncResults&) = delete;
  AsyncResults& operator=(const AsyncResults&) = delete;

  // Before a call starts: its result will come (exactly once) through Post.
  void Expect();
  // Any thread, under any lock: queues `callback` with `result` for the callbacks' thread.
  void Post(Callback callback, absl::StatusOr<GroupReplies> result);
  // The same, run no earlier than `when` (a call waiting for room at its daemon: Client).
  void PostAt(SteadyTime when, Callback callback, absl::StatusOr<GroupReplies> result);
  // Any thread, under any lock: queues an AsyncCall that ended (Client::InvokeAsyncInto), whose
  // Complete runs on the callbacks' thread. Nothing allocated once the queue has grown.
  void PostCall(AsyncCall* call);

 private:
  struct Item {
    Callback callback;
    absl::StatusOr<GroupReplies> result;
    AsyncCall* call = nullptr;  // or this, which holds its own result
  };
  void Loop();

  absl::Mutex mu_;
  // A vector, swapped with the thread's own batch: both keep their memory (a deque allocated a
  // block every few items, issue 7).
  std::vector<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::multimap<SteadyTime, Item> later_ ABSL_GUARDED_BY(mu_);  // PostAt's, by time
  uint64_t expected_ ABSL_GUARDED_BY(mu_) = 0;   // Expect()ed and not yet run
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // The callbacks' thread sleeps on it (not in mu_.AwaitWithDeadline, whose deadline is the wall
  // clock's: steady_time.h) and is signalled by Post, PostAt and the destructor.
  SteadyWake wake_;
  std::thread thread_;  // started by the first Expect, under mu_
};

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_ASYNC_RESULTS_H_
