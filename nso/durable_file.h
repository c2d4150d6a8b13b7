// Files that must survive a crash of the daemon or of its machine: written whole to a temporary
// file, fsync'd, renamed over the old one, and the rename fsync'd, so a reader finds the old
// content or the new one, never part of either.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace cohort::nso {

// Replaces `path` with `bytes` durably (path + ".tmp" is the temporary file). The error names
// the file and what failed.
absl::Status WriteFileDurably(const std::string& path, const std::string& bytes);

}  // namespace cohort::nso
