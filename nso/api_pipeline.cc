// ApiService::InvokeStream: pipelined invocations on one stream (issue 7; 000 MinORB: many
// outstanding calls per connection), served by a gRPC callback reactor. Each call read is handed
// to the protocol thread without waiting for it; its result is written by the thread that
// completes it when no write is in progress (nso/reactor_outbox.h).
//
// A client that does not read its results is not read either (PauseReadingCalls: its results not
// yet taken by gRPC count); HTTP/2 flow control then holds its writes. Without it the results of
// a client that sends and never reads grew the daemon's memory without bound. The results of the
// calls read before a pause are bounded by ResultsCutoff: beyond it the stream ends.
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nso/api_service.h"
#include "nso/logging.h"
#include "nso/reactor_outbox.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

using Clock = std::chrono::steady_clock;

// One finished call on its way to the stream.
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

// One InvokeStream; gRPC deletes it (OnDone) after Finish, once its last operation is done. The
// stream finishes when the client's side is closed and every call it sent has its result
// written, or when the client is gone.
class InvokeStreamReactor final
    : public grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult> {
 public:
  using Outbox = ReactorOutbox<Outcome, api::PipelinedResult>;

  InvokeStreamReactor(ApiService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), outbox_(std::make_shared<Outbox>(Hooks())) {
    if (grpc::Status allowed = service_->Authenticated(context_); !allowed.ok()) {
      outbox_->FinishWith(allowed);
      return;
    }
    StartRead(&call_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or went away
      outbox_->Close();
      return;
    }
    const uint64_t id = call_.call();
    const api::Mode mode = call_.invoke().mode();
    const Clock::time_point start = Clock::now();
    outbox_->Expect();
    if (grpc::Status allowed = service_->Allowed(context_, call_.invoke().group(), Right::kInvoke);
        !allowed.ok()) {
      outbox_->Push(Failed(id, mode, start, FromGrpcStatus(allowed)));
    } else if (absl::StatusOr<InvokeOptions> options = TakeInvokeOptions(call_.mutable_invoke());
               !options.ok()) {
      outbox_->Push(Failed(id, mode, start, options.status()));
    } else {
      const uint64_t nso = call_.invoke().nso();
      Node* node = service_->node_;
      std::shared_ptr<Outbox> outbox = outbox_;
      bool posted = service_->loop_->Post(
          [node, nso, options = *std::move(options), outbox, id, mode, start]() mutable {
            node->Invoke(nso, std::move(options), [outbox, id, mode, start](InvokeResult result) {
              outbox->Push({id, mode, start, std::move(result)});
            });
          });
      if (!posted) {
        outbox_->Push(
            Failed(id, mode, start, absl::UnavailableError("daemon overloaded or shutting down")));
      }
    }
    {
      absl::MutexLock lock(&read_mu_);
      const Outbox::Backlog backlog = outbox_->backlog();
      if (PauseReadingCalls(false, backlog.outstanding, backlog.due_bytes, Results(backlog))) {
        read_paused_ = true;  // the next write done below half reads again
        return;
      }
    }
    StartRead(&call_);
  }

  void OnWriteDone(bool ok) override {
    outbox_->WriteDone(ok);
    bool resume = false;
    {
      // After the outbox counted the write: a pause taken before it saw calls outstanding,
      // each of whose writes comes back here.
      absl::MutexLock lock(&read_mu_);
      const Outbox::Backlog backlog = outbox_->backlog();
      if (read_paused_ &&
          !PauseReadingCalls(true, backlog.outstanding, backlog.due_bytes, Results(backlog))) {
        read_paused_ = false;
        resume = true;
      }
    }
    if (resume && ok) StartRead(&call_);
  }
  void OnCancel() override { outbox_->Gone(); }
  void OnDone() override {
    outbox_->Detach();
    delete this;
  }

 private:
  // What PauseReadingCalls counts of the results pushed so far.
  static ResultSizes Results(const Outbox::Backlog& backlog) {
    return ResultSizes{backlog.pushed, backlog.pushed_bytes, backlog.largest};
  }

  Outbox::Hooks Hooks() {
    Outbox::Hooks hooks;
    hooks.start_write = [this](const api::PipelinedResult* out, grpc::WriteOptions options) {
      StartWrite(out, options);
    };
    hooks.finish = [this](grpc::Status status) { Finish(std::move(status)); };
    hooks.convert = [this](Outcome outcome, api::PipelinedResult* out) {
      grpc::Status status = ToGrpcStatus(outcome.result.status);
      Record(outcome, status.error_code());
      out->set_call(outcome.call);
      out->set_status_code(status.error_code());
      out->set_error(status.error_message());
      ToInvokeReply(&outcome.result, out->mutable_reply());
    };
    hooks.dropped = [this](const Outcome& outcome) {
      Record(outcome, ToGrpcStatus(outcome.result.status).error_code());
    };
    hooks.weigh = [](const Outcome& outcome) { return ResultBytes(outcome.result); };
    hooks.due_bytes_max = [](uint64_t largest) { return ResultsCutoff(largest); };
    hooks.overflow = [metrics = service_->metrics_](uint64_t due_bytes, uint64_t bound) {
      const std::string why = absl::StrCat(
          "this client does not read its results: ", due_bytes,
          " bytes of them wait at the daemon (more than ", bound,
          "): the stream is cut off and the results not written are dropped");
      Log("api")->warn("InvokeStream: {}", why);
      if (metrics != nullptr) metrics->RecordClientCutOff("grpc");
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, why);
    };
    return hooks;
  }

  void Record(const Outcome& outcome, grpc::StatusCode code) {
    if (service_->metrics_ == nullptr) return;
    std::chrono::duration<double> took = Clock::now() - outcome.start;
    service_->metrics_->RecordInvocation(ModeLabel(outcome.mode), CodeLabel(code), took.count());
  }

  ApiService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Outbox> outbox_;
  api::PipelinedCall call_;  // the read in progress
  absl::Mutex read_mu_;
  bool read_paused_ ABSL_GUARDED_BY(read_mu_) = false;  // too many results waiting: no read
};

grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult>* ApiService::InvokeStream(
    grpc::CallbackServerContext* context) {
  return new InvokeStreamReactor(this, context);
}

}  // namespace cohort::nso
