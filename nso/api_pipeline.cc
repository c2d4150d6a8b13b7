// ApiService::InvokeStream: pipelined invocations on one stream (issue 7; 000 MinORB: many
// outstanding calls per connection). The gRPC handler thread reads calls and hands each to the
// protocol thread without waiting for it; the protocol thread's completion pushes the result into
// a queue (never blocking); a writer thread sends results as they complete, a burst in one batch.
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/api_service.h"
#include "nso/handoff_queue.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

using Clock = std::chrono::steady_clock;

// One finished call on its way to the stream; converted to protobuf by the writer thread, not on
// the protocol thread.
struct Outcome {
  uint64_t call = 0;
  api::Mode mode = api::MODE_UNSPECIFIED;
  Clock::time_point start;
  InvokeResult result;
};

// What the handler, the protocol thread's completions and the writer share for one stream.
class StreamState {
 public:
  HandoffQueue<Outcome>& queue() { return queue_; }

  void Started() {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  void Finished(Outcome outcome) {
    queue_.Push(std::move(outcome));
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  // Waits until no call of the stream is running, or `cancelled()` (polled every 100 ms): a client
  // that closed its side gets the results still due; one that went away does not hold us.
  void AwaitNoneInFlight(const std::function<bool()>& cancelled) {
    absl::MutexLock lock(&mu_);
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
    while (!mu_.AwaitWithTimeout(absl::Condition(&none), absl::Milliseconds(100))) {
      if (cancelled()) return;
    }
  }

 private:
  HandoffQueue<Outcome> queue_;
  absl::Mutex mu_;
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

Outcome Failed(uint64_t call, api::Mode mode, Clock::time_point start, absl::Status status) {
  Outcome outcome{call, mode, start, {}};
  outcome.result.status = std::move(status);
  return outcome;
}

}  // namespace

grpc::Status ApiService::InvokeStream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<api::PipelinedResult, api::PipelinedCall>* stream) {
  if (grpc::Status allowed = Authenticated(context); !allowed.ok()) return allowed;
  auto state = std::make_shared<StreamState>();
  std::thread writer([this, state, stream] {
    std::vector<Outcome> batch;
    api::PipelinedResult out;
    bool open = true;
    while (state->queue().TakeAll(&batch)) {
      for (size_t i = 0; i < batch.size(); ++i) {
        Outcome& outcome = batch[i];
        grpc::Status status = ToGrpcStatus(outcome.result.status);
        if (metrics_ != nullptr) {
          std::chrono::duration<double> took = Clock::now() - outcome.start;
          metrics_->RecordInvocation(ModeLabel(outcome.mode), CodeLabel(status.error_code()),
                                     took.count());
        }
        if (!open) continue;  // the client is gone: drain until the handler closes the queue
        out.Clear();
        out.set_call(outcome.call);
        out.set_status_code(status.error_code());
        out.set_error(status.error_message());
        ToInvokeReply(std::move(outcome.result), out.mutable_reply());
        grpc::WriteOptions options;
        if (i + 1 < batch.size()) options.set_buffer_hint();  // the batch goes out together
        open = stream->Write(out, options);
      }
    }
  });
  api::PipelinedCall call;
  while (stream->Read(&call)) {
    const uint64_t id = call.call();
    const api::Mode mode = call.invoke().mode();
    const Clock::time_point start = Clock::now();
    if (grpc::Status allowed = Allowed(context, call.invoke().group(), Right::kInvoke);
        !allowed.ok()) {
      state->queue().Push(Failed(id, mode, start, FromGrpcStatus(allowed)));
      continue;
    }
    absl::StatusOr<InvokeOptions> options = ToInvokeOptions(call.invoke());
    if (!options.ok()) {
      state->queue().Push(Failed(id, mode, start, options.status()));
      continue;
    }
    state->Started();
    uint64_t nso = call.invoke().nso();
    bool posted = loop_->Post([this, nso, options = *std::move(options), state, id, mode,
                               start]() mutable {
      node_->Invoke(nso, std::move(options), [state, id, mode, start](InvokeResult result) {
        state->Finished({id, mode, start, std::move(result)});
      });
    });
    if (!posted) {
      state->Finished(Failed(id, mode, start,
                             absl::UnavailableError("daemon overloaded or shutting down")));
    }
  }
  state->AwaitNoneInFlight([context] { return context->IsCancelled(); });
  state->queue().Close();
  writer.join();
  return grpc::Status::OK;
}

}  // namespace cohort::nso
