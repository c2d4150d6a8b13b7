// The calls a durable group's servant keeps with its state (Servant::KeepStateIn): the latest
// ones, each with its answer, written in the kept-state file after the state (kept_state.h) and
// given back to the daemon when the group is re-founded from that state (kept_calls.h: a call
// resent across a power cut is then answered as it was, not executed again).
//
// Bounded by kKeptCallsMax calls and kKeptCallsMaxBytes (the oldest go first). Each call is held
// serialized as a field of api::KeptCalls, so writing the log is one concatenation.
#ifndef COHORT_INVOCATION_KEPT_CALL_LOG_H_
#define COHORT_INVOCATION_KEPT_CALL_LOG_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/api.pb.h"

namespace cohort::invocation {

class KeptCallLog {
 public:
  // A call (ServantEvent.call; ignored if empty) answered with `result` (one-way: OK, nothing).
  void Add(const std::string& call, const absl::StatusOr<std::string>& result);
  // Replaced by the calls of a transferred state (ServantEvent.kept_calls).
  void Replace(const api::KeptCalls& calls);
  // Replaced by the calls kept in a file (a serialized api::KeptCalls); an error if they are not.
  absl::Status ReplaceFrom(const std::string& bytes);
  void Clear();
  // The log as a serialized api::KeptCalls.
  std::string Bytes() const;
  size_t size() const { return records_.size(); }

 private:
  void Push(const api::KeptCall& call);

  std::deque<std::string> records_;  // each an api::KeptCalls `calls` field: tag, length, call
  size_t bytes_ = 0;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_KEPT_CALL_LOG_H_
