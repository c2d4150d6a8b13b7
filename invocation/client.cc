#include "invocation/client.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "nso/status.h"

namespace cohort {
namespace {

api::Mode ToApiMode(Mode mode) {
  switch (mode) {
    case Mode::kOneWay: return api::ONE_WAY;
    case Mode::kFirst: return api::WAIT_FIRST;
    case Mode::kMajority: return api::WAIT_MAJORITY;
    case Mode::kAll: return api::WAIT_ALL;
  }
  return api::MODE_UNSPECIFIED;
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

}  // namespace

std::shared_ptr<grpc::Channel> DaemonChannel(const std::string& address) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
}

Client::Client(std::shared_ptr<grpc::Channel> channel, uint64_t nso, std::string node_name)
    : channel_(std::move(channel)),
      stub_(api::Cohort::NewStub(channel_)),
      nso_(nso),
      node_name_(std::move(node_name)) {}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const std::string& client_name,
                                                        absl::Duration timeout) {
  auto channel = DaemonChannel(address);
  auto stub = api::Cohort::NewStub(channel);
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  context.set_wait_for_ready(true);
  api::AttachRequest request;
  request.set_client_name(client_name);
  api::AttachReply reply;
  grpc::Status status = stub->Attach(&context, request, &reply);
  if (!status.ok()) {
    return absl::Status(nso::FromGrpcStatus(status).code(),
                        absl::StrCat("attach to daemon at ", address, ": ", status.error_message()));
  }
  return std::unique_ptr<Client>(new Client(std::move(channel), reply.nso(), reply.node_name()));
}

absl::StatusOr<GroupReplies> Client::Call(const std::string& group, const std::string& method,
                                          const std::string& payload, api::Mode mode,
                                          absl::Duration deadline, Style style) {
  api::InvokeRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  request.set_method(method);
  request.set_payload(payload);
  request.set_mode(mode);
  if (style == Style::kOpen) request.set_style(api::OPEN);
  if (style == Style::kClosed) request.set_style(api::CLOSED);
  int64_t deadline_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline));
  request.set_deadline_ms(static_cast<uint32_t>(std::min<int64_t>(deadline_ms, UINT32_MAX)));
  grpc::ClientContext context;
  // The daemon enforces the deadline and answers with what it has; the transport gets slack.
  SetDeadline(&context, deadline + absl::Seconds(2));
  api::InvokeReply reply;
  grpc::Status status = stub_->Invoke(&context, request, &reply);
  if (!status.ok()) return nso::FromGrpcStatus(status);
  GroupReplies result;
  result.view_id = reply.view_id();
  result.wanted = reply.wanted();
  for (const api::ReplyFrom& from : reply.replies()) {
    result.replies.push_back({from.member(), from.node(),
                              absl::Status(static_cast<absl::StatusCode>(from.status_code()),
                                           from.error()),
                              from.payload()});
  }
  return result;
}

absl::StatusOr<GroupReplies> Client::Invoke(const std::string& group, const std::string& method,
                                            const std::string& payload, Mode mode,
                                            absl::Duration deadline, Style style) {
  return Call(group, method, payload, ToApiMode(mode), deadline, style);
}

absl::StatusOr<GroupReplies> Client::InvokeDefault(const std::string& group,
                                                   const std::string& method,
                                                   const std::string& payload,
                                                   absl::Duration deadline) {
  return Call(group, method, payload, api::MODE_UNSPECIFIED, deadline);
}

absl::Status Client::Send(const std::string& group, const std::string& method,
                          const std::string& payload) {
  return Call(group, method, payload, api::ONE_WAY, absl::Seconds(5)).status();
}

absl::Status Client::Multicast(const std::string& group, const std::string& payload) {
  api::MulticastRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  request.set_payload(payload);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  api::Empty reply;
  return nso::FromGrpcStatus(stub_->Multicast(&context, request, &reply));
}

absl::StatusOr<View> Client::GroupDetails(const std::string& group) {
  api::GroupRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  api::GroupDetailsReply reply;
  grpc::Status status = stub_->GroupDetails(&context, request, &reply);
  if (!status.ok()) return nso::FromGrpcStatus(status);
  View view;
  view.group = reply.group();
  view.view_id = reply.view_id();
  view.ordering = reply.ordering();
  view.liveness = reply.liveness();
  for (const api::Member& member : reply.members()) {
    view.members.push_back({member.name(), member.node(), member.suspected()});
  }
  return view;
}

absl::Status Client::JoinGroup(const std::string& group) {
  api::GroupRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  api::Empty reply;
  return nso::FromGrpcStatus(stub_->JoinGroup(&context, request, &reply));
}

absl::Status Client::LeaveGroup(const std::string& group) {
  api::GroupRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  grpc::ClientContext context;
  SetDeadline(&context, absl::Seconds(5));
  api::Empty reply;
  return nso::FromGrpcStatus(stub_->LeaveGroup(&context, request, &reply));
}

}  // namespace cohort
