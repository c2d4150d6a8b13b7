// The daemon's incarnation, kept on disk (the `incarnation_file` key): a restarted daemon knows
// it restarted. Without it, a member that never heard the earlier process in a view takes the
// new one for it (RELIABILITY.md "A process never heard before it restarted"); with it, the new
// process says which one it follows (Envelope.previous_incarnation, Node::RestartedFrom).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace cohort::nso {

struct Incarnations {
  uint64_t current = 0;   // this start's
  uint64_t previous = 0;  // the last start's, from the file (0: no file, a first start)
};

// Reads `path` (one decimal number: the last start's incarnation; absent: a first start) and
// writes this start's back durably (nso/durable_file.h) before the daemon speaks to anyone.
// This start's is `now_us` (the wall clock), or one more than the last if the clock is behind
// it, so incarnations grow across a clock set back. Errors name the file and what is wrong: a
// file that is not one number is refused, not overwritten (it may be another file).
absl::StatusOr<Incarnations> NextIncarnation(const std::string& path, uint64_t now_us);

}  // namespace cohort::nso
