#include "nso/incarnation_file.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nso/durable_file.h"

namespace cohort::nso {

absl::StatusOr<Incarnations> NextIncarnation(const std::string& path, uint64_t now_us) {
  Incarnations result;
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  if (read.ok()) {
    const std::string& text = *read;
    const absl::string_view number = absl::StripAsciiWhitespace(text);
    if (!absl::SimpleAtoi(number, &result.previous) || result.previous == 0 ||
        text.size() > 64) {
      return absl::FailedPreconditionError(absl::StrCat(
          "incarnation_file \"", path,
          "\": not an incarnation file (expected one positive decimal number, got \"",
          absl::CHexEscape(text.substr(0, 40)), text.size() > 40 ? "..." : "",
          "\"); remove it if this daemon's earlier starts are known to be gone"));
    }
  } else if (!absl::IsNotFound(read.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat("incarnation_file ", read.status().message()));
  }
  result.current = now_us > result.previous ? now_us : result.previous + 1;
  if (absl::Status written = WriteFileDurably(path, absl::StrCat(result.current, "\n"));
      !written.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("incarnation_file: ", written.message()));
  }
  return result;
}

}  // namespace cohort::nso
