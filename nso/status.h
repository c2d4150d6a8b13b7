// The one conversion between absl::Status and grpc::Status (STYLE.md, example 6).
// Both use the google.rpc.Code numbering, so the code maps 1:1.
#ifndef COHORT_NSO_STATUS_H_
#define COHORT_NSO_STATUS_H_

#include <string>

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace cohort::nso {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace cohort::nso

// Returns from the enclosing function if `expr` (an absl::Status) is not OK. Abseil 20220623 from
// Debian has no ABSL_RETURN_IF_ERROR, so it lives here, once.
#define COHORT_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::absl::Status cohort_status_ = (expr);     \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (0)

#endif  // COHORT_NSO_STATUS_H_
