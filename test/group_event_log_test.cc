// Log lines a daemon writes about many groups at once: an event of many groups in one tick is
// one line naming them (nso/group_event_log.h), and a condition that repeats fast is logged at
// most once a period with its count (nso/log_every.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/group_event_log.h"
#include "nso/log_every.h"
#include "nso/logging.h"
#include "test/sim_nodes.h"

namespace cohort {
namespace {

// Captures what the "membership" and "group" loggers write, at info.
class Captured {
 public:
  Captured() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    for (const char* component : {"membership", "group"}) nso::Log(component)->sinks().push_back(sink_);
    nso::ConfigureLogging("info", "text", "");
  }
  ~Captured() {
    for (const char* component : {"membership", "group"}) {
      auto& sinks = nso::Log(component)->sinks();
      sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    }
    nso::ConfigureLogging("off", "text", "");
  }
  std::vector<std::string> Lines(const std::string& containing) const {
    std::vector<std::string> out;
    for (absl::string_view line : absl::StrSplit(text_.str(), '\n')) {
      if (absl::StrContains(line, containing)) out.emplace_back(line);
    }
    return out;
  }
  void Clear() { text_.str(""); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

}  // namespace

TEST_CASE("GroupEventLog: an event of one group is its usual line; of many, one line naming "
          "five and counting the rest, in the order first noted",
          "[logging]") {
  Captured captured;
  nso::GroupEventLog log;
  for (const char* group : {"a", "b", "c"}) {
    log.Note("membership", spdlog::level::warn, group, "suspect node 3",
             absl::StrCat("suspect node 3 (silent ", group[0] == 'a' ? 51 : 52, " ms)"));
  }
  log.Note("membership", spdlog::level::warn, "d", "exclude node 2",
           "exclude node 2 (silent 1000 ms): proposing view 4");
  for (int i = 0; i < 7; ++i) {
    log.Note("membership", spdlog::level::info, absl::StrCat("g", i), "node 3 trusted again",
             "node 3 trusted again after 60 ms of silence");
  }
  log.Note("membership", spdlog::level::debug, "e", "below the level", "not logged");
  CHECK(captured.Lines("[membership]").empty());  // nothing before Flush
  log.Flush();
  std::vector<std::string> lines = captured.Lines("[membership]");
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::Contains(" warning ") && Catch::EndsWith(
      "[membership] suspect node 3 in 3 groups: a, b, c (group a: suspect node 3 (silent 51 ms))"));
  CHECK_THAT(lines[1], Catch::Contains(" warning ") && Catch::EndsWith(
      "[membership] group d: exclude node 2 (silent 1000 ms): proposing view 4"));
  CHECK_THAT(lines[2], Catch::Contains(" info ") && Catch::EndsWith(
      "[membership] node 3 trusted again in 7 groups: g0, g1, g2, g3, g4 and 2 more (group g0: "
      "node 3 trusted again after 60 ms of silence)"));
  captured.Clear();
  log.Flush();  // once only
  CHECK(captured.Lines("[membership]").empty());
}

TEST_CASE("LogEvery: the first occurrence, then at most one line a period with the count",
          "[logging]") {
  nso::LogEvery every(10000);
  CHECK(every.Count(5) == 1);
  CHECK(every.Count(6) == 0);
  CHECK(every.Count(10004) == 0);
  CHECK(every.Count(10005) == 3);
  CHECK(every.Count(10006) == 0);
  CHECK(every.Count(50000) == 2);
}

TEST_CASE("a member that dies is suspected, excluded and removed from 30 groups in a few lines, "
          "not three per group",
          "[logging][sim]") {
  using Liveness = nso::GroupConfig::Liveness;
  Captured captured;
  test::SimNodes sim(11);
  auto config_of = [](nso::NodeId id) {
    nso::Config config = test::GroupOfThree(id, nso::GroupConfig::Ordering::kConsensus);
    config.groups.clear();
    for (int i = 0; i < 30; ++i) {
      nso::GroupConfig group;
      group.name = absl::StrCat("g", i);
      group.members = {"n1", "n2", "n3"};
      group.liveness = Liveness::kLively;
      config.groups.push_back(group);
    }
    return test::WithQuickExclusion(std::move(config));
  };
  for (nso::NodeId id = 1; id <= 3; ++id) sim.Add(config_of(id));
  sim.net.RunUntil(1000);
  CHECK(captured.Lines("view 1 with 3 members").size() == 3);  // one line per node
  CHECK_THAT(captured.Lines("view 1 with 3 members").front(),
             Catch::Contains("in 30 groups: g0, g1, g2, g3, g4 and 25 more"));
  captured.Clear();
  sim.net.Kill(3);
  sim.net.RunUntil(4000);
  for (nso::NodeId id = 1; id <= 2; ++id) {
    for (int i = 0; i < 30; ++i) CHECK_FALSE(test::InView(sim.nodes[id].get(), 3, absl::StrCat("g", i)));
  }
  const std::vector<std::string> lines = captured.Lines("[membership]");
  INFO(absl::StrJoin(lines, "\n"));
  // Each survivor: suspected (at the close of its connection, again after the copies in flight
  // came), excluded, views installed as their consensus ended, a few ticks apart. A line per
  // group and event before: over 180.
  CHECK(lines.size() <= 14);
  // How many groups the lines with `text` name: "EVENT in N groups: ..." or one group's line.
  auto groups_in = [&captured](const std::string& text) {
    size_t groups = 0;
    for (const std::string& line : captured.Lines(text)) {
      size_t in = line.find(" in ");
      size_t count = 0;
      if (in != std::string::npos && line.find(" groups: ", in) != std::string::npos &&
          absl::SimpleAtoi(line.substr(in + 4, line.find(' ', in + 4) - in - 4), &count)) {
        groups += count;
      } else {
        groups += 1;
      }
    }
    return groups;
  };
  CHECK(groups_in("exclude node 3") >= 30);  // by one survivor or both
  CHECK(groups_in("(removed [3], added [])") == 60);
  CHECK(captured.Lines("suspect node 3 in 30 groups").size() >= 2);

  // Back with a new process: no servant anywhere holds a state to re-add it with, so it asks to
  // join every 200 ms, in each group, for as long as that lasts. Said at the first ask and then
  // once in 10 s, in one line for the 30 groups (a line per ask and group before: 1,800 in 12 s).
  captured.Clear();
  sim.net.Restart(3);
  sim.Add(config_of(3), 103);
  sim.net.RunUntil(sim.net.now_ms() + 12000);
  const std::vector<std::string> asks = captured.Lines("asking to join");
  INFO(absl::StrJoin(asks, "\n"));
  CHECK_FALSE(asks.empty());
  CHECK(asks.size() <= 4);
  CHECK_THAT(asks.front(), Catch::Contains("asking to join (this node is in view 1, heard view 2))"));
  CHECK(groups_in("asking to join") == 60);  // each group at once, and 10 s later
  CHECK_THAT(asks.back(), Catch::Contains(" asks since the last such line)"));
}

TEST_CASE("a reload says which groups' timeouts changed, in one line for many, and nothing for "
          "the groups whose timeouts did not",
          "[logging]") {
  Captured captured;
  nso::SimNetwork net(test::SimNodes::Options(3));
  nso::Config config;
  config.node = "n1";
  config.node_id = 1;
  config.peers.push_back({"n1", 1, "sim:1"});
  for (int i = 0; i < 30; ++i) {
    nso::GroupConfig group;
    group.name = absl::StrCat("g", i);
    group.members = {"n1"};
    config.groups.push_back(group);
  }
  nso::Node node(config, net.Endpoint(1), 1, 0);
  node.Tick(10);
  captured.Clear();
  nso::Config fresh = config;
  node.ApplyTimeouts(fresh);  // the same file again
  node.Tick(20);
  CHECK(captured.Lines("timeouts now").empty());
  fresh.groups[3].suspect_timeout_ms = 80;
  node.ApplyTimeouts(fresh);
  node.Tick(30);
  std::vector<std::string> lines = captured.Lines("timeouts now");
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::EndsWith(
      "group g3: timeouts now suspect 80 ms, exclude 10000 ms, silence 10 ms"));
  captured.Clear();
  for (nso::GroupConfig& group : fresh.groups) group.exclude_timeout_ms = 3000;
  node.ApplyTimeouts(fresh);
  node.Tick(40);
  lines = captured.Lines("timeouts now");
  REQUIRE(lines.size() == 2);  // g3's suspect timeout differs from the others'
  CHECK_THAT(lines[0], Catch::Contains(
      "timeouts now suspect 50 ms, exclude 3000 ms, silence 10 ms in 29 groups: g0, g1, g2, g4, "
      "g5 and 24 more"));
  CHECK_THAT(lines[1], Catch::EndsWith(
      "group g3: timeouts now suspect 80 ms, exclude 3000 ms, silence 10 ms"));
  for (const nso::Group* group : node.groups()) {
    CHECK(group->config().exclude_timeout_ms == 3000);
    CHECK(group->config().suspect_timeout_ms == (group->name() == "g3" ? 80 : 50));
  }
}

}  // namespace cohort
