// The administration API (proto/api.proto, service cohort.api.Admin) used by cohortctl and
// monitoring: daemon status and every group's view with suspicion and majority state.
#ifndef COHORT_NSO_ADMIN_SERVICE_H_
#define COHORT_NSO_ADMIN_SERVICE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "nso/api_service.h"
#include "nso/metrics.h"
#include "proto/api.grpc.pb.h"

namespace cohort::nso {

class AdminService final : public api::Admin::Service {
 public:
  // `snapshot` samples the protocol state (on the protocol thread); `fill_status` adds what the
  // daemon knows without it (names, addresses, uptime, queue depth, serving).
  using SnapshotFn = std::function<absl::StatusOr<NodeSnapshot>()>;
  using StatusFn = std::function<void(api::StatusReply*)>;

  // Runs the drain (Daemon::Drain) with a timeout in milliseconds.
  using DrainFn = std::function<void(uint64_t timeout_ms)>;

  AdminService(SnapshotFn snapshot, StatusFn fill_status, DrainFn drain = nullptr,
               const AccessPolicy* policy = nullptr)
      : snapshot_(std::move(snapshot)),
        fill_status_(std::move(fill_status)),
        drain_(std::move(drain)),
        policy_(policy) {}

  grpc::Status Status(grpc::ServerContext*, const api::StatusRequest*,
                      api::StatusReply* reply) override;
  grpc::Status ListGroups(grpc::ServerContext*, const api::StatusRequest*,
                          api::ListGroupsReply* reply) override;
  // Needs the admin right on every group this daemon is a member of.
  grpc::Status Drain(grpc::ServerContext*, const api::DrainRequest*,
                     api::DrainReply* reply) override;

 private:
  grpc::Status Authenticated(grpc::ServerContext* context) const;

  SnapshotFn snapshot_;
  StatusFn fill_status_;
  DrainFn drain_;
  const AccessPolicy* policy_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_ADMIN_SERVICE_H_
