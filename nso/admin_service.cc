#include "nso/admin_service.h"

#include "nso/status.h"

namespace cohort::nso {

grpc::Status AdminService::Status(grpc::ServerContext*, const api::StatusRequest*,
                                  api::StatusReply* reply) {
  absl::StatusOr<NodeSnapshot> snapshot = snapshot_();
  if (!snapshot.ok()) return ToGrpcStatus(snapshot.status());
  fill_status_(reply);
  reply->set_groups(static_cast<uint32_t>(snapshot->groups.size()));
  reply->set_pending_calls(snapshot->pending_calls);
  for (const GroupSnapshot& group : snapshot->groups) {
    if (!group.HasMajority()) reply->add_minority_groups(group.name);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListGroups(grpc::ServerContext*, const api::StatusRequest*,
                                      api::ListGroupsReply* reply) {
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
  }
  return grpc::Status::OK;
}

}  // namespace cohort::nso
