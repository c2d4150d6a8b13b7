#include "nso/event_loop.h"

#include <chrono>

#include "absl/time/time.h"

namespace cohort::nso {

uint64_t MonotonicNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

EventLoop::EventLoop(uint32_t tick_ms, size_t queue_max, TickFn on_tick)
    : tick_ms_(tick_ms), queue_max_(queue_max), on_tick_(std::move(on_tick)) {}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void EventLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool EventLoop::Post(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= queue_max_) return false;
  queue_.push_back(std::move(task));
  return true;
}

size_t EventLoop::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void EventLoop::Run() {
  uint64_t next_tick_ms = MonotonicNowMs() + tick_ms_;
  std::vector<Task> batch;
  while (true) {
    batch.clear();
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      uint64_t now_ms = MonotonicNowMs();
      if (now_ms < next_tick_ms) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(next_tick_ms - now_ms));
      }
      batch.swap(queue_);
      if (stopping_ && batch.empty()) return;
    }
    for (Task& task : batch) task();
    uint64_t now_ms = MonotonicNowMs();
    if (now_ms >= next_tick_ms) {
      on_tick_(now_ms);
      next_tick_ms = now_ms + tick_ms_;
    }
  }
}

}  // namespace cohort::nso
