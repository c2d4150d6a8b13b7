// gRPC keepalive on every connection between an application and its daemon and between daemons
// (the gRPC peer transport). A connection whose other end vanished without a word (its machine
// lost power, a partition that drops packets) is found within kKeepaliveTimeMs +
// kKeepaliveTimeoutMs and closed on both sides, instead of being kept until TCP gives up (about
// 15 minutes with data unacknowledged, never without): the daemon ends the streams of a client
// or a servant that is gone, and a client sees UNAVAILABLE and connects again.
#ifndef COHORT_NSO_KEEPALIVE_H_
#define COHORT_NSO_KEEPALIVE_H_

#include <grpcpp/grpcpp.h>

namespace cohort::nso {

inline constexpr int kKeepaliveTimeMs = 10000;    // a ping after this long without traffic
inline constexpr int kKeepaliveTimeoutMs = 5000;  // unanswered this long: the connection is gone
// The most often a daemon lets a peer ping without data: gRPC's default (5 minutes) would end
// the connection of a client pinging every 10 s ("too_many_pings").
inline constexpr int kMinPingIntervalMs = 5000;

// A client's channel (an application's, a servant's, a daemon dialling a peer).
inline void AddKeepalive(grpc::ChannelArguments* arguments) {
  arguments->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  arguments->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  arguments->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a quiet stream is pinged too
}

// A daemon's server (the client port, the gRPC peer port).
inline void AddKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              kMinPingIntervalMs);
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_KEEPALIVE_H_
