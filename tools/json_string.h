// A string as a JSON string literal, quotes included (cohort-bench's --json, kv-nemesis's
// history lines).
#ifndef COHORT_TOOLS_JSON_STRING_H_
#define COHORT_TOOLS_JSON_STRING_H_

#include <string>

namespace cohort::tools {

std::string JsonString(const std::string& text);

}  // namespace cohort::tools

#endif  // COHORT_TOOLS_JSON_STRING_H_
