// Heap allocations per call (nso/heap_count.h): what the hot path allocates, against issue 7's
// "no per-message allocation or copy" (omniORB2, 001 sections 5-6). Over sequential calls (wait-
// for-all through the closed group from n2, wait-for-first through the open group from n(N+1)),
// the growth of each daemon's count (Admin
// Status heap_allocations, less what reading it adds) and of this process's (the client stub and
// the in-process echo servants, calling and serving into kept memory: Client::InvokeInto,
// Servant::ServeInto), divided by the calls; then this process's with Client::Invoke (a result
// made anew per call) over fewer calls; then this process's with 16 calls in flight from one
// thread (Client::InvokeAsyncInto into kept AsyncCalls, and Client::InvokeAsync).
#ifndef COHORT_TOOLS_BENCH_ALLOCATIONS_H_
#define COHORT_TOOLS_BENCH_ALLOCATIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "invocation/client.h"

namespace cohort::bench {

// The calls measured: wait-for-all through the closed group from member n2, or wait-for-first
// through the open group (its request manager, asynchronous forwarding) from n(N+1), outside it.
enum class AllocationPath { kClosedAll, kOpenFirst };

struct AllocationResult {
  int n = 0;
  std::string ordering;
  std::string path;  // "closed all" or "open first"
  int64_t calls = 0;
  std::vector<double> per_daemon;  // allocations per call at n1..n(N+1) (the last hosts no member)
  double daemons = 0;              // their sum
  double client_and_servants = 0;  // this process, per call (InvokeInto, ServeInto)
  double invoke_by_value = 0;      // this process, per call, with Client::Invoke
  // This process, per call, with 16 calls in flight from one thread: AsyncCalls kept and started
  // again from their own completion (Client::InvokeAsyncInto), and with Client::InvokeAsync.
  double pipelined_into = 0;
  double pipelined_by_value = 0;
  // What one Admin.Status read adds to a daemon's count (the mean over the daemons, of two reads
  // back to back before the calls): subtracted from each daemon's growth, which spans one read.
  double status_read = 0;
  std::string note;                // why not measured (empty: measured)
};

// `addresses`: the daemons' client addresses, n1 first; `client`: attached to n2 for
// kClosedAll, to n(N+1) for kOpenFirst.
AllocationResult MeasureAllocations(Client* client, const std::vector<std::string>& addresses,
                                    int n, const std::string& ordering, int payload_bytes,
                                    AllocationPath path);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_ALLOCATIONS_H_
