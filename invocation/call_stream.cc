#include "invocation/call_stream.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <grpc/support/time.h>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"

namespace cohort::internal {
namespace {

// The helper's wait for an event, a slice at a time (it ends a lingering turn).
constexpr absl::Duration kDriveSlice = absl::Milliseconds(100);

// The completion queue's tags: each stream has a queue of its own, so four constants do.
void* const kStart = reinterpret_cast<void*>(1);
void* const kRead = reinterpret_cast<void*>(2);
void* const kWrite = reinterpret_cast<void*>(3);
void* const kFinish = reinterpret_cast<void*>(4);

// The call that waited in vain, and the others on the stream it resets.
absl::Status TimedOut() {
  return absl::DeadlineExceededError(
      "no result from the daemon in time: its call stream is reset");
}
absl::Status Reset() {
  return absl::UnavailableError(
      "the call stream to the daemon broke: reset after a call got no result in time");
}

}  // namespace

// One InvokeStream. Its fields but `context`, `cq`, `rw`, `helper` and the buffers are guarded by
// CallStream::mu_; `in` belongs to the driver, `out` and `out_options` to the write's claimant.
// Destroyed (by the last holder, after its helper was joined) once it broke or the CallStream
// goes: it cancels the call and takes the outstanding operations off its queue first, as gRPC
// requires before a completion queue is destroyed.
struct CallStream::Stream {
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<api::PipelinedCall, api::PipelinedResult>> rw;
  std::thread helper;
  api::PipelinedResult in;   // the read in progress
  api::PipelinedCall out;    // the write in progress
  grpc::WriteOptions out_options;
  grpc::Status status;       // Finish's

  ReaderTurn turn;           // who drives `cq` (a caller or the helper): reader_turn.h
  bool started = false;      // StartCall completed
  bool writing = false;      // a write is in progress
  bool finish_posted = false;
  int ops = 0;               // operations started and not yet taken off `cq`
  std::deque<api::PipelinedCall> outgoing;  // queued while a write is in progress

  // Counts a completed operation; after a failed start or read (the stream ended) posts Finish,
  // which gives the stream's status. Under CallStream::mu_, or once no one else holds the stream.
  void Account(void* tag, bool ok) {
    --ops;
    if (tag == kWrite) writing = false;
    if ((tag == kStart || tag == kRead) && !ok && !finish_posted) {
      finish_posted = true;
      ++ops;
      rw->Finish(&status, kFinish);
    }
  }

  ~Stream() {
    context.TryCancel();
    void* tag = nullptr;
    bool ok = false;
    while (ops > 0 && cq.Next(&tag, &ok)) Account(tag, ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
};

CallStream::CallStream(api::Cohort::Stub* stub, std::string token)
    : stub_(stub), token_(std::move(token)) {}

CallStream::~CallStream() {
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    if (stream == nullptr) return;
    if (!stream->turn.broken) Broken(stream.get(), absl::CancelledError("the client is closing"));
  }
  if (stream->helper.joinable()) stream->helper.join();
}

ReadCounts CallStream::results() const {
  absl::MutexLock lock(&mu_);
  return results_;
}

std::shared_ptr<CallStream::Stream> CallStream::Current() {
  {
    absl::MutexLock lock(&mu_);
    if (stream_ != nullptr && !stream_->turn.broken) return stream_;
  }
  // One caller at a time replaces a broken stream: it joins the old one's helper (without mu_,
  // which the helper takes) before the old one can be destroyed.
  absl::MutexLock open_lock(&open_mu_);
  std::shared_ptr<Stream> old;
  {
    absl::MutexLock lock(&mu_);
    if (stream_ != nullptr && !stream_->turn.broken) return stream_;  // replaced meanwhile
    old = std::move(stream_);
  }
  // Broken: its calls have failed and its helper leaves at once; callers still on it hold it.
  if (old != nullptr && old->helper.joinable()) old->helper.join();
  old.reset();
  auto stream = std::make_shared<Stream>();
  if (!token_.empty()) stream->context.AddMetadata("authorization", "Bearer " + token_);
  stream->rw = stub_->PrepareAsyncInvokeStream(&stream->context, &stream->cq);
  absl::MutexLock lock(&mu_);
  stream->ops = 1;
  stream->rw->StartCall(kStart);
  Stream* raw = stream.get();
  stream->helper = std::thread([this, raw] { HelperLoop(raw); });
  stream_ = stream;
  return stream;
}

bool CallStream::ClaimWrite(Stream* stream) {
  if (!stream->started || stream->writing || stream->turn.broken || stream->outgoing.empty()) {
    return false;
  }
  stream->writing = true;
  ++stream->ops;
  stream->out = std::move(stream->outgoing.front());
  stream->outgoing.pop_front();
  stream->out_options = grpc::WriteOptions();
  if (!stream->outgoing.empty()) stream->out_options.set_buffer_hint();  // a burst goes together
  return true;
}

void CallStream::IssueWrite(Stream* stream) {
  // Starting an operation never blocks and never runs a completion in this thread.
  stream->rw->Write(stream->out, stream->out_options, kWrite);
}

void CallStream::Broken(Stream* stream, const absl::Status& status) {
  stream->turn.broken = true;  // from now on no call is registered on it
  stream->turn.reading = false;
  stream->outgoing.clear();
  stream->context.TryCancel();  // ends the operations in progress
  pending_.FailAll(stream, status);
  stream->turn.helper_wake.Signal();  // it leaves
}

namespace {

// `deadline` for gRPC, on its monotonic clock (a system_clock deadline is the wall clock's).
gpr_timespec MonotonicDeadline(SteadyTime deadline) {
  if (deadline == SteadyTime::max()) return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                      gpr_time_from_nanos(absl::ToInt64Nanoseconds(SteadyLeft(deadline)),
                                          GPR_TIMESPAN));
}

}  // namespace

bool CallStream::DriveOne(Stream* stream, Pending* self, SteadyTime deadline) {
  void* tag = nullptr;
  bool ok = false;
  grpc::CompletionQueue::NextStatus next =
      stream->cq.AsyncNext(&tag, &ok, MonotonicDeadline(deadline));
  uint64_t call = 0;
  absl::StatusOr<GroupReplies> result = absl::UnknownError("no result");
  const bool got_result = next == grpc::CompletionQueue::GOT_EVENT && tag == kRead && ok;
  if (got_result) {  // `in` is the driver's until the next read is posted
    call = stream->in.call();
    if (stream->in.status_code() == 0) {
      result = ToGroupReplies(stream->in.mutable_reply());
    } else {
      result = absl::Status(static_cast<absl::StatusCode>(stream->in.status_code()),
                            stream->in.error());
    }
  }
  Pending* taken = nullptr;
  bool more = true;
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    if (next == grpc::CompletionQueue::GOT_EVENT) stream->Account(tag, ok);
    if (stream->turn.broken) return false;  // failed meanwhile (a deadline, the destructor)
    if (self == nullptr && pending_.FailExpired(SteadyNow(), &TimedOut)) {
      Broken(stream, Reset());  // a result is missing: the stream is stuck
      return false;
    }
    if (next == grpc::CompletionQueue::SHUTDOWN) {
      Broken(stream, absl::UnavailableError("the call stream to the daemon broke: shut down"));
      return false;
    }
    if (next == grpc::CompletionQueue::TIMEOUT) {
      if (self != nullptr && !self->done && SteadyNow() >= deadline) {
        // The daemon answers every call by its deadline: it is stuck, and the stream is reset.
        Calls::Finish(pending_.Take(self->call), TimedOut());
        Broken(stream, Reset());
        return false;
      }
    } else if (tag == kFinish) {
      Broken(stream, absl::UnavailableError(absl::StrCat(
                         "the call stream to the daemon broke: ",
                         stream->status.ok() ? std::string("closed by the daemon")
                                             : stream->status.error_message())));
      return false;
    } else if (ok && (tag == kStart || tag == kRead)) {
      if (tag == kStart) stream->started = true;
      if (got_result) {
        taken = pending_.Take(call);
        ++(self != nullptr ? results_.by_callers : results_.by_helper);
      }
      ++stream->ops;
      stream->rw->Read(&stream->in, kRead);  // the next result
    }
    // A failed write or read: the stream ends, and Finish (posted by Account) reports how.
    write = ClaimWrite(stream);
    // A caller drives until its own result has come, the helper while the turn says so. A
    // write still in progress when no call is pending needs no driver: the next caller drives,
    // and takes its completion before its own write can start.
    more = self != nullptr ? !self->done
                           : stream->turn.HelperReadsOn(taken != nullptr,
                                                        next == grpc::CompletionQueue::TIMEOUT);
    if (!more) stream->turn.Stop(/*caller=*/self != nullptr);
  }
  if (write) IssueWrite(stream);
  // Its caller is woken without mu_ held (as in local_calls.cc).
  if (taken != nullptr) Calls::Finish(taken, std::move(result));
  return more;
}

void CallStream::HelperLoop(Stream* stream) {
  mu_.Lock();
  while (stream->turn.AwaitHelperTurn(&mu_)) {
    mu_.Unlock();
    while (DriveOne(stream, nullptr, SteadyAfter(kDriveSlice))) {
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

void CallStream::InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done) {
  std::shared_ptr<Stream> stream = Current();
  api::PipelinedCall call;
  *call.mutable_invoke() = request;
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    if (stream->turn.broken) {
      done(absl::UnavailableError("the call stream to the daemon broke: try again"));
      return;
    }
    auto* pending = new Pending;  // freed by Finish
    pending->connection = stream.get();
    pending->on_done = std::move(done);
    pending->deadline = SteadyAfter(wait);
    call.set_call(pending_.Add(pending));
    stream->outgoing.push_back(std::move(call));
    write = ClaimWrite(stream.get());
    if (!stream->turn.reading) stream->turn.AskHelper();  // nobody waits: the helper drives
  }
  if (write) IssueWrite(stream.get());
}

absl::StatusOr<GroupReplies> CallStream::Invoke(const api::InvokeRequest& request,
                                                absl::Duration wait) {
  std::shared_ptr<Stream> stream = Current();
  Pending pending;
  pending.connection = stream.get();
  api::PipelinedCall call;
  *call.mutable_invoke() = request;
  bool drive_own = false;  // alone on the stream: this caller takes its result itself
  bool write = false;
  {
    absl::MutexLock lock(&mu_);
    if (stream->turn.broken) {
      return absl::UnavailableError("the call stream to the daemon broke: try again");
    }
    call.set_call(pending_.Add(&pending));
    stream->outgoing.push_back(std::move(call));
    write = ClaimWrite(stream.get());
    if (!stream->turn.reading) {
      if (stream->turn.pending == 1 && !stream->turn.helper_asked) {
        stream->turn.reading = drive_own = true;  // claimed before the call leaves
      } else {
        stream->turn.AskHelper();
      }
    }
  }
  if (write) IssueWrite(stream.get());
  const SteadyTime deadline = SteadyAfter(wait);
  if (drive_own) {
    while (DriveOne(stream.get(), &pending, deadline)) {
    }
  }
  if (!pending.noted.WaitForNotificationUntil(deadline)) {
    absl::MutexLock lock(&mu_);
    if (!pending.done) {
      Calls::Finish(pending_.Take(pending.call), TimedOut());
      Broken(stream.get(), Reset());  // a driver (if any) finds it broken when it is back
    }
  }
  pending.noted.WaitForNotification();
  return std::move(pending.result);
}

}  // namespace cohort::internal
