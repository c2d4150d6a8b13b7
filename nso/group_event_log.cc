#include "nso/group_event_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nso/logging.h"

namespace cohort::nso {

std::string NamedAndMore(const std::vector<std::string>& names, size_t total,
                         std::string_view separator, std::string_view more_noun) {
  const size_t named = std::min(names.size(), GroupEventLog::kNamed);
  std::string out = absl::StrJoin(names.begin(), names.begin() + named,
                                  absl::string_view(separator.data(), separator.size()));
  if (total > named) {
    absl::StrAppend(&out, " and ", total - named, " more",
                    absl::string_view(more_noun.data(), more_noun.size()));
  }
  return out;
}

void GroupEventLog::Note(std::string_view component, spdlog::level::level_enum level,
                         std::string_view group, std::string event, std::string text) {
  if (!Log(std::string(component))->should_log(level)) return;
  auto [it, added] = pending_.try_emplace(Key{std::string(component), level, std::move(event)});
  Gathered& gathered = it->second;
  if (added) {
    gathered.order = pending_.size();
    gathered.first_text = std::move(text);
  }
  ++gathered.groups;
  if (gathered.named.size() < kNamed) gathered.named.emplace_back(group);
}

void GroupEventLog::Flush() {
  if (pending_.empty()) return;
  std::vector<std::pair<const Key*, const Gathered*>> in_order;
  for (const auto& [key, gathered] : pending_) in_order.emplace_back(&key, &gathered);
  std::sort(in_order.begin(), in_order.end(),
            [](const auto& a, const auto& b) { return a.second->order < b.second->order; });
  for (const auto& [key, gathered] : in_order) {
    const auto& [component, level, event] = *key;
    if (gathered->groups == 1) {
      Log(component)->log(level, "group {}: {}", gathered->named.front(), gathered->first_text);
      continue;
    }
    Log(component)->log(level, "{} in {} groups: {} (group {}: {})", event, gathered->groups,
                        NamedAndMore(gathered->named, gathered->groups, ", "),
                        gathered->named.front(), gathered->first_text);
  }
  pending_.clear();
}

}  // namespace cohort::nso
