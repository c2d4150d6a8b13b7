// kv-nemesis: the nemesis (tools/kv_nemesis_run.h): whenever the group is healthy, one fault
// (kill -9, SIGSTOP, a servant crash, a cut host, a partition, delayed and lossy links) or a
// pause, healed before the next.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"

namespace cohort::kv_nemesis {

int Run::Uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

std::vector<int> Run::Pick(int count) {
  std::vector<int> order(o_.nodes);
  for (int i = 0; i < o_.nodes; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng_);
  order.resize(count);
  return order;
}

std::string Run::Hosts(const std::vector<int>& daemons) const {
  std::vector<std::string> names;
  for (int i : daemons) names.push_back(HostName(i));
  return absl::StrJoin(names, " ");
}

void Run::NemesisLoop() {
  while (!Over()) {
    if (!WaitHealthy(2000)) {
      if (Over()) break;
      if (NowMs() - last_healthy_ms_ > 20000) {
        Note("not healthy for 20 s");
        last_healthy_ms_ = NowMs();
      }
      continue;
    }
    last_healthy_ms_ = NowMs();
    if (Over()) break;
    int kind = Uniform(0, 99);
    if (kind < (netlab() ? 10 : 15)) {
      int ms = Uniform(200, 1500);
      Note(absl::StrCat("pause ", ms, " ms"));
      faults_["pause"]++;
      SleepMs(ms);
      continue;
    }
    // --durable on: the first fault is a power cut (short runs have one), then 35% of them (20%
    // with --netlab, which partitions hosts too).
    const bool cut_yet = faults_.count("power cut") + faults_.count("power cut sparing outside") > 0;
    if (o_.durable == "on" && (kind < (netlab() ? 20 : 35) || !cut_yet)) {
      PowerCut();
    } else if (netlab() && kind < 35) {
      Partition();
    } else if (netlab() && kind < 50) {
      DelayLinks();
    } else {
      FailDaemons();
    }
    int64_t t0 = NowMs();
    bool healthy = WaitHealthy(15000);
    Note(healthy ? absl::StrCat("healthy (all ", o_.nodes, " replicas answer) after ",
                                NowMs() - t0, " ms")
                 : "NOT healthy 15 s after healing: " + last_unhealthy_);
    if (healthy) last_healthy_ms_ = NowMs();
  }
}

void Run::Partition() {
  const int max_down = (o_.nodes - 1) / 2;
  std::vector<int> order = Pick(o_.nodes);
  std::vector<int> minority(order.begin(), order.begin() + Uniform(1, max_down));
  std::vector<int> majority(order.begin() + minority.size(), order.end());
  int ms = Uniform(0, 1) ? Uniform(1200, 3000) : Uniform(150, 900);
  Note(absl::StrCat("partition {", Hosts(minority), "} | {", Hosts(majority), "} for ", ms, " ms"));
  faults_["partition"]++;
  Lab({"partition", Hosts(minority), Hosts(majority)});
  SleepMs(ms);
  Lab({"heal-all"});
  Note("heal-all");
}

void Run::DelayLinks() {
  std::vector<int> hosts = Pick(Uniform(1, o_.nodes));
  int ms = Uniform(0, 3) == 0 ? Uniform(60, 200) : Uniform(5, 60);
  int jitter = Uniform(0, ms / 2);
  int loss = Uniform(0, 2) == 0 ? Uniform(1, 10) : 0;
  int hold = Uniform(1000, 4000);
  Note(absl::StrCat("delay {", Hosts(hosts), "} ", ms, "+-", jitter, " ms, loss ", loss,
                    "% each way, for ", hold, " ms"));
  faults_["delay+loss"]++;
  for (int i : hosts) {
    Lab({"delay", HostName(i), std::to_string(ms), std::to_string(jitter), std::to_string(loss)});
  }
  SleepMs(hold);
  for (int i : hosts) Lab({"delay", HostName(i), "0"});
  Note("delays cleared");
}

void Run::RestartAndNote(int i) {
  int64_t t0 = NowMs();
  bool ok = RestartNode(i);
  Note(absl::StrCat("restart ", Name(i), ok ? " ready, servant attached in " : " FAILED after ",
                    NowMs() - t0, " ms"));
  if (!ok) failed_restarts_++;
}

void Run::PowerCut() {
  const int ms = Uniform(100, 1500);
  // Every member's machine; the first time, then every other time, the outside callers' daemon
  // is spared: it resends the calls it had in flight to the group that resumes, which answers
  // those it had kept from the calls kept with the state, and executes the others once (README
  // "Durable groups").
  const bool spare_outside =
      o_.outside_clients > 0 &&
      (faults_.count("power cut sparing outside") == 0 || Uniform(0, 1) == 0);
  const int cut = spare_outside ? o_.nodes : Daemons();
  Note(absl::StrCat("power cut: kill -9 every ", spare_outside ? "member's " : "", "daemon",
                    rejoining() ? "" : " and servant", " (all restarted in ", ms, " ms)",
                    spare_outside ? "; the outside callers' daemon lives on" : ""));
  faults_[spare_outside ? "power cut sparing outside" : "power cut"]++;
  for (int i = 0; i < cut; ++i) Kill(i);
  SleepMs(ms);
  for (int i = 0; i < cut; ++i) RestartAndNote(i);
}

void Run::FailDaemons() {
  const int count = Uniform(1, (o_.nodes - 1) / 2);
  std::vector<int> order = Pick(count);
  std::vector<Failure> how(count);
  std::vector<int> until(count);
  for (int v = 0; v < count; ++v) {
    int r = Uniform(0, 99);
    if (netlab()) {
      how[v] = r < 30 ? Failure::kKill : r < 45 ? Failure::kFreezeLong
               : r < 60 ? Failure::kFreezeShort : r < 85 ? Failure::kCutHost
               : Failure::kServantCrash;
    } else {
      how[v] = r < 40 ? Failure::kKill : r < 70 ? Failure::kFreezeLong
               : r < 85 ? Failure::kFreezeShort : Failure::kServantCrash;
    }
    until[v] = how[v] == Failure::kKill || how[v] == Failure::kServantCrash ? Uniform(100, 2500)
               : how[v] == Failure::kFreezeShort ? Uniform(30, 400)
                                                 : Uniform(1200, 3000);
    int i = order[v];
    switch (how[v]) {
      case Failure::kKill:
        Kill(i);
        Note(absl::StrCat("kill -9 ", Name(i), netlab() ? " and its servant" : "",
                          " (restart in ", until[v], " ms)"));
        faults_["kill"]++;
        break;
      case Failure::kFreezeLong:
      case Failure::kFreezeShort:
        Freeze(i);
        Note(absl::StrCat(how[v] == Failure::kFreezeLong ? "freeze (SIGSTOP) " : "stall (SIGSTOP) ",
                          Name(i), " for ", until[v], " ms"));
        faults_[how[v] == Failure::kFreezeLong ? "freeze" : "stall"]++;
        break;
      case Failure::kServantCrash:
        CrashServant(i);
        Note(absl::StrCat("servant crash: kill -9 the servant of ", Name(i),
                          ", its daemon stays up (new servant in ", until[v], " ms)"));
        faults_["servant crash"]++;
        break;
      case Failure::kCutHost:
        Lab({"cut", HostName(i)});
        Note(absl::StrCat("cut host ", HostName(i), " (", Name(i), ") for ", until[v], " ms"));
        faults_["cut host"]++;
        break;
    }
  }
  int64_t began = NowMs();
  std::vector<bool> healed(count, false);
  for (int done = 0; done < count; ++done) {
    int next = -1;
    for (int v = 0; v < count; ++v) {
      if (!healed[v] && (next < 0 || until[v] < until[next])) next = v;
    }
    int64_t wait = began + until[next] - NowMs();
    if (wait > 0) SleepMs(static_cast<int>(wait));
    int i = order[next];
    if (how[next] == Failure::kKill) {
      RestartAndNote(i);
    } else if (how[next] == Failure::kServantCrash) {
      int64_t t0 = NowMs();
      bool ok = netlab() ? StartServantProcess(i) : AttachServant(i);
      Note(absl::StrCat("new servant on ", Name(i), ok ? " attached in " : " FAILED after ",
                        NowMs() - t0, " ms"));
      if (!ok) failed_restarts_++;
    } else if (how[next] == Failure::kCutHost) {
      Lab({"heal", HostName(i)});
      Note(absl::StrCat("heal host ", HostName(i)));
    } else {
      Thaw(i);
      Note(absl::StrCat("resume (SIGCONT) ", Name(i)));
    }
    healed[next] = true;
  }
}

}  // namespace cohort::kv_nemesis
