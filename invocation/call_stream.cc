#include "invocation/call_stream.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"
#include "nso/status.h"

namespace cohort::internal {

// A caller waiting for its result; lives on the caller's stack.
struct CallStream::Pending {
  const Stream* stream = nullptr;  // the stream the call was queued on
  absl::Notification done;
  absl::StatusOr<GroupReplies> result;
};

CallStream::CallStream(api::Cohort::Stub* stub, std::string token)
    : stub_(stub), token_(std::move(token)) {}

CallStream::~CallStream() {
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
  }
  if (stream == nullptr) return;
  stream->context.TryCancel();
  if (stream->reader.joinable()) stream->reader.join();
}

std::shared_ptr<CallStream::Stream> CallStream::Current() {
  absl::MutexLock lock(&mu_);
  if (stream_ != nullptr && !stream_->broken) return stream_;
  if (stream_ != nullptr) {
    // Broken: its reader has failed its calls and is finishing; it needs no lock of ours.
    stream_->context.TryCancel();
    if (stream_->reader.joinable()) stream_->reader.join();
  }
  auto stream = std::make_shared<Stream>();
  if (!token_.empty()) stream->context.AddMetadata("authorization", "Bearer " + token_);
  stream->rw = stub_->InvokeStream(&stream->context);
  Stream* raw = stream.get();
  stream->writer = std::thread([raw] { WriteCalls(raw); });
  stream->reader = std::thread([this, raw] { ReadResults(raw); });
  stream_ = stream;
  return stream;
}

void CallStream::WriteCalls(Stream* stream) {
  std::vector<api::PipelinedCall> batch;
  bool open = true;
  while (stream->outgoing.TakeAll(&batch)) {
    for (size_t i = 0; i < batch.size() && open; ++i) {
      grpc::WriteOptions options;
      if (i + 1 < batch.size()) options.set_buffer_hint();  // the burst goes out together
      open = stream->rw->Write(batch[i], options);
    }
    // After a failed write the reader sees the stream end and fails the calls still pending.
  }
}

void CallStream::ReadResults(Stream* stream) {
  api::PipelinedResult result;
  while (stream->rw->Read(&result)) {
    if (result.status_code() == 0) {
      Complete(result.call(), ToGroupReplies(result.reply()));
    } else {
      Complete(result.call(), absl::Status(static_cast<absl::StatusCode>(result.status_code()),
                                           result.error()));
    }
  }
  std::vector<Pending*> orphans;
  {
    absl::MutexLock lock(&mu_);
    stream->broken = true;  // from now on no call is queued on it
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second->stream == stream) {
        orphans.push_back(it->second);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  stream->context.TryCancel();  // unblocks a writer stuck on a daemon that stopped reading
  stream->outgoing.Close();
  if (stream->writer.joinable()) stream->writer.join();
  grpc::Status status = stream->rw->Finish();  // no Write runs any more
  absl::Status why = absl::UnavailableError(absl::StrCat(
      "the call stream to the daemon broke: ",
      status.ok() ? std::string("closed by the daemon") : status.error_message()));
  for (Pending* pending : orphans) {
    pending->result = why;
    pending->done.Notify();
  }
}

bool CallStream::Complete(uint64_t call, absl::StatusOr<GroupReplies> result) {
  Pending* pending = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(call);
    if (it == pending_.end()) return false;
    pending = it->second;
    pending_.erase(it);
  }
  pending->result = std::move(result);
  pending->done.Notify();  // the caller may return at once: `pending` is not touched after this
  return true;
}

absl::StatusOr<GroupReplies> CallStream::Invoke(const api::InvokeRequest& request,
                                                absl::Duration wait) {
  std::shared_ptr<Stream> stream = Current();
  Pending pending;
  pending.stream = stream.get();
  api::PipelinedCall call;
  {
    absl::MutexLock lock(&mu_);
    if (stream->broken) {
      return absl::UnavailableError("the call stream to the daemon broke: try again");
    }
    call.set_call(next_call_++);
    pending_[call.call()] = &pending;
  }
  const uint64_t id = call.call();
  *call.mutable_invoke() = request;
  if (!stream->outgoing.Push(std::move(call))) {
    Complete(id, absl::UnavailableError("cannot reach the daemon (call stream closed)"));
  }
  if (!pending.done.WaitForNotificationWithTimeout(wait) &&
      Complete(id, absl::DeadlineExceededError(
                       "no result from the daemon in time: its call stream is reset"))) {
    // The daemon answers every call by its deadline; silence beyond the slack means it (or the
    // stream) is stuck: start afresh rather than queue more calls behind it.
    stream->context.TryCancel();
  }
  pending.done.WaitForNotification();  // whoever completed it has set the result
  return std::move(pending.result);
}

}  // namespace cohort::internal
