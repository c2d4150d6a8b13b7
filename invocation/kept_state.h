// The state a servant keeps on disk (Servant::KeepStateIn): its replicated object's state and the
// group's position of the last delivery in it (ServantEvent.group_seq), written durably after
// each delivery (nso/durable_file.h), so that a durable group whose every member restarted can
// resume from the most advanced state any member kept (nso/node_durable.cc).
//
// The file: a header of four text lines, then the state's bytes as OnGetState gave them.
//   cohort-kept-state 1
//   group NAME
//   position N
//   size BYTES
#ifndef COHORT_INVOCATION_KEPT_STATE_H_
#define COHORT_INVOCATION_KEPT_STATE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort::invocation {

struct KeptState {
  uint64_t position = 0;
  std::string state;
};

// The state kept in `path` for `group`; nullopt when there is no file (nothing kept yet). An
// error names the file and what is wrong with it (another group's, not such a file, cut short).
absl::StatusOr<std::optional<KeptState>> ReadKeptState(const std::string& path,
                                                       const std::string& group);

// Replaces the kept state durably.
absl::Status WriteKeptState(const std::string& path, const std::string& group,
                            const KeptState& kept);

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_KEPT_STATE_H_
