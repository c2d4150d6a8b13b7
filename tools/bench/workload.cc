#include "tools/bench/workload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace cohort::bench {

double Percentile(std::vector<double>* values, double percentile) {
  if (values->empty()) return 0;
  std::sort(values->begin(), values->end());
  size_t rank = static_cast<size_t>(std::ceil(percentile / 100.0 * values->size()));
  rank = std::clamp<size_t>(rank, 1, values->size());
  return (*values)[rank - 1];
}

LoadResult RunLoad(int callers, const LoadLimits& limits, const CallFactory& factory) {
  using Clock = std::chrono::steady_clock;
  std::vector<CallFn> calls;
  for (int i = 0; i < callers; ++i) calls.push_back(factory(i));
  std::vector<std::vector<double>> latencies(callers);
  std::vector<int64_t> errors(callers, 0);
  std::vector<std::string> error_text(callers);
  std::atomic<int64_t> budget{limits.max_calls};
  std::atomic<bool> stop{false};
  absl::Barrier* ready = new absl::Barrier(callers + 1);  // Block() deletes it on the last one
  Clock::time_point start;
  std::atomic<bool> started{false};

  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i) {
    threads.emplace_back([&, i] {
      std::string ignored;
      for (int64_t w = 0; w < limits.warmup_calls; ++w) calls[i](&ignored);
      if (ready->Block()) delete ready;
      while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
      latencies[i].reserve(4096);
      while (!stop.load(std::memory_order_relaxed) &&
             budget.fetch_sub(1, std::memory_order_relaxed) > 0) {
        Clock::time_point before = Clock::now();
        std::string error;
        bool ok = calls[i](&error);
        Clock::time_point after = Clock::now();
        if (ok) {
          latencies[i].push_back(std::chrono::duration<double, std::micro>(after - before).count());
        } else {
          if (errors[i]++ == 0) error_text[i] = error;
          // Backpressure (limits.max_unordered_requests): back off as a client should, rather
          // than spin on refusals and take the CPU the group needs to catch up.
          if (error.rfind("RESOURCE_EXHAUSTED", 0) == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        }
      }
    });
  }
  if (ready->Block()) delete ready;
  start = Clock::now();
  started.store(true, std::memory_order_release);
  // Wait for the time limit or for every caller to run out of budget.
  Clock::time_point limit = start + absl::ToChronoNanoseconds(limits.max_time);
  while (Clock::now() < limit && budget.load(std::memory_order_relaxed) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop.store(true);
  for (std::thread& thread : threads) thread.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> all;
  int64_t error_count = 0;
  std::string first_error;
  for (int i = 0; i < callers; ++i) {
    all.insert(all.end(), latencies[i].begin(), latencies[i].end());
    error_count += errors[i];
    if (first_error.empty()) first_error = error_text[i];
  }
  return Summarize(callers, std::move(all), error_count, std::move(first_error), seconds);
}

LoadResult Summarize(int callers, std::vector<double> latencies, int64_t errors,
                     std::string first_error, double seconds) {
  LoadResult result;
  result.callers = callers;
  result.errors = errors;
  result.first_error = std::move(first_error);
  result.calls = static_cast<int64_t>(latencies.size());
  result.seconds = seconds;
  result.throughput = seconds > 0 ? result.calls / seconds : 0;
  if (!latencies.empty()) {
    result.mean_us = std::accumulate(latencies.begin(), latencies.end(), 0.0) / latencies.size();
    result.p50_us = Percentile(&latencies, 50);
    result.p99_us = Percentile(&latencies, 99);
  }
  return result;
}

LoadResult RunAsyncLoad(int in_flight, const LoadLimits& limits, const AsyncCallFn& call) {
  using Clock = std::chrono::steady_clock;
  // Warm-up, one call at a time.
  for (int64_t w = 0; w < limits.warmup_calls; ++w) {
    absl::Notification done;
    const AsyncDone warm = [&done](bool, const std::string&) { done.Notify(); };
    call(0, warm);
    done.WaitForNotification();
  }
  struct State {
    absl::Mutex mu;
    std::vector<double> latencies ABSL_GUARDED_BY(mu);
    int64_t errors ABSL_GUARDED_BY(mu) = 0;
    std::string first_error ABSL_GUARDED_BY(mu);
    int64_t budget ABSL_GUARDED_BY(mu) = 0;
    int outstanding ABSL_GUARDED_BY(mu) = 0;
  } state;
  const Clock::time_point start = Clock::now();
  const Clock::time_point limit = start + absl::ToChronoNanoseconds(limits.max_time);
  {
    absl::MutexLock lock(&state.mu);
    state.budget = limits.max_calls;
    state.latencies.reserve(1 << 16);
  }
  // Starts one call in `slot`; its completion records it and starts the slot's next while budget
  // and time last. One completion object per slot, made before the run.
  std::vector<Clock::time_point> started_at(static_cast<size_t>(in_flight));
  std::vector<AsyncDone> dones;
  std::function<void(int)> start_one = [&](int slot) {
    started_at[slot] = Clock::now();
    call(slot, dones[slot]);
  };
  for (int slot = 0; slot < in_flight; ++slot) {
    dones.push_back([&, slot](bool ok, const std::string& error) {
      const Clock::time_point after = Clock::now();
      bool again = false;
      {
        absl::MutexLock lock(&state.mu);
        if (ok) {
          state.latencies.push_back(
              std::chrono::duration<double, std::micro>(after - started_at[slot]).count());
        } else if (state.errors++ == 0) {
          state.first_error = error;
        }
        again = after < limit && state.budget > 0;
        if (again) {
          --state.budget;
        } else {
          --state.outstanding;
        }
      }
      if (again) start_one(slot);
    });
  }
  int started = 0;
  {
    absl::MutexLock lock(&state.mu);
    started = static_cast<int>(std::min<int64_t>(in_flight, state.budget));
    state.budget -= started;
    state.outstanding = started;
  }
  for (int slot = 0; slot < started; ++slot) start_one(slot);
  absl::MutexLock lock(&state.mu);
  state.mu.Await(absl::Condition(
      +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->outstanding == 0; }, &state));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Summarize(in_flight, std::move(state.latencies), state.errors,
                   std::move(state.first_error), seconds);
}

}  // namespace cohort::bench
