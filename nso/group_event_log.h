// The per-group events a daemon logs (suspicions, exclusions, views installed, restarts),
// gathered until Flush at the end of each tick: one event in many groups at once, as a peer's
// crash is in every group it belongs to, is one line naming the groups instead of a line per
// group (2,000 groups on three daemons: one kill -9 wrote 10,000 lines in 2 s on each of the
// others). An event of one group alone is logged as it always was: "group NAME: TEXT".
#ifndef COHORT_NSO_GROUP_EVENT_LOG_H_
#define COHORT_NSO_GROUP_EVENT_LOG_H_

#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

namespace cohort::nso {

// The first of `names` (at most GroupEventLog::kNamed) joined by `separator`, then " and N more"
// and `more_noun` for the rest of `total`: one line, however many groups it concerns.
std::string NamedAndMore(const std::vector<std::string>& names, size_t total,
                         std::string_view separator, std::string_view more_noun = "");

class GroupEventLog {
 public:
  // At most this many groups are named in a gathered line; the others are counted.
  static constexpr size_t kNamed = 5;

  // `event`: what the groups share (e.g. "suspect node 3"); `text`: the whole line of this
  // group after "group NAME: " (e.g. "suspect node 3 (silent 51 ms)"). Events with the same
  // component, level and event since the last Flush are gathered.
  void Note(std::string_view component, spdlog::level::level_enum level, std::string_view group,
            std::string event, std::string text);
  // Logs what was noted, in the order first noted: "group NAME: TEXT" for an event of one group,
  // else "EVENT in N groups: A, B, C, D, E and M more (group A: TEXT)".
  void Flush();
  ~GroupEventLog() { Flush(); }

 private:
  using Key = std::tuple<std::string, spdlog::level::level_enum, std::string>;
  struct Gathered {
    size_t order = 0;
    size_t groups = 0;
    std::vector<std::string> named;  // the first kNamed groups
    std::string first_text;
  };
  std::map<Key, Gathered> pending_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_EVENT_LOG_H_
