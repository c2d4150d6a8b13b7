// kv-nemesis's small helpers: the clock (since the start of the process), file reading, and
// running a command to its end. (JSON strings: tools/json_string.h.)
#ifndef COHORT_TOOLS_KV_NEMESIS_UTIL_H_
#define COHORT_TOOLS_KV_NEMESIS_UTIL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cohort::kv_nemesis {

using Clock = std::chrono::steady_clock;

int64_t NowNs();
int64_t NowMs();
void SleepMs(int ms);

std::string ReadFrom(const std::string& path, size_t offset);
size_t FileSize(const std::string& path);

// A command run to its end (netlab), its output appended to `log_path`; returns its exit code.
int RunCommand(const std::vector<std::string>& argv, const std::string& log_path);
std::string IpCommand();

}  // namespace cohort::kv_nemesis

#endif  // COHORT_TOOLS_KV_NEMESIS_UTIL_H_
