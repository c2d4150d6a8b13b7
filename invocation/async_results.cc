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

void AsyncResults::Loop() {
  std::deque<Item> batch;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AsyncResults* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return !self->queue_.empty() || self->stopping_;
          },
          this));
      if (queue_.empty()) return;  // stopping, and every expected result has run
      batch.swap(queue_);
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
