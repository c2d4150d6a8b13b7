#include "invocation/kept_state.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "nso/durable_file.h"

namespace cohort::invocation {
namespace {

constexpr absl::string_view kMagic = "cohort-kept-state 1";

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("kept state \"", path, "\": ", what));
}

// The value of header line `line` ("KEY VALUE").
bool Field(absl::string_view line, absl::string_view key, absl::string_view* value) {
  if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) return false;
  *value = line;
  return true;
}

}  // namespace

absl::StatusOr<std::optional<KeptState>> ReadKeptState(const std::string& path,
                                                       const std::string& group) {
  absl::StatusOr<std::string> bytes = nso::ReadWholeFile(path);
  if (absl::IsNotFound(bytes.status())) return std::nullopt;
  if (!bytes.ok()) return bytes.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*bytes, absl::MaxSplits('\n', 4));
  if (lines.size() < 5 || lines[0] != kMagic) {
    return Bad(path, absl::StrCat("not a servant's kept state (it starts \"", kMagic, "\")"));
  }
  absl::string_view named, position, size;
  KeptState kept;
  uint64_t state_size = 0;
  if (!Field(lines[1], "group", &named) || !Field(lines[2], "position", &position) ||
      !Field(lines[3], "size", &size) || !absl::SimpleAtoi(position, &kept.position) ||
      !absl::SimpleAtoi(size, &state_size)) {
    return Bad(path, "its header is damaged (group, position and size lines expected)");
  }
  if (named != group) {
    return Bad(path, absl::StrCat("it is the state of group \"", named, "\", not \"", group,
                                  "\""));
  }
  if (lines[4].size() != state_size) {
    return Bad(path, absl::StrCat("it holds ", lines[4].size(), " bytes of state, its header says ",
                                  state_size));
  }
  kept.state = std::string(lines[4]);
  return kept;
}

absl::Status WriteKeptState(const std::string& path, const std::string& group,
                            const KeptState& kept) {
  std::string bytes = absl::StrCat(kMagic, "\ngroup ", group, "\nposition ", kept.position,
                                   "\nsize ", kept.state.size(), "\n");
  bytes += kept.state;
  return nso::WriteFileDurably(path, bytes);
}

}  // namespace cohort::invocation
