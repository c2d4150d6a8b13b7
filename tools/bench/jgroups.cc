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

// Starts the member JVMs one at a time (the first becomes coordinator and sequencer); false with
// *why if one does not listen in time (then none is left running).
bool StartMembers(const std::string& java, const std::string& classpath,
                  const std::vector<int>& ports, const std::string& initial,
                  const std::string& log_prefix, std::vector<pid_t>* members, std::string* why) {
  for (int i = 0; i < kMembers; ++i) {
    members->push_back(Spawn({java, "-Djava.net.preferIPv4Stack=true", "-cp", classpath,
                              "JGroupsBench", "member", absl::StrCat(ports[i]), initial},
                             absl::StrCat(log_prefix, i + 1, ".log")));
    // Until it has joined (it prints "ready"), so the first one is the coordinator/sequencer.
    const std::string log = absl::StrCat(log_prefix, i + 1, ".log");
    bool ready = false;
    for (absl::Time end = absl::Now() + absl::Seconds(30); !ready && absl::Now() < end;) {
      ready = ReadFile(log).find("ready ") != std::string::npos;
      if (!ready) absl::SleepFor(absl::Milliseconds(50));
    }
    if (!ready) {
      *why = "a JGroups member did not join within 30 s";
      for (pid_t pid : *members) KillChild(pid);
      members->clear();
      return false;
    }
  }
  return true;
}

// Ports for the members and the driver, and TCPPING's initial hosts.
std::string Ports(std::vector<int>* ports) {
  std::vector<std::string> hosts;
  for (int i = 0; i <= kMembers; ++i) {
    ports->push_back(FreePort());
    hosts.push_back(absl::StrCat("127.0.0.1[", ports->back(), "]"));
  }
  return absl::StrJoin(hosts, ",");
}

// "stall_ms S recovered R ok_before A ok_after B failed F".
bool ParseFailover(const std::string& output, JGroupsFailover* failover) {
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (w.size() != 10 || w[0] != "stall_ms") continue;
    double stall = 0;
    int64_t recovered = 0;
    if (!absl::SimpleAtod(w[1], &stall) || !absl::SimpleAtoi(w[3], &recovered) ||
        !absl::SimpleAtoi(w[5], &failover->ok_before) ||
        !absl::SimpleAtoi(w[7], &failover->ok_after) || !absl::SimpleAtoi(w[9], &failover->failed)) {
      return false;
    }
    failover->stall_ms = stall;
    failover->recovered = recovered != 0;
    failover->measured = true;
    return true;
  }
  return false;
}

JGroupsFailover MeasureFailover(const std::string& java, const std::string& classpath,
                                const std::string& log_dir, const char* signal, int after_ms) {
  JGroupsFailover result;
  std::vector<int> ports;
  const std::string initial = Ports(&ports);
  std::vector<pid_t> members;
  std::string why;
  const std::string prefix = absl::StrCat(log_dir, "/failover-", signal, "-member");
  if (!StartMembers(java, classpath, ports, initial, prefix, &members, &why)) return result;
  const std::string log = absl::StrCat(log_dir, "/failover-", signal, ".log");
  pid_t driver = Spawn({java, "-Djava.net.preferIPv4Stack=true", "-cp", classpath, "JGroupsBench",
                        "failover", absl::StrCat(ports[kMembers]), initial, absl::StrCat(kMembers),
                        absl::StrCat(members[0]), signal, "1000", absl::StrCat(after_ms)},
                       log);
  WaitChild(driver, absl::Milliseconds(after_ms) + absl::Seconds(60));
  for (pid_t pid : members) KillChild(pid);  // SIGKILL also ends a stopped member
  ParseFailover(ReadFile(log), &result);
  return result;
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
  const std::string classpath = jar + ":" + dir;
  std::vector<int> ports;
  const std::string initial = Ports(&ports);
  std::vector<pid_t> members;
  std::string why;
  if (!StartMembers(java, classpath, ports, initial, log_dir + "/member", &members, &why)) {
    result.note = "not measured: " + why;
    return result;
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
  result.failover_after_ms = quick ? 5000 : 10000;
  result.kill = MeasureFailover(java, classpath, log_dir, "KILL", result.failover_after_ms);
  result.freeze = MeasureFailover(java, classpath, log_dir, "STOP", result.failover_after_ms);
  return result;
}

}  // namespace cohort::bench
