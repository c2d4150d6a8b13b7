// Client::WatchGroup through a daemon's gRPC API (api WatchGroup, a server stream): a thread of
// the watch reads the stream and follows the daemon through a restart, or to the next of the
// client's daemons after a failover, by watching again until one answers.
#ifndef COHORT_INVOCATION_REMOTE_WATCH_H_
#define COHORT_INVOCATION_REMOTE_WATCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "invocation/backend.h"
#include "proto/api.pb.h"

namespace cohort::internal {

// Reads the first reply (handed to on_change) before it returns, so that the errors of a first
// watch (an unknown group, a daemon that does not answer) are the caller's. After that:
// - UNAVAILABLE (the daemon went) is a loss: on_lost, then a new watch every 50 ms to 1 s, and
//   on_change gets the first reply of the new watch when it differs from the last one given;
// - any other end (NOT_FOUND: the group was deleted) ends the watch: on_end, once.
absl::StatusOr<std::unique_ptr<GroupWatch>> StartRemoteWatch(
    std::shared_ptr<grpc::Channel> channel, std::string token, api::GroupRequest request,
    ClientBackend::WatchHandlers handlers);

}  // namespace cohort::internal

#endif  // COHORT_INVOCATION_REMOTE_WATCH_H_
