// ApiService::Serve: a servant's stream (its deliveries out, its answers in), served by a gRPC
// callback reactor. The first message registers the servant (on the protocol thread); from then
// on each delivery is written by the protocol thread that makes it when no write is in progress
// (nso/reactor_outbox.h: no writer thread per servant), and each answer read is handed to the
// protocol thread. The servant is unregistered once the stream ends, whichever side ends it.
#include <memory>
#include <utility>
#include <vector>

#include "nso/api_service.h"
#include "nso/reactor_outbox.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

// What the stream writes: the registration's acknowledgement, then deliveries.
struct ServeItem {
  bool registered = false;  // the acknowledgement (for `group`)
  std::string group;
  ServantDelivery delivery;
  uint64_t max_reply_bytes = 0;  // the acknowledgement's (Node::max_reply_bytes)
};

}  // namespace

class ServeReactor final : public grpc::ServerBidiReactor<api::ServantMessage, api::ServantEvent> {
 public:
  using Outbox = ReactorOutbox<ServeItem, api::ServantEvent>;

  ServeReactor(ApiService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context), shared_(std::make_shared<Shared>(Hooks())) {
    if (grpc::Status allowed = service_->Authenticated(context_); !allowed.ok()) {
      shared_->outbox.FinishWith(allowed);
      return;
    }
    StartRead(&in_);  // the registration
  }

  void OnReadDone(bool ok) override {
    if (!registering_) {
      registering_ = true;
      Register(ok);
      return;
    }
    if (!ok) {  // the servant closed its side, or went away
      Gone();
      return;
    }
    if (in_.has_answer()) {
      api::ServantMessage::Answer& answer = *in_.mutable_answer();
      absl::Status status(static_cast<absl::StatusCode>(answer.status_code()), answer.error());
      std::shared_ptr<Shared> shared = shared_;
      Node* node = service_->node_;
      service_->loop_->Post([node, shared, number = answer.delivery(), status,
                             more = answer.more(),
                             payload = std::move(*answer.mutable_payload())]() mutable {
        if (shared->servant != 0) node->Answer(shared->servant, number, status, std::move(payload), more);
      });
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    shared_->outbox.WriteDone(ok);
    if (!ok) Gone();
  }
  void OnCancel() override { Gone(); }
  void OnDone() override {
    shared_->outbox.Detach();
    Gone();
    delete this;
  }

 private:
  // What the reactor and the protocol thread share; outlives the reactor.
  struct Shared {
    explicit Shared(Outbox::Hooks hooks) : outbox(std::move(hooks)) {}
    Outbox outbox;
    // Protocol thread only: the registration (0 before and after), and the deliveries made
    // before its acknowledgement was queued.
    uint64_t servant = 0;
    bool acknowledged = false;
    std::vector<ServantDelivery> early;
    absl::Mutex mu;
    bool registered ABSL_GUARDED_BY(mu) = false;
    bool gone ABSL_GUARDED_BY(mu) = false;
  };

  void Register(bool ok) {
    if (!ok) {
      shared_->outbox.FinishWith(grpc::Status(grpc::StatusCode::CANCELLED, "no register"));
      return;
    }
    if (!in_.has_register_()) {
      shared_->outbox.FinishWith(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                              "the first servant message must be a register"));
      return;
    }
    const api::ServantMessage::Register& request = in_.register_();
    if (grpc::Status allowed = service_->Allowed(context_, request.group(), Right::kJoin);
        !allowed.ok()) {
      shared_->outbox.FinishWith(allowed);
      return;
    }
    // The task's outcome, the acknowledgement or a finish, is expected before Close.
    shared_->outbox.Expect();
    std::shared_ptr<Shared> shared = shared_;
    Node* node = service_->node_;
    const ServantKeptState kept{request.keeps_state(), request.kept_position(),
                                request.kept_view()};
    bool posted = service_->loop_->Post([node, shared, nso = request.nso(),
                                         group = request.group(), kept,
                                         views = request.view_events()] {
      // Deliveries made before the acknowledgement is queued wait for it: it is written first.
      absl::StatusOr<uint64_t> id = node->RegisterServant(nso, group, [shared](ServantDelivery d) {
        if (!shared->acknowledged) {
          shared->early.push_back(std::move(d));
          return;
        }
        shared->outbox.Push({false, "", std::move(d)}, /*expected=*/false);
      }, kept, views);
      if (!id.ok()) {
        shared->outbox.FinishWith(ToGrpcStatus(id.status()));
        return;
      }
      {
        absl::MutexLock lock(&shared->mu);
        if (shared->gone) {  // the stream ended meanwhile
          node->UnregisterServant(*id);
          return;
        }
        shared->registered = true;
      }
      shared->servant = *id;
      // Flow control (nso/group_flow.h): the deliveries not yet handed to gRPC are the servant's
      // backlog.
      node->SetServantHooks(
          *id,
          [shared] {
            const Outbox::Backlog backlog = shared->outbox.backlog();
            return ServantBacklog{backlog.due_bytes, backlog.written_bytes};
          },
          [shared](const absl::Status& why) {
            // Cut off (limits.servant_cutoff_bytes): what is due is dropped; the stream ends
            // once the write in progress is done (the servant reads again or goes).
            shared->servant = 0;  // the node unregistered it
            shared->outbox.FinishWith(ToGrpcStatus(why));
          });
      shared->outbox.Push({true, group, {}, node->max_reply_bytes()});
      shared->acknowledged = true;
      for (ServantDelivery& d : shared->early) {
        shared->outbox.Push({false, "", std::move(d)}, /*expected=*/false);
      }
      shared->early.clear();
    });
    if (!posted) {
      shared_->outbox.FinishWith(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "daemon overloaded or shutting down"));
      return;
    }
    // Answers (none can come before the servant has deliveries; the protocol thread ignores any
    // before the registration), or the end of the servant's side.
    StartRead(&in_);
  }

  // The stream ends: the servant is unregistered (once), and the outbox finishes when no write
  // is in progress.
  void Gone() {
    bool unregister = false;
    {
      absl::MutexLock lock(&shared_->mu);
      if (shared_->gone) return;
      shared_->gone = true;
      unregister = shared_->registered;
    }
    if (unregister) {
      std::shared_ptr<Shared> shared = shared_;
      Node* node = service_->node_;
      service_->loop_->Post([node, shared] {
        node->UnregisterServant(shared->servant);
        shared->servant = 0;
      });
    }
    shared_->outbox.Gone();
  }

  Outbox::Hooks Hooks() {
    Outbox::Hooks hooks;
    hooks.start_write = [this](const api::ServantEvent* out, grpc::WriteOptions options) {
      StartWrite(out, options);
    };
    hooks.finish = [this](grpc::Status status) { Finish(std::move(status)); };
    hooks.convert = [](ServeItem item, api::ServantEvent* out) {
      if (item.registered) {
        out->set_registered(true);
        out->set_group(item.group);
        out->set_max_reply_bytes(item.max_reply_bytes);
      } else {
        ToServantEvent(std::move(item.delivery), out);
      }
    };
    hooks.weigh = [](const ServeItem& item) -> uint64_t { return item.delivery.payload.size(); };
    return hooks;
  }

  ApiService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Shared> shared_;
  api::ServantMessage in_;  // the read in progress
  bool registering_ = false;
};

grpc::ServerBidiReactor<api::ServantMessage, api::ServantEvent>* ApiService::Serve(
    grpc::CallbackServerContext* context) {
  return new ServeReactor(this, context);
}

}  // namespace cohort::nso
