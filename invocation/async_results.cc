#include "invocation/async_results.h"


namespace cohort::internal {

AsyncResults::~AsyncResults() {
  {
    absl::MutexLock lock(&mu_);
    // Every expected result comes: the connections failed their pending calls, and an embedded
    // node answers each call by its deadline.
    mu_.Await(absl::Condition(
        +[](uint64_t* expected) { return *expected == 0; }, &expected_));
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AsyncResults::Expect() {
  absl::MutexLock lock(&mu_);
  ++expected_;
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { Loop(); });
  }
}

void AsyncResults::Post(Callback callback, absl::StatusOr<GroupReplies> result) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(callback), std::move(result)});
}

void AsyncResults::PostAt(absl::Time when, Callback callback,
                          absl::StatusOr<GroupReplies> result) {
  absl::MutexLock lock(&mu_);
  later_.emplace(when, Item{std::move(callback), std::move(result)});
}

void AsyncResults::Loop() {
  std::deque<Item> batch;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Until something is queued, the earliest delayed item is due, or stopping (every expected
      // result has run by then: the delayed ones are expected too).
      auto ready = +[](AsyncResults* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !self->queue_.empty() || self->stopping_ ||
               (!self->later_.empty() && self->later_.begin()->first <= absl::Now());
      };
      if (later_.empty()) {
        mu_.Await(absl::Condition(ready, this));
      } else {
        mu_.AwaitWithDeadline(absl::Condition(ready, this), later_.begin()->first);
      }
      batch.swap(queue_);
      const absl::Time now = absl::Now();
      while (!later_.empty() && later_.begin()->first <= now) {
        batch.push_back(std::move(later_.begin()->second));
        later_.erase(later_.begin());
      }
      if (batch.empty()) {
        if (stopping_) return;  // every expected result has run
        continue;
      }
    }
    for (Item& item : batch) item.callback(std::move(item.result));
    {
      absl::MutexLock lock(&mu_);
      expected_ -= batch.size();
    }
    batch.clear();
  }
}

}  // namespace cohort::internal
