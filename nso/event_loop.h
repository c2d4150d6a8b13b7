// The protocol thread: one per daemon, it owns all protocol state (ARCHITECTURE.md, "one protocol
// thread"). gRPC threads hand it work with Post(); it runs Tick callbacks every `tick_ms`.
//
// It waits in epoll, so it can also own sockets (the raw TCP peer transport, nso/tcp_transport.h):
// file descriptors watched with Watch() are served on this thread, without a hand-off to another
// thread (003/001: no thread switch on the hot path). A Post() to a sleeping loop writes an
// eventfd; the flush callback runs after every batch of work, before the loop sleeps again (the
// transport sends what the batch produced, one write per peer).
//
// Borrowing (RunOrPost): a thread of the node's own process (an embedded node's caller, or its
// servant answering) runs its task itself when the loop thread sleeps in epoll with nothing
// queued, instead of waking it: one thread switch less on the call's path (001 section 6 and
// 002: a hand-off per request is what the fastest ORBs avoid). The loop thread holds `work_mu_`
// whenever it is not in epoll_wait, so a borrower excludes it; the protocol state still has one
// owner at a time, and the borrower runs the flushes as the loop would after a batch.
//
// Fairness: a batch of posted tasks runs for at most kBatchBudget, and ready descriptors are
// served after every batch, also while more tasks wait. A flood of posted calls (an embedded
// node's callers) therefore cannot starve the peer sockets or the tick: the failure detector
// hears the peers' "I am alive" messages, so a busy node does not suspect them for its own delay
// (004 section 5: suspicion is meant for a silent peer, not a slow reader). For the same reason
// the ready descriptors are served just before each tick, so a loop that was held up (its thread
// descheduled) reads what came meanwhile before the tick judges the peers' silence.
#ifndef COHORT_NSO_EVENT_LOOP_H_
#define COHORT_NSO_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace cohort::nso {

// Milliseconds on the monotonic clock. The runtime is the only place that reads a clock.
uint64_t MonotonicNowMs();

class EventLoop {
 public:
  using Task = std::function<void()>;
  using TickFn = std::function<void(uint64_t now_ms)>;
  using IoHandler = std::function<void(uint32_t epoll_events)>;

  // `queue_max` bounds the work queue: Post() refuses (returns false) beyond it.
  EventLoop(uint32_t tick_ms, size_t queue_max, TickFn on_tick);
  ~EventLoop();

  void Start();
  void Stop();  // runs what is queued, then joins the thread

  // A batch of posted tasks runs at most this long before the loop serves I/O and the tick.
  static constexpr uint64_t kBatchBudgetUs = 5000;

  bool Post(Task task);
  // Runs `task` now on the calling thread if the loop is asleep with nothing queued (then the
  // flushes), else Post()s it. Not for a task that waits for the loop (RunOnLoop inside it).
  bool RunOrPost(Task task);
  // True on the loop's own thread (a task, an I/O handler, a tick, a flush), or in a task that
  // RunOrPost runs on the caller's thread.
  bool InLoopThread() const;
  size_t QueueDepth() const;

  // On the loop thread (or before Start): serve `fd` (EPOLLIN/EPOLLOUT...) with `handler` on the
  // loop thread until Unwatch. False if epoll refuses the descriptor.
  bool Watch(int fd, uint32_t epoll_events, IoHandler handler);
  void Rewatch(int fd, uint32_t epoll_events);
  void Unwatch(int fd);
  // Before Start: runs on the loop thread after every batch of work (tasks, I/O, tick), in the
  // order added (the daemon adds the local fast path, then the peer transport).
  void AddFlush(std::function<void()> flush) { flushes_.push_back(std::move(flush)); }

 private:
  void Run();
  void Wake();
  // Waits for I/O, a task or the next tick (not at all when `busy`: tasks are left to run);
  // serves ready descriptors.
  void WaitAndServe(uint64_t next_tick_ms, bool busy);

  const uint32_t tick_ms_;
  const size_t queue_max_;
  TickFn on_tick_;
  std::vector<std::function<void()>> flushes_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: a Post to a sleeping loop
  std::atomic<bool> sleeping_{false};
  // Held by the loop thread except while it waits in epoll; by a borrower while it runs a task.
  absl::Mutex work_mu_;
  std::atomic<bool> loop_wants_{false};  // the loop thread woke and waits for work_mu_
  std::atomic<size_t> carried_{0};  // tasks of the running batch left for the next round
  std::map<int, IoHandler> handlers_;  // loop thread only
  mutable absl::Mutex mu_;
  std::vector<Task> queue_ ABSL_GUARDED_BY(mu_);  // swapped with the running batch: no allocation
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Runs `fn` on the loop's thread and waits for it; UNAVAILABLE if the loop refuses work (its
// queue is full, or it is stopping). Not from the loop's own thread.
absl::Status RunOnLoop(EventLoop* loop, std::function<absl::Status()> fn);

}  // namespace cohort::nso

#endif  // COHORT_NSO_EVENT_LOOP_H_
