#include "tools/bench/memory.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "proto/api.grpc.pb.h"
#include "tools/bench/daemons.h"

namespace cohort::bench {
namespace {

// VmRSS of a process in KiB, or 0.
double RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      double kib = 0;
      fields >> kib;
      return kib;
    }
  }
  return 0;
}

std::string SingleMemberGroups(int64_t count) {
  std::string yaml = "groups:\n";
  for (int64_t i = 1; i <= count; ++i) {
    absl::StrAppend(&yaml, "  - {name: g", i, ", members: [n1], liveness: event}\n");
  }
  return yaml;
}

// Attaches `count` NSOs from `threads` threads over one channel; returns how many succeeded.
int64_t AttachMany(const std::string& address, int64_t count, int threads) {
  auto channel = DaemonChannel(address);
  auto stub = api::Cohort::NewStub(channel);
  std::atomic<int64_t> next{0}, done{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      while (next.fetch_add(1) < count) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        api::AttachRequest request;
        request.set_client_name("idle");
        api::AttachReply reply;
        if (stub->Attach(&context, request, &reply).ok()) done++;
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  return done.load();
}

// A one-daemon cluster with `groups_yaml`; its RSS once settled, or 0 (and *error).
double SettledRss(Daemons* daemons, std::string* error) {
  if (!daemons->Start(error)) return 0;
  absl::SleepFor(absl::Milliseconds(500));
  return RssKib(daemons->Pid(1));
}

}  // namespace

MemoryResult MeasureMemory(const std::string& cohortd, const std::string& dir, int64_t nsos,
                           int64_t groups) {
  MemoryResult result;
  std::string error;
  {
    std::string nso_dir = dir + "/memory-nsos";
    std::filesystem::create_directories(nso_dir);
    Daemons daemons(cohortd, nso_dir, 1, SingleMemberGroups(1));
    result.one_group_rss_kib = SettledRss(&daemons, &error);
    if (result.one_group_rss_kib == 0) {
      result.note = "daemon did not start: " + error;
      return result;
    }
    const int64_t warmup = 1000;
    if (AttachMany(daemons.ClientAddress(1), warmup, 8) != warmup) {
      result.note = "warm-up attaches failed";
      return result;
    }
    absl::SleepFor(absl::Milliseconds(200));
    result.nso_rss_before_kib = RssKib(daemons.Pid(1));
    absl::Time start = absl::Now();
    result.nsos = AttachMany(daemons.ClientAddress(1), nsos, 8);
    result.attach_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    absl::SleepFor(absl::Milliseconds(200));
    result.nso_rss_after_kib = RssKib(daemons.Pid(1));
    if (result.nsos > 0) {
      result.bytes_per_nso =
          (result.nso_rss_after_kib - result.nso_rss_before_kib) * 1024.0 / result.nsos;
    }
    daemons.KillAll();
  }
  {
    std::string group_dir = dir + "/memory-groups";
    std::filesystem::create_directories(group_dir);
    Daemons daemons(cohortd, group_dir, 1, SingleMemberGroups(groups));
    result.many_groups_rss_kib = SettledRss(&daemons, &error);
    if (result.many_groups_rss_kib == 0) {
      result.note = "daemon with many groups did not start: " + error;
      return result;
    }
    result.groups = groups;
    result.bytes_per_group =
        (result.many_groups_rss_kib - result.one_group_rss_kib) * 1024.0 / (groups - 1);
    daemons.KillAll();
  }
  result.measured = result.nsos == nsos;
  if (!result.measured) result.note = absl::StrCat("only ", result.nsos, " of ", nsos, " attached");
  return result;
}

}  // namespace cohort::bench
