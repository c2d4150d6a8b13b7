// The administration API (proto/api.proto, service cohort.api.Admin) used by cohortctl and
// monitoring: daemon status and every group's view with suspicion and majority state.
#ifndef COHORT_NSO_ADMIN_SERVICE_H_
#define COHORT_NSO_ADMIN_SERVICE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "nso/metrics.h"
#include "proto/api.grpc.pb.h"

namespace cohort::nso {

class AdminService final : public api::Admin::Service {
 public:
  // `snapshot` samples the protocol state (on the protocol thread); `fill_status` adds what the
  // daemon knows without it (names, addresses, uptime, queue depth, serving).
  using SnapshotFn = std::function<absl::StatusOr<NodeSnapshot>()>;
  using StatusFn = std::function<void(api::StatusReply*)>;

  AdminService(SnapshotFn snapshot, StatusFn fill_status)
      : snapshot_(std::move(snapshot)), fill_status_(std::move(fill_status)) {}

  grpc::Status Status(grpc::ServerContext*, const api::StatusRequest*,
                      api::StatusReply* reply) override;
  grpc::Status ListGroups(grpc::ServerContext*, const api::StatusRequest*,
                          api::ListGroupsReply* reply) override;

 private:
  SnapshotFn snapshot_;
  StatusFn fill_status_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_ADMIN_SERVICE_H_
