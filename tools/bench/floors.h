// The floors: a plain gRPC unary echo and a raw TCP ping-pong between two processes on loopback.
// The servers run in a child process (this binary re-executed with --role echo-server|tcp-server).
#ifndef COHORT_TOOLS_BENCH_FLOORS_H_
#define COHORT_TOOLS_BENCH_FLOORS_H_

#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "tools/bench/workload.h"

namespace cohort::bench {

// Server roles; they return only on error (the parent kills them).
int RunGrpcEchoServer(int port);
int RunTcpEchoServer(int port);

// Shared by the ping-pong floors (this file's and tls_floor.h's):
// accepts on 127.0.0.1:port and serves each connection (TCP_NODELAY) on a thread of its own with
// `serve`, which owns the descriptor; returns only on error.
int ServeLoopback(int port, std::function<void(int fd)> serve);
// A TCP_NODELAY connection to 127.0.0.1:port (subprocess::ConnectLoopback), or -1 with *error
// set.
int ConnectLoopbackNoDelay(int port, std::string* error);
// A ping-pong frame: the payload's length (4 bytes, network order), then the payload.
std::string PingPongFrame(const std::string& payload);

// Callers of the gRPC echo share one channel (as callers of a cohort::Client share its channel).
CallFactory GrpcEchoCalls(std::shared_ptr<grpc::Channel> channel, std::string payload);
// Each caller of the TCP ping-pong owns a blocking TCP_NODELAY connection; frames are a 4-byte
// length followed by the payload, echoed back unchanged.
CallFactory TcpEchoCalls(int port, std::string payload);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_FLOORS_H_
