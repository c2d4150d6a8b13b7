#include "nso/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>

namespace cohort::nso {

namespace {
// The loop whose protocol state this thread may touch now: its own thread's, or a borrowed one.
thread_local const EventLoop* tls_running_loop = nullptr;
}  // namespace

uint64_t MonotonicNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

EventLoop::EventLoop(uint32_t tick_ms, size_t queue_max, TickFn on_tick)
    : tick_ms_(tick_ms), queue_max_(queue_max), on_tick_(std::move(on_tick)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
}

EventLoop::~EventLoop() {
  Stop();
  close(wake_fd_);
  close(epoll_fd_);
}

void EventLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void EventLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

void EventLoop::Wake() {
  uint64_t one = 1;
  ssize_t written = write(wake_fd_, &one, sizeof(one));
  (void)written;  // a full counter already wakes the loop
}

bool EventLoop::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= queue_max_) return false;
    queue_.push_back(std::move(task));
  }
  // The loop sets sleeping_ before its last look at the queue (under mu_): either it saw this
  // task, or this load sees sleeping_ and wakes it.
  if (sleeping_.load()) Wake();
  return true;
}

bool EventLoop::InLoopThread() const {
  return tls_running_loop == this || std::this_thread::get_id() == thread_.get_id();
}

bool EventLoop::RunOrPost(Task task) {
  // On the loop (its thread, or a borrower): after what is queued, as Post promises.
  if (tls_running_loop != this && sleeping_.load() && !loop_wants_.load() && work_mu_.TryLock()) {
    bool idle;
    {
      absl::MutexLock lock(&mu_);
      // Nothing queued or left from the last batch, which must run first (FIFO).
      idle = queue_.empty() && carried_.load(std::memory_order_relaxed) == 0 && !stopping_;
    }
    if (idle) {
      const EventLoop* outer = tls_running_loop;
      tls_running_loop = this;
      task();
      for (auto& flush : flushes_) flush();
      tls_running_loop = outer;
      work_mu_.Unlock();
      return true;
    }
    work_mu_.Unlock();
  }
  return Post(std::move(task));
}

size_t EventLoop::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + carried_.load(std::memory_order_relaxed);
}

bool EventLoop::Watch(int fd, uint32_t epoll_events, IoHandler handler) {
  epoll_event event{};
  event.events = epoll_events;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return false;
  handlers_[fd] = std::move(handler);
  return true;
}

void EventLoop::Rewatch(int fd, uint32_t epoll_events) {
  epoll_event event{};
  event.events = epoll_events;
  event.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
}

void EventLoop::Unwatch(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
}

void EventLoop::WaitAndServe(uint64_t next_tick_ms, bool busy) {
  sleeping_.store(true);
  {
    absl::MutexLock lock(&mu_);
    // Work waits: look at the descriptors without sleeping (never skip them: see the header).
    if (!queue_.empty() || stopping_) busy = true;
  }
  if (busy) sleeping_.store(false);
  uint64_t now_ms = MonotonicNowMs();
  int timeout_ms = busy || now_ms >= next_tick_ms ? 0 : static_cast<int>(next_tick_ms - now_ms);
  constexpr int kEventsMax = 64;  // more ready descriptors wait for the next round
  epoll_event events[kEventsMax];
  work_mu_.Unlock();  // a borrower may run a task meanwhile (RunOrPost)
  int ready = epoll_wait(epoll_fd_, events, kEventsMax, timeout_ms);
  loop_wants_.store(true);
  work_mu_.Lock();
  loop_wants_.store(false);
  sleeping_.store(false);
  for (int i = 0; i < ready; ++i) {
    int fd = events[i].data.fd;
    if (fd == wake_fd_) {
      uint64_t count = 0;
      ssize_t got = read(wake_fd_, &count, sizeof(count));
      (void)got;
      continue;
    }
    auto it = handlers_.find(fd);  // a handler may have unwatched another descriptor
    if (it == handlers_.end()) continue;
    IoHandler handler = it->second;  // it may unwatch itself
    handler(events[i].events);
  }
}

void EventLoop::Run() {
  using Clock = std::chrono::steady_clock;
  tls_running_loop = this;
  work_mu_.Lock();
  uint64_t next_tick_ms = MonotonicNowMs() + tick_ms_;
  std::vector<Task> batch;
  size_t next = 0;  // the first task of `batch` not run yet
  while (true) {
    if (next == batch.size()) {
      batch.clear();
      next = 0;
      absl::MutexLock lock(&mu_);
      batch.swap(queue_);
      if (stopping_ && batch.empty()) break;
    }
    // At most kBatchBudgetUs of tasks (the clock is read every 16 tasks); the rest run first in
    // the next round, in order, after the tick and the ready descriptors.
    const Clock::time_point budget_end = Clock::now() + std::chrono::microseconds(kBatchBudgetUs);
    while (next < batch.size()) {
      batch[next++]();
      if ((next & 15) == 0 && Clock::now() >= budget_end) break;
    }
    carried_.store(batch.size() - next, std::memory_order_relaxed);
    uint64_t now_ms = MonotonicNowMs();
    if (now_ms >= next_tick_ms) {
      // What the peers sent is read before the tick looks at their silence (the failure
      // detector runs in it): a loop late for its tick, its thread descheduled on a loaded host
      // or held by a long batch, would otherwise suspect peers whose "I am alive" messages wait
      // unread in its sockets (cohort-bench, n = 7 one-way floods on 2 cores: all six peers
      // suspected at once, "silent 59 ms"; test/event_loop_test.cc).
      WaitAndServe(now_ms, /*busy=*/true);
      now_ms = MonotonicNowMs();
      on_tick_(now_ms);
      next_tick_ms = now_ms + tick_ms_;
    }
    for (auto& flush : flushes_) flush();
    WaitAndServe(next_tick_ms, /*busy=*/next < batch.size());
  }
  for (auto& flush : flushes_) flush();
  work_mu_.Unlock();
}

absl::Status RunOnLoop(EventLoop* loop, std::function<absl::Status()> fn) {
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = promise->get_future();
  if (!loop->RunOrPost([fn = std::move(fn), promise] { promise->set_value(fn()); })) {
    return absl::UnavailableError("node overloaded or shutting down: request queue full");
  }
  return result.get();
}

}  // namespace cohort::nso
