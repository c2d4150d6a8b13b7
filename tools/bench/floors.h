// The floors: a plain gRPC unary echo and a raw TCP ping-pong between two processes on loopback.
// The servers run in a child process (this binary re-executed with --role echo-server|tcp-server).
#ifndef COHORT_TOOLS_BENCH_FLOORS_H_
#define COHORT_TOOLS_BENCH_FLOORS_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "tools/bench/workload.h"

namespace cohort::bench {

// Server roles; they return only on error (the parent kills them).
int RunGrpcEchoServer(int port);
int RunTcpEchoServer(int port);

// Callers of the gRPC echo share one channel (as callers of a cohort::Client share its channel).
CallFactory GrpcEchoCalls(std::shared_ptr<grpc::Channel> channel, std::string payload);
// Each caller of the TCP ping-pong owns a blocking TCP_NODELAY connection; frames are a 4-byte
// length followed by the payload, echoed back unchanged.
CallFactory TcpEchoCalls(int port, std::string payload);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_FLOORS_H_
