// ApiService::InvokeStream: pipelined invocations on one stream (issue 7; 000 MinORB: many
// outstanding calls per connection), served by a gRPC callback reactor. Each call read is handed
// to the protocol thread without waiting for it; its result is written by the thread that
// completes it when no write is in progress (the protocol thread: no hand-off to a writer thread,
// 001 section 3's "no thread switching along the call chain"), else queued and written, a burst
// as one batch, when the write in progress is done (on gRPC's thread). The protocol thread never
// blocks on the stream: a callback write only starts the write.
#include <chrono>
#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/api_service.h"
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

// One InvokeStream. gRPC deletes it (OnDone) after Finish, once its last operation is done. The
// protocol thread's completions reach it through `shared_`, which outlives it: a result completed
// after the stream finished (the client went away) is counted and dropped.
//
// At most one write is in progress (gRPC's rule): `writing_` says so. Finish is called once, when
// no write is in progress and nothing more is due: the client's side is closed and every call it
// sent has its result written, or the client is gone. So no write starts after Finish.
class InvokeStreamReactor final
    : public grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult> {
 public:
  InvokeStreamReactor(ApiService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), shared_(std::make_shared<Shared>()) {
    shared_->reactor = this;
    if (grpc::Status allowed = service_->Authenticated(context_); !allowed.ok()) {
      {
        absl::MutexLock lock(&shared_->mu);
        shared_->finished = true;
      }
      Finish(allowed);
      return;
    }
    StartRead(&call_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side, or went away
      Act(Take([](Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { s->reads_done = true; }));
      return;
    }
    const uint64_t id = call_.call();
    const api::Mode mode = call_.invoke().mode();
    const Clock::time_point start = Clock::now();
    {
      absl::MutexLock lock(&shared_->mu);
      ++shared_->in_flight;
    }
    if (grpc::Status allowed =
            service_->Allowed(context_, call_.invoke().group(), Right::kInvoke);
        !allowed.ok()) {
      Shared::Complete(shared_, Failed(id, mode, start, FromGrpcStatus(allowed)));
    } else if (absl::StatusOr<InvokeOptions> options = ToInvokeOptions(call_.invoke());
               !options.ok()) {
      Shared::Complete(shared_, Failed(id, mode, start, options.status()));
    } else {
      const uint64_t nso = call_.invoke().nso();
      Node* node = service_->node_;
      std::shared_ptr<Shared> shared = shared_;
      bool posted = service_->loop_->Post(
          [node, nso, options = *std::move(options), shared, id, mode, start]() mutable {
            node->Invoke(nso, std::move(options), [shared, id, mode, start](InvokeResult result) {
              Shared::Complete(shared, {id, mode, start, std::move(result)});
            });
          });
      if (!posted) {
        Shared::Complete(shared_, Failed(id, mode, start, absl::UnavailableError(
                                                              "daemon overloaded or shutting down")));
      }
    }
    StartRead(&call_);
  }

  void OnWriteDone(bool ok) override {
    Act(Take([ok](Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
      s->writing = false;
      if (!ok) s->gone = true;  // the client is gone: what is due is dropped
    }));
  }

  void OnCancel() override {
    Act(Take([](Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { s->gone = true; }));
  }

  void OnDone() override {
    {
      absl::MutexLock lock(&shared_->mu);
      shared_->reactor = nullptr;
    }
    delete this;
  }

 private:
  // What the reactor and the protocol thread's completions share.
  struct Shared {
    absl::Mutex mu;
    InvokeStreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;  // null after OnDone
    std::deque<Outcome> due ABSL_GUARDED_BY(mu);  // completed, not yet written
    uint64_t in_flight ABSL_GUARDED_BY(mu) = 0;   // read, not yet completed
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool reads_done ABSL_GUARDED_BY(mu) = false;
    bool gone ABSL_GUARDED_BY(mu) = false;  // cancelled, or a write failed
    bool finished ABSL_GUARDED_BY(mu) = false;

    // From any thread (the protocol thread, gRPC's): the call's result is ready.
    static void Complete(const std::shared_ptr<Shared>& shared, Outcome outcome);
  };

  // What to do, decided under the mutex and done outside it (a reaction may run inline in the
  // thread that starts an operation, and it takes the mutex).
  struct Step {
    InvokeStreamReactor* reactor = nullptr;
    std::deque<Outcome> write;  // start writing these (the last one without a buffer hint)
    std::deque<Outcome> drop;   // the client is gone: count them only
    bool finish = false;
  };

  template <typename Fn>
  Step Take(Fn&& change) {
    absl::MutexLock lock(&shared_->mu);
    change(shared_.get());
    return Next(shared_.get());
  }

  // Under s->mu: the next step after a change of state.
  static Step Next(Shared* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    Step step;
    step.reactor = s->reactor;
    if (s->gone) step.drop.swap(s->due);
    if (s->finished || step.reactor == nullptr) return step;
    if (!s->writing && !s->due.empty()) {
      s->writing = true;
      step.write.push_back(std::move(s->due.front()));
      s->due.pop_front();
      return step;
    }
    if (!s->writing && s->due.empty() && (s->gone || (s->reads_done && s->in_flight == 0))) {
      s->finished = true;
      step.finish = true;
    }
    return step;
  }

  void Act(Step step) { Act(service_, std::move(step)); }
  static void Act(ApiService* service, Step step);

  ApiService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Shared> shared_;
  api::PipelinedCall call_;   // the read in progress
  api::PipelinedResult out_;  // the write in progress
};

void InvokeStreamReactor::Shared::Complete(const std::shared_ptr<Shared>& shared,
                                           Outcome outcome) {
  Step step;
  ApiService* service = nullptr;
  {
    absl::MutexLock lock(&shared->mu);
    --shared->in_flight;
    shared->due.push_back(std::move(outcome));
    step = Next(shared.get());
    if (step.reactor != nullptr) service = step.reactor->service_;
  }
  if (service == nullptr) return;  // finished and deleted: nothing was written
  Act(service, std::move(step));
}

void InvokeStreamReactor::Act(ApiService* service, Step step) {
  auto record = [service](const Outcome& outcome, grpc::StatusCode code) {
    if (service->metrics_ == nullptr) return;
    std::chrono::duration<double> took = Clock::now() - outcome.start;
    service->metrics_->RecordInvocation(ModeLabel(outcome.mode), CodeLabel(code), took.count());
  };
  for (const Outcome& outcome : step.drop) {
    record(outcome, ToGrpcStatus(outcome.result.status).error_code());
  }
  InvokeStreamReactor* reactor = step.reactor;
  if (!step.write.empty()) {
    // Only the thread that set `writing` touches out_ until OnWriteDone.
    Outcome& outcome = step.write.front();
    grpc::Status status = ToGrpcStatus(outcome.result.status);
    record(outcome, status.error_code());
    api::PipelinedResult& out = reactor->out_;
    out.Clear();
    out.set_call(outcome.call);
    out.set_status_code(status.error_code());
    out.set_error(status.error_message());
    ToInvokeReply(std::move(outcome.result), out.mutable_reply());
    bool more;
    {
      absl::MutexLock lock(&reactor->shared_->mu);
      more = !reactor->shared_->due.empty();
    }
    grpc::WriteOptions options;
    if (more) options.set_buffer_hint();  // a burst goes out together
    reactor->StartWrite(&out, options);
  } else if (step.finish) {
    reactor->Finish(grpc::Status::OK);
  }
}

grpc::ServerBidiReactor<api::PipelinedCall, api::PipelinedResult>* ApiService::InvokeStream(
    grpc::CallbackServerContext* context) {
  return new InvokeStreamReactor(this, context);
}

}  // namespace cohort::nso
