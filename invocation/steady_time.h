// Deadlines and timed waits on the monotonic clock.
//
// absl::Now() reads the wall clock, and this Abseil's timed waits (Mutex::AwaitWithTimeout,
// CondVar::WaitWithTimeout, Notification::WaitForNotificationWithTimeout and their Deadline
// forms) sleep until an absolute CLOCK_REALTIME instant (absl/synchronization/internal/
// kernel_timeout.h, LTS 20220623). The wall clock may be stepped: by NTP at boot, by an operator,
// when a virtual machine is restored. Stepped forward, every call waiting failed its deadline at
// once; stepped back, waits stretched by the step (an hour back: a call to a frozen daemon waited
// an hour more). A call's deadline is a span of time, so the client stub and the daemon measure
// theirs here: std::chrono::steady_clock, and std::condition_variable's waits on it
// (pthread_cond_clockwait on CLOCK_MONOTONIC).
#ifndef COHORT_INVOCATION_STEADY_TIME_H_
#define COHORT_INVOCATION_STEADY_TIME_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/time/time.h"

namespace cohort::internal {

using SteadyTime = std::chrono::steady_clock::time_point;

inline SteadyTime SteadyNow() { return std::chrono::steady_clock::now(); }

// `span` from now; SteadyTime::max() for an infinite (or centuries long) span.
inline SteadyTime SteadyAfter(absl::Duration span) {
  if (span > absl::Hours(24 * 365 * 100)) return SteadyTime::max();
  return SteadyNow() + std::chrono::duration_cast<SteadyTime::duration>(
                           absl::ToChronoNanoseconds(std::max(span, absl::ZeroDuration())));
}

// What is left until `deadline` (zero once it passed).
inline absl::Duration SteadyLeft(SteadyTime deadline) {
  if (deadline == SteadyTime::max()) return absl::InfiniteDuration();
  const SteadyTime now = SteadyNow();
  if (deadline <= now) return absl::ZeroDuration();
  return absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now));
}

// How long since `start`.
inline absl::Duration SteadySince(SteadyTime start) {
  return absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyNow() - start));
}

// A one-shot event, as absl::Notification, whose timed waits measure the monotonic clock.
class SteadyNotification {
 public:
  // Wakes the waiters under the mutex: a waiter returns only after it is released, and may then
  // destroy this at once (a caller's Pending lives on its stack, pending_calls.h).
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_.store(true, std::memory_order_release);
    cv_.notify_all();
  }
  bool HasBeenNotified() const { return notified_.load(std::memory_order_acquire); }
  void WaitForNotification() const { WaitForNotificationUntil(SteadyTime::max()); }
  // True once notified; false if `deadline` passes first.
  bool WaitForNotificationUntil(SteadyTime deadline) const {
    if (HasBeenNotified()) return true;  // no lock: the waiter of a result that came first
    std::unique_lock<std::mutex> lock(mu_);
    auto notified = [this] { return notified_.load(std::memory_order_relaxed); };
    if (deadline == SteadyTime::max()) {
      cv_.wait(lock, notified);
      return true;
    }
    return cv_.wait_until(lock, deadline, notified);
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    return WaitForNotificationUntil(SteadyAfter(timeout));
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> notified_{false};  // set under mu_
};

// An event that wakes a waiter once per Signal (a Signal with no waiter wakes the next wait at
// once), with waits on the monotonic clock: for a thread that sleeps until its state changes or
// a time comes, its state being guarded elsewhere (it looks at it before each wait).
class SteadyWake {
 public:
  void Signal() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      signalled_ = true;
    }
    cv_.notify_one();
  }
  // Until a Signal (true, and the signal is taken) or `deadline` (false).
  bool WaitUntil(SteadyTime deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    bool woken = true;
    if (deadline == SteadyTime::max()) {
      cv_.wait(lock, [this] { return signalled_; });
    } else {
      woken = cv_.wait_until(lock, deadline, [this] { return signalled_; });
    }
    signalled_ = false;
    return woken;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool signalled_ = false;  // guarded by mu_
};

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_STEADY_TIME_H_
