// The daemon's gRPC API for applications (proto/api.proto): thin handlers that hand work to the
// protocol thread and wait for its answer (STYLE.md, example 8).
#ifndef COHORT_NSO_API_SERVICE_H_
#define COHORT_NSO_API_SERVICE_H_

#include <functional>

#include "nso/event_loop.h"
#include "nso/metrics.h"
#include "nso/node.h"
#include "proto/api.grpc.pb.h"

namespace cohort::nso {

class ApiService final : public api::Cohort::Service {
 public:
  ApiService(Node* node, EventLoop* loop) : node_(node), loop_(loop) {}
  // Optional: count invocations and multicasts, with latency (set before serving).
  void set_metrics(InvocationMetrics* metrics) { metrics_ = metrics; }

  grpc::Status Attach(grpc::ServerContext*, const api::AttachRequest*, api::AttachReply*) override;
  grpc::Status CreateGroup(grpc::ServerContext*, const api::CreateGroupRequest*,
                           api::Empty*) override;
  grpc::Status JoinGroup(grpc::ServerContext*, const api::GroupRequest*, api::Empty*) override;
  grpc::Status LeaveGroup(grpc::ServerContext*, const api::GroupRequest*, api::Empty*) override;
  grpc::Status GroupDetails(grpc::ServerContext*, const api::GroupRequest*,
                            api::GroupDetailsReply*) override;
  grpc::Status Multicast(grpc::ServerContext*, const api::MulticastRequest*, api::Empty*) override;
  grpc::Status Invoke(grpc::ServerContext*, const api::InvokeRequest*, api::InvokeReply*) override;
  grpc::Status Serve(grpc::ServerContext*,
                     grpc::ServerReaderWriter<api::ServantEvent, api::ServantMessage>*) override;

 private:
  // Runs `fn` on the protocol thread and waits for it; UNAVAILABLE if the daemon is overloaded.
  absl::Status RunOnLoop(std::function<absl::Status()> fn);
  grpc::Status InvokeOnLoop(const api::InvokeRequest* request, api::InvokeReply* reply);

  Node* node_;
  EventLoop* loop_;
  InvocationMetrics* metrics_ = nullptr;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_API_SERVICE_H_
