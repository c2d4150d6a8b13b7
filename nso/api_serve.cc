// ApiService::Serve: a servant's stream, on gRPC's callback API. The first message registers the
// servant (on the protocol thread); the registration's acknowledgement is the stream's first write.
// The protocol thread hands each delivery to the stream and starts its write itself when no write
// is in progress, without a hand-off to another thread; when one is, the delivery is queued and
// the write in progress sends the queue when it is done (OnWriteDone), a burst as one batch of
// writes. Answers arrive in OnReadDone and are posted to the protocol thread. When either side
// ends, the stream is cancelled and the servant unregistered.
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/api_service.h"
#include "nso/status.h"

namespace cohort::nso {

// It owns itself from Serve until gRPC is done with it (OnDone); the node's delivery sink holds it
// too until the servant is unregistered, so a late delivery finds it (and is dropped).
class ApiService::ServantStream final
    : public grpc::ServerBidiReactor<api::ServantMessage, api::ServantEvent>,
      public std::enable_shared_from_this<ServantStream> {
 public:
  static ServantStream* Start(ApiService* service, grpc::CallbackServerContext* context) {
    std::shared_ptr<ServantStream> stream(new ServantStream(service, context));
    stream->self_ = stream;
    if (grpc::Status allowed = service->Authenticated(context); !allowed.ok()) {
      stream->finishing_ = true;  // nothing else runs yet: no lock needed
      stream->Finish(allowed);
    } else {
      stream->StartRead(&stream->message_);
    }
    return stream.get();
  }

 private:
  ServantStream(ApiService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {}

  void OnReadDone(bool ok) override {
    bool registered;
    {
      absl::MutexLock lock(&mu_);
      registered = registered_;
    }
    if (!registered) return Register(ok);
    if (!ok) return End(/*reads_done=*/true);
    if (message_.has_answer()) {
      const api::ServantMessage::Answer& answer = message_.answer();
      absl::Status status(static_cast<absl::StatusCode>(answer.status_code()), answer.error());
      service_->loop_->Post([service = service_, servant = servant_, number = answer.delivery(),
                             status, more = answer.more(),
                             payload = std::move(*message_.mutable_answer()->mutable_payload())]()
                                mutable {
        service->node_->Answer(servant, number, status, std::move(payload), more);
      });
    }
    StartRead(&message_);
  }

  // The first message: a register, checked and handed to the protocol thread.
  void Register(bool ok) {
    grpc::Status refused;
    if (!ok) {
      refused = grpc::Status(grpc::StatusCode::CANCELLED, "no register");
    } else if (!message_.has_register_()) {
      refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "the first servant message must be a register");
    } else {
      refused = service_->Allowed(context_, message_.register_().group(), Right::kJoin);
    }
    if (refused.ok()) {
      api::ServantMessage::Register request = message_.register_();
      bool posted = service_->loop_->Post(
          [self = shared_from_this(), request = std::move(request)] { self->Registered(request); });
      if (posted) return;
      refused = ToGrpcStatus(
          absl::UnavailableError("daemon overloaded or shutting down: request queue full"));
    }
    FinishNow(refused);
  }

  // On the protocol thread.
  void Registered(const api::ServantMessage::Register& request) {
    absl::StatusOr<uint64_t> id = service_->node_->RegisterServant(
        request.nso(), request.group(), [self = shared_from_this()](ServantDelivery delivery) {
          self->Deliver(std::move(delivery));
        });
    if (!id.ok()) return FinishNow(ToGrpcStatus(id.status()));
    servant_ = *id;
    api::ServantEvent ack;
    ack.set_registered(true);
    ack.set_group(request.group());
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      registered_ = true;
      // The acknowledgement goes first, ahead of any delivery queued meanwhile.
      queued_.insert(queued_.begin(), std::move(ack));
      if (!writing_) {
        writing_ = start = true;
        TakeQueuedLocked();
      }
    }
    if (start) WriteNext();
    StartRead(&message_);  // the answers
  }

  // On the protocol thread: one delivery for the servant.
  void Deliver(ServantDelivery delivery) {
    api::ServantEvent event;
    event.set_delivery(delivery.delivery);
    event.set_group(delivery.group);
    event.set_method(delivery.method);
    event.set_payload(std::move(delivery.payload));
    event.set_one_way(delivery.one_way);
    event.set_view_id(delivery.view_id);
    event.set_group_seq(delivery.group_seq);
    event.set_state_offset(delivery.state_offset);
    event.set_state_last(delivery.state_last);
    bool start = false;
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return;  // the servant is gone
      queued_.push_back(std::move(event));
      if (!registered_ || writing_) return;  // sent after the acknowledgement / the write
      writing_ = start = true;
      TakeQueuedLocked();
    }
    WriteNext();
  }

  void TakeQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    sending_.clear();
    sending_.swap(queued_);
    next_ = 0;
  }

  // By the one writer (whoever set writing_): no lock needed for sending_ and next_.
  void WriteNext() {
    grpc::WriteOptions options;
    if (next_ + 1 < sending_.size()) options.set_buffer_hint();  // the burst goes out together
    StartWrite(&sending_[next_], options);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return End(/*reads_done=*/false);  // the servant is gone
    bool more;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (ending_) {
        writing_ = false;
      } else if (++next_ < sending_.size()) {
        // The next one of the burst.
      } else if (!queued_.empty()) {
        TakeQueuedLocked();
      } else {
        writing_ = false;
      }
      more = writing_;
      if (!writing_) finish = FinishLocked();
    }
    if (more) WriteNext();
    if (finish) Finished();
  }

  // Either side ended: the stream is cancelled (the other side ends too), nothing more is sent,
  // and the stream finishes once its reads are done and no write is in progress.
  void End(bool reads_done) {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      if (reads_done) reads_done_ = true;
      if (!reads_done) writing_ = false;  // the failed write was the writer's last
      ending_ = true;
      queued_.clear();
      finish = FinishLocked();
    }
    context_->TryCancel();
    if (finish) Finished();
  }

  bool FinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_ || !ending_ || !reads_done_ || writing_) return false;
    finishing_ = true;
    return true;
  }

  // The servant's stream is over: unregister it (its sink lets go of us) and finish.
  void Finished() {
    service_->loop_->Post([service = service_, servant = servant_] {
      service->node_->UnregisterServant(servant);
    });
    Finish(grpc::Status::OK);
  }

  // Refused before registration (no read or write in progress).
  void FinishNow(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      ending_ = reads_done_ = finishing_ = true;
    }
    Finish(std::move(status));
  }

  void OnDone() override {
    std::shared_ptr<ServantStream> self = std::move(self_);  // freed once the sink lets go
  }

  ApiService* const service_;
  grpc::CallbackServerContext* const context_;
  std::shared_ptr<ServantStream> self_;  // gRPC's reference, until OnDone
  api::ServantMessage message_;          // the read in progress (one at a time)
  uint64_t servant_ = 0;                 // set before the first answer can be read
  std::vector<api::ServantEvent> sending_;  // the writer's burst (one writer at a time)
  size_t next_ = 0;                         // its write in progress
  absl::Mutex mu_;
  std::vector<api::ServantEvent> queued_ ABSL_GUARDED_BY(mu_);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;  // the acknowledgement is queued or sent
  bool writing_ ABSL_GUARDED_BY(mu_) = false;     // someone is the writer
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;      // a side ended: nothing more is sent
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;   // Finish called
};

grpc::ServerBidiReactor<api::ServantMessage, api::ServantEvent>* ApiService::Serve(
    grpc::CallbackServerContext* context) {
  return ServantStream::Start(this, context);
}

}  // namespace cohort::nso
