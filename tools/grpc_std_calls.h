// Client calls of the standard gRPC health and reflection services with the message copies of
// tools/grpc_std.proto (see there why they are copies). Header-only; for cohortctl and the tests.
#ifndef COHORT_TOOLS_GRPC_STD_CALLS_H_
#define COHORT_TOOLS_GRPC_STD_CALLS_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/impl/codegen/sync_stream.h>

#include "tools/grpc_std.pb.h"

namespace cohort::grpcstd {

// grpc.health.v1.Health/Check. `service` "" is the whole server.
inline grpc::Status HealthCheck(grpc::Channel* channel, const std::string& service,
                                HealthCheckResponse::ServingStatus* status, int timeout_ms = 2000) {
  static const grpc::internal::RpcMethod kMethod("/grpc.health.v1.Health/Check",
                                                 grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse reply;
  grpc::Status result = grpc::internal::BlockingUnaryCall(channel, kMethod, &context, request, &reply);
  *status = reply.status();
  return result;
}

// grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo with list_services.
inline grpc::Status ListServices(grpc::Channel* channel, std::vector<std::string>* services,
                                 int timeout_ms = 2000) {
  static const grpc::internal::RpcMethod kMethod(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  std::unique_ptr<grpc::ClientReaderWriter<ServerReflectionRequest, ServerReflectionResponse>>
      stream(grpc::internal::ClientReaderWriterFactory<
             ServerReflectionRequest, ServerReflectionResponse>::Create(channel, kMethod,
                                                                        &context));
  ServerReflectionRequest request;
  request.set_list_services("");
  ServerReflectionResponse reply;
  bool got = stream->Write(request) && stream->WritesDone() && stream->Read(&reply);
  grpc::Status status = stream->Finish();
  if (!status.ok()) return status;
  if (!got) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no reflection reply");
  if (reply.has_error_response()) {
    return grpc::Status(static_cast<grpc::StatusCode>(reply.error_response().error_code()),
                        reply.error_response().error_message());
  }
  for (const ServiceResponse& service : reply.list_services_response().service()) {
    services->push_back(service.name());
  }
  return grpc::Status::OK;
}

}  // namespace cohort::grpcstd

#endif  // COHORT_TOOLS_GRPC_STD_CALLS_H_
