#include "tools/bench/group_rows.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/bench/allocations.h"
#include "tools/bench/group_calls.h"
#include "tools/bench/measure.h"
#include "tools/bench/process.h"
#include "tools/bench/workload.h"

namespace cohort::bench {
namespace {

// closed-async: ONE caller thread with C calls outstanding (Client::InvokeAsyncInto into an
// AsyncCall kept per slot, pipelined on its stream), in place of C threads; wait-for-all. C = 1
// is the sequential run.
void MeasureAsync(const Options& options, Client* client, const RowKey& key, Report* report) {
  Progress(absl::StrCat("n=", key.n, " ", key.ordering, " ", key.style, " all"));
  struct Slot {
    std::unique_ptr<AsyncCall> call;
    const AsyncDone* done = nullptr;  // the slot's completion (workload.h), set per call
  };
  int most = 1;
  for (int callers : options.callers) most = std::max(most, callers);
  auto slots = std::make_shared<std::vector<Slot>>(static_cast<size_t>(most));
  for (Slot& slot : *slots) {
    slot.call = std::make_unique<AsyncCall>([&slot](AsyncCall& call) {
      std::string error;
      const bool ok = call.status().ok() ? RepliesOk(call.replies(), &error)
                                         : (error = call.status().ToString(), false);
      (*slot.done)(ok, error);
    });
  }
  AsyncCallFn call = [client, slots, payload = std::string(options.payload, 'x')](
                         int index, const AsyncDone& done) {
    Slot& slot = (*slots)[index];
    slot.done = &done;
    client->InvokeAsyncInto("bench", "echo", payload, Mode::kAll, slot.call.get());
  };
  GroupResult result;
  result.n = key.n;
  result.ordering = key.ordering;
  result.style = key.style;
  result.mode = "all";
  result.attached_to = key.attached_to;
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  result.series.sequential = RunAsyncLoad(1, sequential, call);
  for (int callers : options.callers) {
    if (callers == 1) {
      result.series.by_callers.push_back(result.series.sequential);
      continue;
    }
    LoadLimits window{INT64_MAX, absl::Milliseconds(options.window_ms), 2};
    result.series.by_callers.push_back(RunAsyncLoad(callers, window, call));
  }
  report->groups.push_back(std::move(result));
}

// closed-spread: the callers are spread over the members' daemons (caller i through n(i mod N
// + 1)), as when every replica's host runs clients: several members broadcast, and the round-1
// coordinator changes from one consensus instance to the next (consensus/consensus_order.h).
// Wait-for-all only; the sequential run is one caller through n1.
void MeasureSpread(const Options& options, Daemons& daemons, int n, const std::string& ordering,
                   Report* report) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<Client*> raw;
  for (int i = 1; i <= n; ++i) {
    auto client = Client::Connect(daemons.ClientAddress(i), BenchConnect(absl::StrCat("bench-spread-", i)));
    if (!client.ok()) {
      Progress("connect: " + client.status().ToString());
      return;
    }
    raw.push_back(client->get());
    clients.push_back(*std::move(client));
  }
  MeasureReplyModes(options, raw, {n, ordering, "closed-spread", absl::StrCat("n1..n", n)},
                    Style::kClosed, report, nullptr, {Mode::kAll});
}

}  // namespace

void MeasureGroups(const Options& options, const std::string& cohortd, const std::string& dir,
                   const NetlabPlacement* placement, Report* report) {
  const std::string group = "bench";
  for (int n : options.sizes) {
    for (const char* ordering : {"consensus", "sequencer"}) {
      if (!options.WantOrdering(ordering)) continue;
      std::string cluster_dir = absl::StrCat(dir, "/groups-n", n, "-", ordering);
      std::filesystem::create_directories(cluster_dir);
      // n members and one more daemon that hosts no member: the open-style entry point.
      Daemons daemons(cohortd, cluster_dir, n + 1, GroupsYaml(group, n, ordering), placement);
      std::string error;
      Progress(absl::StrCat("cluster n=", n, " ", ordering, ": starting ", n + 1, " daemons"));
      if (!daemons.Start(&error)) {
        Progress("cluster failed: " + error);
        continue;
      }
      std::vector<std::unique_ptr<EchoReplica>> replicas;
      bool ok = true;
      for (int i = 1; i <= n && ok; ++i) {
        if (placement != nullptr) {  // in the member's own host, like the daemon
          daemons.SpawnBeside(i, {SelfExe(), "--role", "echo-servant", "--address",
                                  daemons.ClientAddress(i), "--group", group},
                              absl::StrCat(cluster_dir, "/servant-n", i, ".log"));
          continue;
        }
        replicas.push_back(std::make_unique<EchoReplica>());
        absl::Status started = replicas.back()->Start(daemons.ClientAddress(i), group, i);
        if (!started.ok()) {
          Progress(absl::StrCat("servant at n", i, ": ", started.ToString()));
          ok = false;
        }
      }
      for (const char* style : {"closed", "closed-out", "open"}) {
        if (!ok) break;
        // closed: the client's daemon hosts a member (n2, not the round-1 coordinator/sequencer);
        // closed-out: the client's daemon n(N+1) hosts none and multicasts the call to every
        // member (003 section 4.1's closed group from outside; each orders it, the reply cache
        // executes it once); open: from n(N+1) through the request manager.
        const std::string name = style;
        int attach = name == "closed" ? 2 : n + 1;
        Style call_style = name == "open" ? Style::kOpen : Style::kClosed;
        ConnectOptions connect = BenchConnect("bench-client");
        connect.local = g_client_local;
        auto client = Client::Connect(daemons.ClientAddress(attach), connect);
        if (!client.ok()) {
          Progress("connect: " + client.status().ToString());
          continue;
        }
        // One-way's delivered rate is counted by in-process servants; not in the lab.
        MeasureReplyModes(options, {client->get()}, {n, ordering, name, absl::StrCat("n", attach)},
                          call_style, report, replicas.empty() ? nullptr : replicas.front().get());
        if (name == "closed" && options.WantMode("all")) {
          MeasureAsync(options, client->get(), {n, ordering, "closed-async", absl::StrCat("n", attach)},
                       report);
        }
      }
      if (ok && options.WantMode("all")) {
        std::vector<std::string> addresses;
        for (int i = 1; i <= n + 1; ++i) addresses.push_back(daemons.ClientAddress(i));
        for (AllocationPath path : {AllocationPath::kClosedAll, AllocationPath::kOpenFirst}) {
          ConnectOptions connect = BenchConnect("bench-allocations");
          connect.local = g_client_local;
          const int attach = path == AllocationPath::kClosedAll ? 2 : n + 1;
          auto client = Client::Connect(daemons.ClientAddress(attach), connect);
          if (!client.ok()) continue;
          Progress(absl::StrCat("n=", n, " ", ordering, " heap allocations per call"));
          report->allocations.push_back(MeasureAllocations(client->get(), addresses, n, ordering,
                                                           options.payload, path));
        }
      }
      if (ok) MeasureSpread(options, daemons, n, ordering, report);
      replicas.clear();  // detach servants before their daemons go
      daemons.KillAll();
    }
  }
}

}  // namespace cohort::bench
