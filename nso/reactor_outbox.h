// The write side of a stream served by a gRPC callback reactor (InvokeStream: api_pipeline.cc,
// Serve: api_serve.cc). Items are pushed from any thread, mostly the protocol thread, and written
// one at a time (gRPC's rule for a reactor): by the thread that pushes one when no write is in
// progress (no hand-off to a writer thread: 001 section 3, "no thread switching along the call
// chain"; a reactor's StartWrite only starts the write, so the protocol thread never blocks on a
// stream), else by the thread that sees the previous write done, a queued burst with buffer hints
// so that it leaves together (004 section 3.2: batching).
//
// The outbox outlives its reactor (the protocol thread's closures hold it): after the reactor's
// OnDone an item pushed is dropped. Finish is called once, when no write is in progress and
// either the client is gone (Gone: what is due is dropped) or everything expected was written
// (Close, after which no Expect comes).
//
// Reactions may run inline in the thread that starts an operation, and they lock the outbox: so
// every decision is taken under the mutex and the reactor is called without it.
#ifndef COHORT_NSO_REACTOR_OUTBOX_H_
#define COHORT_NSO_REACTOR_OUTBOX_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cohort::nso {

template <typename Item, typename Response>
class ReactorOutbox {
 public:
  // What the outbox needs of its reactor: start a write of `*response`, or finish the stream.
  struct Hooks {
    std::function<void(const Response* response, grpc::WriteOptions options)> start_write;
    std::function<void(grpc::Status status)> finish;
    // Converts an item to the message written (on the thread that starts the write).
    std::function<void(Item item, Response* response)> convert;
    // An item that will not be written (the client is gone); optional.
    std::function<void(const Item& item)> dropped;
    // The bytes an item counts for in Backlog(); optional (0 each without).
    std::function<uint64_t(const Item& item)> weigh;
    // The most bytes that may be due, given the weight of the heaviest item pushed so far
    // (optional: no limit without); past it the stream finishes with what `overflow` says, as by
    // FinishWith: a reader that does not take what it is sent is cut off.
    std::function<uint64_t(uint64_t largest)> due_bytes_max;
    std::function<grpc::Status(uint64_t due_bytes, uint64_t bound)> overflow;
  };

  // What is pushed and not yet handed to gRPC, and what was handed to it so far, in the bytes
  // Hooks::weigh counts (a servant's backlog: flow control, nso/group_flow.h).
  struct Backlog {
    uint64_t due_bytes = 0;
    uint64_t written_bytes = 0;
    uint64_t outstanding = 0;  // items expected (Expect) or due, not yet handed to gRPC
    uint64_t pushed = 0;        // items pushed so far (Push)
    uint64_t pushed_bytes = 0;  // and their weight
    uint64_t largest = 0;       // the weight of the heaviest item pushed so far
  };
  Backlog backlog() const {
    absl::MutexLock lock(&mu_);
    Backlog backlog = backlog_;
    backlog.outstanding = expected_ + due_.size();
    return backlog;
  }

  explicit ReactorOutbox(Hooks hooks) : hooks_(std::move(hooks)) {}

  // An item will come (Push): the stream does not finish on Close before it is written.
  void Expect() {
    absl::MutexLock lock(&mu_);
    ++expected_;
  }
  // Queues an item; `expected` says whether it was announced by Expect.
  void Push(Item item, bool expected = true) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      if (expected) --expected_;
      if (hooks_.weigh) {
        const uint64_t bytes = hooks_.weigh(item);
        backlog_.due_bytes += bytes;
        backlog_.pushed_bytes += bytes;
        backlog_.largest = std::max(backlog_.largest, bytes);
      }
      ++backlog_.pushed;
      due_.push_back(std::move(item));
      if (hooks_.due_bytes_max && !gone_ && attached_) {
        const uint64_t bound = hooks_.due_bytes_max(backlog_.largest);
        if (backlog_.due_bytes > bound) {
          gone_ = true;
          status_ = hooks_.overflow(backlog_.due_bytes, bound);
        }
      }
      step = Next();
    }
    Act(std::move(step));
  }
  // Queues a snapshot that supersedes whatever is due and not yet handed to gRPC (a group watch:
  // each item is the whole of the group's details), so a reader that does not keep up gets the
  // latest one rather than every one in between, and what waits for it stays one item.
  void PushLatest(Item item) {
    std::deque<Item> superseded;
    Step step;
    {
      absl::MutexLock lock(&mu_);
      superseded.swap(due_);
      backlog_.due_bytes = 0;
      if (hooks_.weigh) backlog_.due_bytes = hooks_.weigh(item);
      due_.push_back(std::move(item));
      step = Next();
    }
    Act(std::move(step));
  }
  // From the reactor's OnWriteDone.
  void WriteDone(bool ok) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) gone_ = true;  // the client is gone: what is due is dropped
      step = Next();
    }
    Act(std::move(step));
  }
  // Nothing more will be expected: finish once what is expected is written.
  void Close() { Change([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { closing_ = true; }); }
  // The client is gone (cancelled): drop what is due, finish when no write is in progress.
  void Gone() { Change([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { gone_ = true; }); }
  // Finishes with `status` when no write is in progress (what is due is dropped).
  void FinishWith(grpc::Status status) {
    Change([this, &status]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      gone_ = true;
      status_ = std::move(status);
    });
  }
  // From the reactor's OnDone: no hook is called any more.
  void Detach() {
    absl::MutexLock lock(&mu_);
    attached_ = false;
  }

 private:
  struct Step {
    bool write = false;
    Item item{};
    bool more = false;  // more due after it: a buffer hint
    bool finish = false;
    grpc::Status status;
    std::deque<Item> drop;
  };

  template <typename Fn>
  void Change(Fn&& change) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      change();
      step = Next();
    }
    Act(std::move(step));
  }

  Step Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Step step;
    if (gone_ && attached_) step.drop.swap(due_);
    if (!attached_) due_.clear();  // the hooks may not outlive the reactor
    if (due_.empty()) backlog_.due_bytes = 0;
    if (finished_ || !attached_) return step;
    if (!writing_ && !due_.empty()) {
      writing_ = true;
      step.write = true;
      step.item = std::move(due_.front());
      due_.pop_front();
      if (hooks_.weigh) {
        const uint64_t bytes = hooks_.weigh(step.item);
        backlog_.due_bytes -= std::min(bytes, backlog_.due_bytes);
        backlog_.written_bytes += bytes;
      }
      step.more = !due_.empty();
      return step;
    }
    if (!writing_ && due_.empty() && (gone_ || (closing_ && expected_ == 0))) {
      finished_ = true;
      step.finish = true;
      step.status = status_;
    }
    return step;
  }

  // Without mu_. Only the thread that set `writing_` touches response_ until WriteDone; the
  // reactor is alive: OnDone comes only after Finish, which waits for the write in progress.
  void Act(Step step) {
    if (hooks_.dropped) {
      for (const Item& item : step.drop) hooks_.dropped(item);
    }
    if (step.write) {
      response_.Clear();
      hooks_.convert(std::move(step.item), &response_);
      grpc::WriteOptions options;
      if (step.more) options.set_buffer_hint();
      hooks_.start_write(&response_, options);
    } else if (step.finish) {
      hooks_.finish(std::move(step.status));
    }
  }

  const Hooks hooks_;
  mutable absl::Mutex mu_;
  Backlog backlog_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> due_ ABSL_GUARDED_BY(mu_);  // pushed, not yet written
  uint64_t expected_ ABSL_GUARDED_BY(mu_) = 0;  // announced, not yet pushed
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool attached_ ABSL_GUARDED_BY(mu_) = true;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  Response response_;  // the write in progress
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_REACTOR_OUTBOX_H_
