#include "nso/admin_service.h"

#include "nso/status.h"

namespace cohort::nso {

grpc::Status AdminService::Authenticated(grpc::ServerContext* context) const {
  if (policy_ == nullptr || context == nullptr) return grpc::Status::OK;
  std::string caller;
  return policy_->Authenticate(*context, &caller);
}

grpc::Status AdminService::Status(grpc::ServerContext* context, const api::StatusRequest*,
                                  api::StatusReply* reply) {
  if (grpc::Status allowed = Authenticated(context); !allowed.ok()) return allowed;
  absl::StatusOr<NodeSnapshot> snapshot = snapshot_();
  if (!snapshot.ok()) return ToGrpcStatus(snapshot.status());
  fill_status_(reply);
  reply->set_groups(static_cast<uint32_t>(snapshot->groups.size()));
  reply->set_pending_calls(snapshot->pending_calls);
  reply->set_nsos(snapshot->nsos_attached);
  for (const GroupSnapshot& group : snapshot->groups) {
    if (!group.HasMajority()) reply->add_minority_groups(group.name);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListGroups(grpc::ServerContext* context, const api::StatusRequest*,
                                      api::ListGroupsReply* reply) {
  if (grpc::Status allowed = Authenticated(context); !allowed.ok()) return allowed;
  absl::StatusOr<NodeSnapshot> snapshot = snapshot_();
  if (!snapshot.ok()) return ToGrpcStatus(snapshot.status());
  for (const GroupSnapshot& group : snapshot->groups) {
    api::GroupSummary* out = reply->add_groups();
    out->set_group(group.name);
    out->set_view_id(group.view_id);
    for (const GroupSnapshot::Member& member : group.members) {
      api::Member* m = out->add_members();
      m->set_name(member.name);
      m->set_node(member.node);
      m->set_suspected(member.suspected);
    }
    out->set_configured_members(group.configured_members);
    out->set_trusted(group.trusted);
    out->set_is_member(group.is_member);
    out->set_has_majority(group.HasMajority());
    out->set_ordering(group.ordering);
    out->set_durable(group.durable);
    out->set_resuming(group.resuming);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::Drain(grpc::ServerContext* context, const api::DrainRequest* request,
                                 api::DrainReply* reply) {
  if (grpc::Status allowed = Authenticated(context); !allowed.ok()) return allowed;
  if (!drain_) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "drain not available");
  absl::StatusOr<NodeSnapshot> before = snapshot_();
  if (!before.ok()) return ToGrpcStatus(before.status());
  for (const GroupSnapshot& group : before->groups) {
    if (!group.is_member) continue;
    if (policy_ != nullptr && context != nullptr) {
      grpc::Status allowed = policy_->Check(*context, group.name, Right::kAdmin);
      if (!allowed.ok()) return allowed;
    }
    reply->add_left(group.name);
  }
  drain_(request->timeout_ms() == 0 ? 5000 : request->timeout_ms());
  absl::StatusOr<NodeSnapshot> after = snapshot_();
  if (!after.ok()) return ToGrpcStatus(after.status());
  for (const GroupSnapshot& group : after->groups) {
    if (group.is_member) reply->add_still_member(group.name);
  }
  return grpc::Status::OK;
}

}  // namespace cohort::nso
