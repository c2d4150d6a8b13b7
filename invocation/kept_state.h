// The state a servant keeps on disk (Servant::KeepStateIn): its replicated object's state and the
// group's position of the last delivery in it (ServantEvent.group_seq), written durably after
// each delivery (nso/durable_file.h), so that a durable group whose every member restarted can
// resume from the most advanced state any member kept (nso/node_durable.cc).
//
// The file: a header of six text lines, the state's bytes as OnGetState gave them, then the
// calls kept with it (a serialized api::KeptCalls: what the latest calls answered, so that a call
// resent after every member restarted is answered as it was, not executed again).
//   cohort-kept-state 3
//   group NAME
//   position N
//   view V
//   size BYTES
//   calls BYTES
// `view`: the last view the servant knew of, so that the group re-founded from kept states
// numbers its view above every view it had (view ids only grow: Servant::OnViewChange).
// Files of version 2 (no view line) and 1 (no view or calls line, no calls) are still read.
#ifndef COHORT_INVOCATION_KEPT_STATE_H_
#define COHORT_INVOCATION_KEPT_STATE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort::invocation {

struct KeptState {
  uint64_t position = 0;
  std::string state;
  std::string calls;  // a serialized api::KeptCalls (empty: none)
  uint64_t view = 0;  // the last view known with it; 0: not known (a file of version 1 or 2)
};

// The calls a servant keeps with its state: the latest ones, at most this many and this many bytes
// (the oldest go first). A call resent after a power cut was delivered among the latest.
inline constexpr size_t kKeptCallsMax = 4096;
inline constexpr size_t kKeptCallsMaxBytes = 1 << 20;

// The state kept in `path` for `group`; nullopt when there is no file (nothing kept yet). An
// error names the file and what is wrong with it (another group's, not such a file, cut short).
absl::StatusOr<std::optional<KeptState>> ReadKeptState(const std::string& path,
                                                       const std::string& group);

// Replaces the kept state durably.
absl::Status WriteKeptState(const std::string& path, const std::string& group,
                            const KeptState& kept);

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_KEPT_STATE_H_
