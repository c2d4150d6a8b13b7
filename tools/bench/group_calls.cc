#include "tools/bench/group_calls.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tools/bench/measure.h"
#include "tools/bench/paired.h"

namespace cohort::bench {

ConnectOptions BenchConnect(const std::string& name) {
  ConnectOptions options;
  options.client_name = name;
  options.ca_file = g_tls_ca;
  options.tls = !g_tls_ca.empty();
  return options;
}

absl::Status EchoReplica::Start(const std::string& address, const std::string& group, int index) {
  ConnectOptions options = BenchConnect(absl::StrCat("bench-servant-", index));
  options.local = g_servant_local;
  return Serve(Servant::Create(address, group, options));
}

absl::Status EchoReplica::StartEmbedded(EmbeddedNode* node, const std::string& group,
                                        bool dispatch_inline) {
  return Serve(node->CreateServant(group, "bench-embedded-servant"), dispatch_inline);
}

absl::Status EchoReplica::Serve(absl::StatusOr<std::unique_ptr<Servant>> created,
                                bool dispatch_inline) {
  if (!created.ok()) return created.status();
  servant = std::move(*created);
  if (dispatch_inline) servant->DispatchInline();
  // Into the servant's kept reply memory (Servant::ServeInto): no allocation per call.
  servant->ServeInto("echo", [this](const std::string& payload, std::string* reply) {
    delivered.fetch_add(1, std::memory_order_relaxed);
    reply->assign(payload);
    return absl::OkStatus();
  });
  return servant->Start();
}

std::string GroupsYaml(const std::string& group, int n, const std::string& ordering) {
  std::vector<std::string> members;
  for (int i = 1; i <= n; ++i) members.push_back(absl::StrCat("n", i));
  // Every call names its style explicitly; everything else stays at cohortd's defaults.
  return absl::StrCat(g_peer_transport.empty() ? "" : absl::StrCat("peer_transport: ", g_peer_transport, "\n"),
                      "groups:\n  - name: ", group, "\n    members: [", absl::StrJoin(members, ", "),
                      "]\n    ordering: ", ordering, "\n");
}

absl::Status WaitReady(Client* client, const std::string& group, Style style,
                       absl::Duration timeout) {
  absl::Time end = absl::Now() + timeout;
  absl::Status last = absl::DeadlineExceededError("not ready");
  while (absl::Now() < end) {
    auto view = client->GroupDetails(group);
    if (view.ok() && std::none_of(view->members.begin(), view->members.end(),
                                  [](const ViewMember& m) { return m.suspected; })) {
      auto result = client->Invoke(group, "echo", "ready", Mode::kAll, absl::Seconds(2), style);
      if (result.ok()) return absl::OkStatus();
      last = result.status();
    } else if (!view.ok()) {
      last = view.status();
    } else {
      last = absl::UnavailableError("members still suspected");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

bool RepliesOk(const absl::StatusOr<GroupReplies>& result, std::string* error) {
  if (!result.ok()) {
    *error = result.status().ToString();
    return false;
  }
  return RepliesOk(*result, error);
}

bool RepliesOk(const GroupReplies& result, std::string* error) {
  if (result.replies.size() < result.wanted) {
    *error = absl::StrCat(result.replies.size(), " of ", result.wanted, " replies");
    return false;
  }
  for (const Reply& reply : result.replies) {
    if (!reply.status.ok()) {
      *error = absl::StrCat(reply.member, ": ", reply.status.ToString());
      return false;
    }
  }
  return true;
}

CallFactory GroupCalls(std::vector<Client*> clients, const std::string& group, Mode mode,
                       Style style, std::string payload) {
  return [clients, group, mode, style, payload](int caller) -> CallFn {
    Client* client = clients[static_cast<size_t>(caller) % clients.size()];
    // Each caller's replies in its own kept memory (Client::InvokeInto).
    return [client, group, mode, style, payload, replies = GroupReplies()](
               std::string* error) mutable {
      if (mode == Mode::kOneWay) {
        absl::Status status = client->Send(group, "echo", payload);
        if (!status.ok()) *error = status.ToString();
        return status.ok();
      }
      absl::Status status =
          client->InvokeInto(group, "echo", payload, mode, &replies, absl::Seconds(5), style);
      if (!status.ok()) {
        *error = status.ToString();
        return false;
      }
      return RepliesOk(replies, error);
    };
  };
}

namespace {

const char* BenchModeName(Mode mode) {
  switch (mode) {
    case Mode::kFirst: return "first";
    case Mode::kMajority: return "majority";
    case Mode::kAll: return "all";
    case Mode::kOneWay: return "one_way";
  }
  return "?";
}

// One-way: after each run, wait (bounded) until the servant at n1 has been delivered every accepted
// request, and report accepted / (window + drain) as the delivered rate.
double DrainOneWay(const EchoReplica& replica, int64_t before, const LoadResult& run) {
  int64_t target = before + run.calls;
  absl::Time start = absl::Now();
  absl::Time end = start + absl::Seconds(10);
  while (replica.delivered.load() < target && absl::Now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double drain = absl::ToDoubleSeconds(absl::Now() - start);
  int64_t delivered = std::min(replica.delivered.load() - before, run.calls);
  return delivered / std::max(1e-9, run.seconds + drain);
}

// One-way calls: each run separately, so that each can be drained into a delivered rate at
// `probe`, an in-process servant of the group.
Series MeasureOneWay(const Options& options, const CallFactory& factory, const EchoReplica& probe) {
  Series series;
  LoadLimits sequential{options.seq_calls, absl::Milliseconds(options.seq_ms), 20};
  int64_t before = probe.delivered.load();
  series.sequential = RunLoad(1, sequential, factory);
  double sequential_delivered = DrainOneWay(probe, before + 20, series.sequential);
  for (int callers : options.callers) {
    if (callers == 1) {
      series.by_callers.push_back(series.sequential);
      series.delivered_per_s.push_back(sequential_delivered);
      continue;
    }
    before = probe.delivered.load();
    LoadLimits window{INT64_MAX, absl::Milliseconds(options.window_ms), 0};
    LoadResult run = RunLoad(callers, window, factory);
    series.by_callers.push_back(run);
    series.delivered_per_s.push_back(DrainOneWay(probe, before, run));
  }
  return series;
}

}  // namespace

void MeasureReplyModes(const Options& options, const std::vector<Client*>& clients,
                       const RowKey& key, Style call_style, Report* report,
                       const EchoReplica* probe, const std::vector<Mode>& modes) {
  const std::string group = "bench";
  for (Client* client : clients) {
    absl::Status ready = WaitReady(client, group, call_style, absl::Seconds(15));
    if (!ready.ok()) {
      Progress(absl::StrCat("group not ready (", key.style, "): ", ready.ToString()));
      return;
    }
  }
  std::string payload(options.payload, 'x');
  for (Mode mode : modes) {
    if (mode == Mode::kOneWay && probe == nullptr) continue;
    if (!options.WantMode(BenchModeName(mode))) continue;
    Progress(absl::StrCat("n=", key.n, " ", key.ordering, " ", key.style, " ", BenchModeName(mode)));
    GroupResult result;
    result.n = key.n;
    result.ordering = key.ordering;
    result.style = key.style;
    result.mode = BenchModeName(mode);
    result.attached_to = key.attached_to;
    CallFactory factory = GroupCalls(clients, group, mode, call_style, payload);
    result.series = mode == Mode::kOneWay ? MeasureOneWay(options, factory, *probe)
                                          : Measure(options, factory);
    if (IsTargetRow(key.n, key.style, mode)) MeasurePaired(options, factory, &result);
    report->groups.push_back(std::move(result));
  }
}

}  // namespace cohort::bench
