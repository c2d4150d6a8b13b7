// Files that must survive a crash of the daemon or of its machine: written whole to a temporary
// file, fsync'd, renamed over the old one, and the rename fsync'd, so a reader finds the old
// content or the new one, never part of either; and read back whole.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cohort::nso {

// Replaces `path` with `bytes` durably (path + ".tmp" is the temporary file). The error names
// the file and what failed.
absl::Status WriteFileDurably(const std::string& path, const std::string& bytes);

// The whole content of `path`. NotFoundError if it does not exist (a first start); otherwise an
// error "\"PATH\": cannot read: REASON".
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// The directory `path` is in ("." for a name without one).
std::string DirectoryOf(const std::string& path);

}  // namespace cohort::nso
