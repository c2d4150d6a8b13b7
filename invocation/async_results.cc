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
  wake_.Signal();
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
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back({std::move(callback), std::move(result)});
  }
  wake_.Signal();
}

void AsyncResults::PostCall(AsyncCall* call) {
  {
    absl::MutexLock lock(&mu_);
    queue_.push_back({nullptr, absl::StatusOr<GroupReplies>(), call});
  }
  wake_.Signal();
}

void AsyncResults::PostAt(SteadyTime when, Callback callback,
                          absl::StatusOr<GroupReplies> result) {
  {
    absl::MutexLock lock(&mu_);
    later_.emplace(when, Item{std::move(callback), std::move(result)});
  }
  wake_.Signal();
}

void AsyncResults::Loop() {
  std::vector<Item> batch;
  while (true) {
    SteadyTime until = SteadyTime::max();  // while nothing is due: the earliest delayed item
    {
      absl::MutexLock lock(&mu_);
      batch.swap(queue_);
      const SteadyTime now = SteadyNow();
      while (!later_.empty() && later_.begin()->first <= now) {
        batch.push_back(std::move(later_.begin()->second));
        later_.erase(later_.begin());
      }
      if (batch.empty()) {
        if (stopping_) return;  // every expected result has run (the delayed ones are expected)
        if (!later_.empty()) until = later_.begin()->first;
      }
    }
    if (batch.empty()) {
      // Until something is posted (a post since the look above wakes this at once), the earliest
      // delayed item is due, or stopping.
      wake_.WaitUntil(until);
      continue;
    }
    for (Item& item : batch) {
      if (item.call != nullptr) {
        item.call->Complete();
      } else {
        item.callback(std::move(item.result));
      }
    }
    {
      absl::MutexLock lock(&mu_);
      expected_ -= batch.size();
    }
    batch.clear();
  }
}

}  // namespace cohort::internal
