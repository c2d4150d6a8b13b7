// Wires one daemon together: config -> Node on the protocol thread, the gRPC peer transport, and
// the gRPC servers for peers and applications. The one place where the pieces meet.
#ifndef COHORT_NSO_DAEMON_H_
#define COHORT_NSO_DAEMON_H_

#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "nso/api_service.h"
#include "nso/config.h"
#include "nso/event_loop.h"
#include "nso/grpc_transport.h"
#include "nso/node.h"

namespace cohort::nso {

class Daemon {
 public:
  explicit Daemon(Config config);
  ~Daemon();

  // Binds the peer and client addresses and starts serving. An error names what failed.
  absl::Status Start();
  // Graceful: stops accepting, finishes queued work, cancels calls in flight with a status.
  void Shutdown();

 private:
  const Config config_;
  std::unique_ptr<GrpcTransport> transport_;
  std::unique_ptr<Node> node_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ApiService> api_;
  std::unique_ptr<grpc::Server> peer_server_;
  std::unique_ptr<grpc::Server> client_server_;
  bool stopped_ = false;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_DAEMON_H_
