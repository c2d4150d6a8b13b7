// Pipelined invocations over the daemon's local fast path (nso/local_api.h): like CallStream
// (call_stream.h) but on a LocalLink: the caller writes its own call frame (no writer thread),
// one reader thread matches results to callers by call number. A broken link fails the calls on it
// with UNAVAILABLE and the next call opens a new one.
#ifndef COHORT_INVOCATION_LOCAL_CALLS_H_
#define COHORT_INVOCATION_LOCAL_CALLS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/local_link.h"
#include "proto/api.pb.h"

namespace cohort {

struct GroupReplies;

namespace internal {

class LocalCalls {
 public:
  // Takes the link Open() made (the proof that the fast path works); reopens with `endpoint`.
  LocalCalls(LocalEndpoint endpoint, std::unique_ptr<LocalLink> first);
  ~LocalCalls();  // shuts the link and joins its reader; no call may be in progress
  LocalCalls(const LocalCalls&) = delete;
  LocalCalls& operator=(const LocalCalls&) = delete;

  // Sends the invocation and waits at most `wait` for its result. Thread-safe. Nullopt when the
  // fast path cannot be opened any more (e.g. the daemon restarted, with a new socket and key):
  // the caller goes over gRPC, which gets the daemon's own answer.
  std::optional<absl::StatusOr<GroupReplies>> Invoke(const api::InvokeRequest& request,
                                                     absl::Duration wait);

 private:
  struct Pending;
  struct Connection {
    std::unique_ptr<LocalLink> link;
    std::thread reader;
    bool broken = false;  // guarded by LocalCalls::mu_
  };

  absl::StatusOr<std::shared_ptr<Connection>> Current();
  std::shared_ptr<Connection> Adopt(std::unique_ptr<LocalLink> link)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadResults(Connection* connection);
  bool Complete(uint64_t call, absl::StatusOr<GroupReplies> result);

  const LocalEndpoint endpoint_;
  absl::Mutex mu_;
  std::shared_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, Pending*> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_call_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace internal
}  // namespace cohort

#endif  // COHORT_INVOCATION_LOCAL_CALLS_H_
