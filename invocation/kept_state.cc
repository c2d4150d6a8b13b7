#include "invocation/kept_state.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "nso/durable_file.h"

namespace cohort::invocation {
namespace {

constexpr absl::string_view kMagic = "cohort-kept-state 3";
constexpr absl::string_view kMagicVersion2 = "cohort-kept-state 2";  // no view
constexpr absl::string_view kMagicVersion1 = "cohort-kept-state 1";  // no view, no calls

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
  const bool version1 = absl::StartsWith(*bytes, absl::StrCat(kMagicVersion1, "\n"));
  const bool version2 = absl::StartsWith(*bytes, absl::StrCat(kMagicVersion2, "\n"));
  const size_t header_lines = version1 ? 4 : version2 ? 5 : 6;
  std::vector<absl::string_view> lines =
      absl::StrSplit(*bytes, absl::MaxSplits('\n', header_lines));
  if (lines[0] != kMagic && !version1 && !version2) {
    return Bad(path, absl::StrCat("not a servant's kept state (it starts \"", kMagic, "\")"));
  }
  // Version 3's header; version 2 has no view line, version 1 neither a calls line.
  absl::string_view named, position, view, size, calls;
  KeptState kept;
  uint64_t state_size = 0, calls_size = 0;
  size_t line = 1;
  bool header = lines.size() == header_lines + 1 && Field(lines[line++], "group", &named) &&
                Field(lines[line++], "position", &position) &&
                absl::SimpleAtoi(position, &kept.position);
  if (header && !version1 && !version2) {
    header = Field(lines[line++], "view", &view) && absl::SimpleAtoi(view, &kept.view);
  }
  header = header && Field(lines[line++], "size", &size) && absl::SimpleAtoi(size, &state_size);
  if (header && !version1) {
    header = Field(lines[line++], "calls", &calls) && absl::SimpleAtoi(calls, &calls_size);
  }
  if (!header) {
    return Bad(path, version1   ? "its header is damaged (group, position and size lines expected)"
                     : version2 ? "its header is damaged (group, position, size and calls lines "
                                  "expected)"
                                : "its header is damaged (group, position, view, size and calls "
                                  "lines expected)");
  }
  if (named != group) {
    return Bad(path, absl::StrCat("it is the state of group \"", named, "\", not \"", group,
                                  "\""));
  }
  const absl::string_view body = lines[header_lines];
  if (body.size() != state_size + calls_size) {
    return Bad(path, absl::StrCat("it holds ", body.size(), " bytes of state and calls, its header "
                                  "says ", state_size, " and ", calls_size));
  }
  kept.state = std::string(body.substr(0, state_size));
  kept.calls = std::string(body.substr(state_size));
  return kept;
}

absl::Status WriteKeptState(const std::string& path, const std::string& group,
                            const KeptState& kept) {
  std::string bytes = absl::StrCat(kMagic, "\ngroup ", group, "\nposition ", kept.position,
                                   "\nview ", kept.view, "\nsize ", kept.state.size(),
                                   "\ncalls ", kept.calls.size(), "\n");
  bytes.reserve(bytes.size() + kept.state.size() + kept.calls.size());
  bytes += kept.state;
  bytes += kept.calls;
  return nso::WriteFileDurably(path, bytes);
}

}  // namespace cohort::invocation
