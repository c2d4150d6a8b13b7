#include "tools/bench/workload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>
#include <thread>

#include "absl/synchronization/barrier.h"

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

  LoadResult result;
  result.callers = callers;
  std::vector<double> all;
  for (int i = 0; i < callers; ++i) {
    all.insert(all.end(), latencies[i].begin(), latencies[i].end());
    result.errors += errors[i];
    if (result.first_error.empty()) result.first_error = error_text[i];
  }
  result.calls = static_cast<int64_t>(all.size());
  result.seconds = seconds;
  result.throughput = seconds > 0 ? result.calls / seconds : 0;
  if (!all.empty()) {
    result.mean_us = std::accumulate(all.begin(), all.end(), 0.0) / all.size();
    result.p50_us = Percentile(&all, 50);
    result.p99_us = Percentile(&all, 99);
  }
  return result;
}

}  // namespace cohort::bench
