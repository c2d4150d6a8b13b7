// kv-nemesis's run from start to summary (tools/kv_nemesis_run.h): the daemons started, the
// client threads and the nemesis for the given time, the final reads, the replicas compared, and
// the summary line.
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"

namespace cohort::kv_nemesis {

int Run::Go() {
  if (netlab() && !SetUpLab()) {
    std::fprintf(stderr, "kv-nemesis: netlab up failed (see %s/netlab.log)\n", o_.dir.c_str());
    return 1;
  }
  for (int attempt = 1;; ++attempt) {
    int failed = -1;
    for (int i = 0; i < Daemons() && failed < 0; ++i) {
      if (!StartNode(i)) failed = i;
    }
    if (failed < 0) break;
    if (netlab() || attempt == 3) {
      std::fprintf(stderr, "kv-nemesis: could not start %s (see %s)\n", Name(failed).c_str(),
                   Log(failed).c_str());
      return 1;
    }
    // On loopback another process can take a port between FreePort() and the daemon's bind.
    Note(absl::StrCat("start: ", Name(failed), " did not start (port taken?): new ports"));
    Shutdown();
    NewPorts();
  }
  if (!WaitHealthy(20000)) {
    std::fprintf(stderr, "kv-nemesis: the group never became healthy\n");
    return 1;
  }
  Note(absl::StrCat("start: ", o_.nodes, " daemons",
                    netlab() ? absl::StrCat(" on netlab hosts h1..h", o_.nodes, " (clients on h",
                                            o_.nodes + 1, ", lab ", lab_prefix_, ")")
                             : std::string(" on loopback"),
                    ", ", o_.clients, " clients (", o_.outside_clients,
                    " of them through n", o_.nodes + 1, ", outside the group), ", o_.keys,
                    " keys, seed ", o_.seed, ", deadline ", o_.deadline_ms, " ms"));
  last_healthy_ms_ = NowMs();
  std::vector<std::thread> threads;
  for (int c = 0; c < o_.clients; ++c) threads.emplace_back([this, c] { ClientLoop(c); });
  // The nemesis runs on this thread: daemons are forked from it, and PR_SET_PDEATHSIG fires
  // when the forking *thread* ends. It finishes its current fault and heals it.
  end_ms_ = NowMs() + o_.seconds * 1000;
  NemesisLoop();
  Note("nemesis stopped; every daemon running");
  stop_clients_ = true;
  for (std::thread& thread : threads) thread.join();

  // Final reads: wait-for-all, recorded (a lost acknowledged write shows up in the check).
  bool healthy = WaitHealthy(15000);
  Note(healthy ? "final: healthy" : "final: NOT healthy after 15 s: " + last_unhealthy_);
  if (!healthy) Diagnose();
  int final_reads = 0;
  if (healthy) {
    auto client = cohort::Client::Connect(Address(0), Connecting("final-reader", absl::Seconds(2)));
    // A member can be suspected for a moment even in a healthy group (e.g. while it installs
    // a large state): a wait-for-all call then fails fast. Retry each key for a while.
    const int64_t give_up_ms = NowMs() + 15000;
    if (!client.ok()) {
      Note("final reads: connect to " + Name(0) + ": " + client.status().ToString());
    }
    for (int k = 0; client.ok() && k < o_.keys; ++k) {
      std::string key = absl::StrCat("k", k);
      std::string last_error;
      while (NowMs() < give_up_ms) {
        int64_t call = NowNs();
        auto result = (*client)->Invoke("kv", "get", key, cohort::Mode::kAll, absl::Seconds(3));
        int64_t ret = NowNs();
        if (!result.ok() || static_cast<int>(result->replies.size()) < o_.nodes) {
          last_error = result.ok() ? absl::StrCat(result->replies.size(), " replies")
                                   : result.status().ToString();
          SleepMs(100);
          continue;
        }
        last_error.clear();
        bool found = result->replies.front().status.ok();
        std::string value = found ? result->replies.front().payload : "";
        for (const cohort::Reply& reply : result->replies) {
          if (reply.status.ok() != found || (found && reply.payload != value)) divergent_++;
        }
        Record(o_.clients, "get", key, "", "", "ok", found, value, call, ret, "");
        final_reads++;
        break;
      }
      if (!last_error.empty()) Note("final read of " + key + " failed: " + last_error);
    }
  }
  // Every replica holds the same map (a majority acknowledged each call: allow a moment). With
  // netlab the stores are in kv-servant processes: the final wait-for-all reads compared every
  // replica's value of every key (a difference counts as divergent).
  bool agree = netlab() ? final_reads == o_.keys : false;
  for (int attempt = 0; !netlab() && attempt < 100 && !agree; ++attempt) {
    std::lock_guard<std::mutex> lock(mu_);
    agree = true;
    auto first = nodes_[0].store ? nodes_[0].store->Snapshot()
                                 : std::map<std::string, std::string>();
    for (int i = 1; i < o_.nodes; ++i) {
      if (!nodes_[i].store || nodes_[i].store->Snapshot() != first) agree = false;
    }
    if (!agree) SleepMs(50);
  }
  Note(agree ? "final: every replica holds the same map" : "final: replicas DIFFER");
  // Virtual synchrony as the servants saw it (Servant::OnViewChange).
  int views = 0;
  const std::string views_differ = ViewsDiffer(&views);
  if (!views_differ.empty()) Note("final: servant views DIFFER: " + views_differ);
  const int lost = final_reads == o_.keys ? LostWrites() : 0;
  std::string counts;
  for (const auto& [k, v] : counts_) {
    absl::StrAppend(&counts, counts.empty() ? "" : ", ", k, " ", v);
  }
  std::string faults;
  for (const auto& [k, v] : faults_) {
    absl::StrAppend(&faults, faults.empty() ? "" : ", ", k, " ", v);
  }
  uint64_t rejoins = 0;  // --servants rejoin: registrations again after a daemon's kill
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < o_.nodes; ++i) {
      if (nodes_[i].servant) rejoins += nodes_[i].servant->rejoins();
    }
  }
  for (int i = 0; netlab() && i < o_.nodes; ++i) {  // the kv-servant processes say so
    const std::string log = ReadFrom(absl::StrCat(o_.dir, "/kv-", Name(i), ".log"), 0);
    for (size_t at = log.find(" registered again"); at != std::string::npos;
         at = log.find(" registered again", at + 1)) {
      ++rejoins;
    }
  }
  std::printf("kv-nemesis: nodes %d, %d s, ops: %s; faults: %s; final reads %d/%d; divergent "
              "replies %d; replies without servant %d; failed restarts %d; servant streams "
              "ended unasked %d; servant rejoins %llu; replicas agree: %s; servant views alike: "
              "%s (%d views); acknowledged writes lost: %d\n",
              o_.nodes, o_.seconds, counts.c_str(), faults.c_str(), final_reads, o_.keys,
              divergent_.load(), no_servant_replies_.load(), failed_restarts_,
              servants_revived_, static_cast<unsigned long long>(rejoins), agree ? "yes" : "NO",
              views_differ.empty() ? "yes" : "NO", views, lost);
  Shutdown();
  return healthy && agree && views_differ.empty() && divergent_ == 0 &&
                 final_reads == o_.keys && lost == 0
             ? 0
             : 1;
}

}  // namespace cohort::kv_nemesis
