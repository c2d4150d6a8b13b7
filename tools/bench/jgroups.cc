#include "tools/bench/jgroups.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tools/bench/process.h"

namespace cohort::bench {
namespace {

constexpr int kMembers = 3;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Fills `result` from the driver's lines ("all p50_us 622 p99_us 16287", "all callers 64 ops/s
// 5184"); false if a line is missing.
bool Parse(const std::string& output, JGroupsResult* result) {
  int found = 0;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.empty() || (words[0] != "first" && words[0] != "all")) continue;
    JGroupsMode& mode = words[0] == "first" ? result->first : result->all;
    double a = 0, b = 0;
    if (words.size() == 5 && words[1] == "p50_us" && absl::SimpleAtod(words[2], &a) &&
        absl::SimpleAtod(words[4], &b)) {
      mode.p50_us = a;
      mode.p99_us = b;
      ++found;
    } else if (words.size() == 5 && words[1] == "callers" && absl::SimpleAtod(words[2], &a) &&
               absl::SimpleAtod(words[4], &b)) {
      (a == 1 ? mode.ops_1 : mode.ops_64) = b;
      ++found;
    }
  }
  return found == 6;
}

}  // namespace

JGroupsResult MeasureJGroups(const std::string& dir, const std::string& log_dir, int payload_bytes,
                             bool quick) {
  JGroupsResult result;
  const std::string jar = dir + "/jgroups.jar";
  if (access(jar.c_str(), R_OK) != 0 || access((dir + "/JGroupsBench.class").c_str(), R_OK) != 0) {
    result.note = absl::StrCat("not measured: no JGroups in ", dir,
                               " (tools/bench/jgroups-build fetches JGroups from Maven Central "
                               "and compiles the driver)");
    return result;
  }
  std::string java = "/usr/bin/java";
  if (access(java.c_str(), X_OK) != 0) {
    result.note = "not measured: no /usr/bin/java";
    return result;
  }
  std::vector<int> ports;
  std::vector<std::string> hosts;
  for (int i = 0; i <= kMembers; ++i) {
    ports.push_back(FreePort());
    hosts.push_back(absl::StrCat("127.0.0.1[", ports.back(), "]"));
  }
  const std::string initial = absl::StrJoin(hosts, ",");
  const std::string classpath = jar + ":" + dir;
  std::vector<pid_t> members;
  for (int i = 0; i < kMembers; ++i) {
    members.push_back(Spawn({java, "-Djava.net.preferIPv4Stack=true", "-cp", classpath,
                             "JGroupsBench", "member", absl::StrCat(ports[i]), initial},
                            absl::StrCat(log_dir, "/member", i + 1, ".log")));
    // One at a time: the first becomes the coordinator (and the sequencer).
    if (!WaitForPort(ports[i], absl::Seconds(30))) {
      result.note = "not measured: a JGroups member did not listen within 30 s";
      for (pid_t pid : members) KillChild(pid);
      return result;
    }
  }
  const std::string log = log_dir + "/driver.log";
  pid_t driver = Spawn({java, "-Djava.net.preferIPv4Stack=true", "-cp", classpath, "JGroupsBench",
                        "driver", absl::StrCat(ports[kMembers]), initial,
                        absl::StrCat(kMembers), quick ? "400" : "1000", quick ? "500" : "1000",
                        absl::StrCat(payload_bytes), "1,64"},
                       log);
  int code = WaitChild(driver, absl::Seconds(180));
  for (pid_t pid : members) KillChild(pid);
  result.version = "5.3.13.Final (tools/bench/jgroups/pom.xml)";
  if (code != 0 || !Parse(ReadFile(log), &result)) {
    result.note = absl::StrCat("not measured: the JGroups driver failed (exit ", code, "); see ",
                               log);
    return result;
  }
  result.measured = true;
  return result;
}

}  // namespace cohort::bench
