// ApiService::InvokeStream: pipelined invocations on one stream (issue 7; 000 MinORB: many
// outstanding calls per connection), on gRPC's callback API. Each call read (OnReadDone, on a gRPC
// thread) is handed to the protocol thread without waiting for it. The protocol thread's
// completion starts the result's write itself when no write is in progress, without a hand-off to
// another thread; when one is, the result is queued and the write in progress sends the queue when
// it is done (OnWriteDone), a burst as one batch of writes. The protocol thread never waits for
// the stream: a write is only started, never waited for.
#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/api_service.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

using Clock = std::chrono::steady_clock;

// One finished call on its way to the stream; converted to protobuf by whoever writes it.
struct Outcome {
  uint64_t call = 0;
  api::Mode mode = api::MODE_UNSPECIFIED;
  Clock::time_point start;
  InvokeResult result;
};

Outcome Failed(uint64_t call, api::Mode mode, Clock::time_point start, absl::Status status) {
  Outcome outcome{call, mode, start, {}};
  outcome.result.status = std::move(status);
  return outcome;
}

}  // namespace

// One InvokeStream. It owns itself from InvokeStream until gRPC is done with it (OnDone); the
// protocol thread's completions hold it too, so a call finishing after the stream ended finds it
// (and drops its result).
class ApiService::Pipeline final
    : public grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult>,
      public std::enable_shared_from_this<Pipeline> {
 public:
  static Pipeline* Start(ApiService* service, grpc::CallbackServerContext* context) {
    std::shared_ptr<Pipeline> pipeline(new Pipeline(service, context));
    pipeline->self_ = pipeline;
    if (grpc::Status allowed = service->Authenticated(context); !allowed.ok()) {
      pipeline->finishing_ = true;  // nothing else runs yet: no lock needed
      pipeline->Finish(allowed);
    } else {
      pipeline->StartRead(&pipeline->call_);
    }
    return pipeline.get();
  }

 private:
  Pipeline(ApiService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {}

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client closed its side (it gets the results still due) or went away.
      bool finish;
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        finish = FinishLocked();
      }
      if (finish) Finish(grpc::Status::OK);
      return;
    }
    Take(call_);
    StartRead(&call_);
  }

  // A call read from the stream: to the protocol thread, or failed at once.
  void Take(const api::PipelinedCall& call) {
    const uint64_t id = call.call();
    const api::Mode mode = call.invoke().mode();
    const Clock::time_point start = Clock::now();
    if (grpc::Status allowed =
            service_->Allowed(context_, call.invoke().group(), Right::kInvoke);
        !allowed.ok()) {
      Send(Failed(id, mode, start, FromGrpcStatus(allowed)), false);
      return;
    }
    absl::StatusOr<InvokeOptions> options = ToInvokeOptions(call.invoke());
    if (!options.ok()) {
      Send(Failed(id, mode, start, options.status()), false);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      ++in_flight_;
    }
    uint64_t nso = call.invoke().nso();
    ApiService* service = service_;
    bool posted = service->loop_->Post([service, nso, options = *std::move(options),
                                        self = shared_from_this(), id, mode, start]() mutable {
      service->node_->Invoke(nso, std::move(options),
                             [self = std::move(self), id, mode, start](InvokeResult result) {
                               self->Send({id, mode, start, std::move(result)}, true);
                             });
    });
    if (!posted) {
      Send(Failed(id, mode, start, absl::UnavailableError("daemon overloaded or shutting down")),
           true);
    }
  }

  // Records the call's metrics and writes its result: at once (on this thread) when no write is
  // in progress, else after the ones before it. `ran` when the call was counted in flight.
  void Send(Outcome outcome, bool ran) {
    bool start = false;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (ran) --in_flight_;
      if (!finishing_) {
        Record(outcome);
        if (!failed_) {
          queued_.push_back(std::move(outcome));
          if (!writing_) {
            writing_ = start = true;
            TakeQueuedLocked();
          }
        }
      }
      finish = FinishLocked();
    }
    if (start) WriteNext();
    if (finish) Finish(grpc::Status::OK);
  }

  void Record(const Outcome& outcome) const {
    if (service_->metrics_ == nullptr) return;
    std::chrono::duration<double> took = Clock::now() - outcome.start;
    service_->metrics_->RecordInvocation(
        ModeLabel(outcome.mode), CodeLabel(ToGrpcStatus(outcome.result.status).error_code()),
        took.count());
  }

  void TakeQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sending_.clear();
    sending_.swap(queued_);
    next_ = 0;
  }

  // By the one writer (whoever set writing_): no lock needed for sending_, next_ and out_.
  void WriteNext() {
    Outcome& outcome = sending_[next_];
    grpc::Status status = ToGrpcStatus(outcome.result.status);
    out_.Clear();
    out_.set_call(outcome.call);
    out_.set_status_code(status.error_code());
    out_.set_error(status.error_message());
    ToInvokeReply(std::move(outcome.result), out_.mutable_reply());
    grpc::WriteOptions options;
    if (next_ + 1 < sending_.size()) options.set_buffer_hint();  // the batch goes out together
    StartWrite(&out_, options);
  }

  void OnWriteDone(bool ok) override {
    bool finish = false;
    bool more;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        failed_ = true;  // the client is gone: later results are dropped
        queued_.clear();
        writing_ = false;
      } else if (++next_ < sending_.size()) {
        // The next one of the batch.
      } else if (!queued_.empty()) {
        TakeQueuedLocked();
      } else {
        writing_ = false;
      }
      more = writing_;  // still the writer
      if (!writing_) finish = FinishLocked();
    }
    if (more) WriteNext();
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;  // the client went away: the calls still running do not hold us
      finish = FinishLocked();
    }
    if (finish) Finish(grpc::Status::OK);
  }

  void OnDone() override {
    std::shared_ptr<Pipeline> self = std::move(self_);  // freed when the last completion is
  }

  // True (once) when the stream is to be finished now: no more calls come, no write is in
  // progress, and every call has its result written (or the client is gone).
  bool FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_ || !reads_done_ || writing_) return false;
    if (in_flight_ > 0 && !cancelled_ && !failed_) return false;
    finishing_ = true;
    return true;
  }

  ApiService* const service_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<Pipeline> self_;  // gRPC's reference, until OnDone
  api::PipelinedCall call_;         // the read in progress (one at a time)
  std::vector<Outcome> sending_;    // the writer's batch (one writer at a time)
  size_t next_ = 0;                 // its write in progress
  api::PipelinedResult out_;        // the message of that write
  absl::Mutex mu_;
  std::vector<Outcome> queued_ ABSL_GUARDED_BY(mu_);
  uint64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // on the protocol thread
  bool writing_ ABSL_GUARDED_BY(mu_) = false;    // someone is the writer
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;     // a write failed
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;  // Finish called: nothing is written any more
};

grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult>* ApiService::InvokeStream(
    grpc::CallbackServerContext* context) {
  return Pipeline::Start(this, context);
}

}  // namespace cohort::nso
