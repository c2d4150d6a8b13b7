// The protocol thread: one per daemon, it owns all protocol state (ARCHITECTURE.md, "one protocol
// thread"). gRPC threads hand it work with Post(); it runs Tick callbacks every `tick_ms`.
#ifndef COHORT_NSO_EVENT_LOOP_H_
#define COHORT_NSO_EVENT_LOOP_H_

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::nso {

// Milliseconds on the monotonic clock. The runtime is the only place that reads a clock.
uint64_t MonotonicNowMs();

class EventLoop {
 public:
  using Task = std::function<void()>;
  using TickFn = std::function<void(uint64_t now_ms)>;

  // `queue_max` bounds the work queue: Post() refuses (returns false) beyond it.
  EventLoop(uint32_t tick_ms, size_t queue_max, TickFn on_tick);
  ~EventLoop();

  void Start();
  void Stop();  // runs what is queued, then joins the thread

  bool Post(Task task);
  size_t QueueDepth() const;

 private:
  void Run();

  const uint32_t tick_ms_;
  const size_t queue_max_;
  TickFn on_tick_;
  mutable absl::Mutex mu_;
  std::vector<Task> queue_ ABSL_GUARDED_BY(mu_);  // swapped with the running batch: no allocation
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_EVENT_LOOP_H_
