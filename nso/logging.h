// Per-component spdlog loggers ("peer", "group", "membership", "api", "daemon", ...).
#ifndef COHORT_NSO_LOGGING_H_
#define COHORT_NSO_LOGGING_H_

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace cohort::nso {

// Sets the level ("trace".."off") and format ("text" or "json") of every component logger,
// present and future. `node` is printed on each line so that interleaved daemon logs stay readable.
void ConfigureLogging(const std::string& level, const std::string& format, const std::string& node);

// `text` as the contents of a JSON string: quotes, backslashes and control characters escaped,
// bytes that are not UTF-8 replaced by \ufffd (log_format json writes each message so).
std::string JsonEscaped(std::string_view text);

// One line (with its end) as the logger of `component` would write `text` at `level`, in the
// configured format: for a line written elsewhere than the log (cohortd's ready line on stdout).
std::string FormatLogLine(const std::string& component, spdlog::level::level_enum level,
                          std::string_view text);

// The logger of one component, created on first use with the configured level and format.
std::shared_ptr<spdlog::logger> Log(const std::string& component);

}  // namespace cohort::nso

#endif  // COHORT_NSO_LOGGING_H_
