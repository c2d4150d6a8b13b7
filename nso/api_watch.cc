// ApiService::WatchGroup: a group's view and suspicions as this daemon sees them, written as they
// change (Node::WatchGroup, looked at every Tick), by the protocol thread when no write is in
// progress (nso/reactor_outbox.h); details not yet written are replaced by newer ones, so a
// watcher that does not read holds one message at its daemon. The watch ends when the caller cancels, or with NOT_FOUND
// when the group goes.
#include <memory>
#include <utility>

#include "nso/api_service.h"
#include "nso/reactor_outbox.h"
#include "nso/status.h"

namespace cohort::nso {

class WatchReactor final : public grpc::ServerWriteReactor<api::GroupDetailsReply> {
 public:
  using Outbox = ReactorOutbox<api::GroupDetailsReply, api::GroupDetailsReply>;

  WatchReactor(ApiService* service, grpc::CallbackServerContext* context,
               const api::GroupRequest& request)
      : service_(service), shared_(std::make_shared<Shared>(Hooks())) {
    if (grpc::Status allowed = service_->Allowed(context, request.group(), Right::kInvoke);
        !allowed.ok()) {
      shared_->outbox.FinishWith(allowed);
      return;
    }
    std::shared_ptr<Shared> shared = shared_;
    Node* node = service_->node_;
    bool posted = service_->loop_->Post([node, shared, group = request.group()] {
      {
        absl::MutexLock lock(&shared->mu);
        if (shared->gone) return;  // cancelled before it started
      }
      absl::StatusOr<uint64_t> id =
          node->WatchGroup(group, [shared](absl::StatusOr<GroupInfo> info) {
            if (!info.ok()) return shared->outbox.FinishWith(ToGrpcStatus(info.status()));
            api::GroupDetailsReply reply;
            ToGroupDetailsReply(*info, &reply);
            // A watcher that does not keep up gets the latest details, not each one between.
            shared->outbox.PushLatest(std::move(reply));
          });
      if (!id.ok()) return shared->outbox.FinishWith(ToGrpcStatus(id.status()));
      shared->watch = *id;
    });
    if (!posted) {
      shared_->outbox.FinishWith(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "daemon overloaded or shutting down"));
    }
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
    uint64_t watch = 0;  // protocol thread only: the node's watch (0: none)
    absl::Mutex mu;
    bool gone ABSL_GUARDED_BY(mu) = false;
  };

  // The caller is gone: the node's watch ends (once), and the outbox finishes.
  void Gone() {
    {
      absl::MutexLock lock(&shared_->mu);
      if (shared_->gone) return;
      shared_->gone = true;
    }
    std::shared_ptr<Shared> shared = shared_;
    Node* node = service_->node_;
    service_->loop_->Post([node, shared] {
      if (shared->watch != 0) node->Unwatch(shared->watch);
      shared->watch = 0;
    });
    shared_->outbox.Gone();
  }

  Outbox::Hooks Hooks() {
    Outbox::Hooks hooks;
    hooks.start_write = [this](const api::GroupDetailsReply* out, grpc::WriteOptions options) {
      StartWrite(out, options);
    };
    hooks.finish = [this](grpc::Status status) { Finish(std::move(status)); };
    hooks.convert = [](api::GroupDetailsReply item, api::GroupDetailsReply* out) {
      *out = std::move(item);
    };
    return hooks;
  }

  ApiService* const service_;
  const std::shared_ptr<Shared> shared_;
};

grpc::ServerWriteReactor<api::GroupDetailsReply>* ApiService::WatchGroup(
    grpc::CallbackServerContext* context, const api::GroupRequest* request) {
  return new WatchReactor(this, context, *request);
}

}  // namespace cohort::nso
