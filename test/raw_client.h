// What another language's client does over the API (proto/api.proto): a stub and an NSO attached
// with it, without the C++ client library. For tests of what a daemon does with such a peer.
#ifndef COHORT_TEST_RAW_CLIENT_H_
#define COHORT_TEST_RAW_CLIENT_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "proto/api.grpc.pb.h"

namespace cohort::test {

struct RawClient {
  std::unique_ptr<api::Cohort::Stub> stub;
  uint64_t nso = 0;  // 0: the Attach failed
  std::string local_api;   // AttachReply: the daemon's local fast path, and the key it wants
  uint64_t local_key = 0;
};

// Attaches an NSO named `client_name` over `channel`.
inline RawClient AttachRaw(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& client_name) {
  RawClient raw;
  raw.stub = api::Cohort::NewStub(channel);
  grpc::ClientContext context;
  api::AttachRequest attach;
  attach.set_client_name(client_name);
  api::AttachReply attached;
  if (!raw.stub->Attach(&context, attach, &attached).ok()) return raw;
  raw.nso = attached.nso();
  raw.local_api = attached.local_api();
  raw.local_key = attached.local_key();
  return raw;
}

// The first message of a raw servant's Serve stream: it registers NSO `nso` for `group`.
inline api::ServantMessage RegisterMessage(uint64_t nso, const std::string& group,
                                           bool view_events = false) {
  api::ServantMessage message;
  message.mutable_register_()->set_nso(nso);
  message.mutable_register_()->set_group(group);
  message.mutable_register_()->set_view_events(view_events);
  return message;
}

// A channel to `address` whose gRPC library takes in at most 64 KiB that its caller has not read,
// not the megabytes its flow-control window grows to by default: what it would take in is in the
// client's memory, not the daemon's, so a test of what the daemon keeps for a client that does
// not read needs this one.
inline std::shared_ptr<grpc::Channel> SmallWindowChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 65536);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

}  // namespace cohort::test

#endif  // COHORT_TEST_RAW_CLIENT_H_
