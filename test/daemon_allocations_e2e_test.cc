// Issue 7's first deliverable at the daemons: no per-message allocation on the hot path
// (omniORB2, 001 sections 5-6). Four real cohortd (n1..n3 members, n4 outside the group) count
// their C++ heap allocations (Admin.Status heap_allocations); sequential calls through the raw
// TCP peer transport and the local fast path must leave each daemon well under one allocation per
// call: closed wait-for-all calls from member n2, and open wait-for-first calls from n4 through
// the request manager (asynchronous forwarding). Before session 63 each daemon made 4-8 per call.
// What the daemons do without calls (ticks, health checks) in as long a time is subtracted, and
// with it what reading the count costs.
// The same for this process, the client and its three servants (the stub library's side), which
// call and serve into kept memory (Client::InvokeInto, Servant::ServeInto): under one per call
// too (7 per call before session 64, with Invoke and Serve handing payloads over by value); and
// with 16 calls in flight from one thread through AsyncCalls it keeps (Client::InvokeAsyncInto).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/heap_count.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

const char kGroups[] = "groups:\n  - {name: g, members: [n1, n2, n3]}\n";
constexpr int kDaemons = 4;
constexpr int kCalls = 1000;

// Each daemon's heap_allocations now (empty on error), read through `admins` (one channel per
// daemon, kept: a read on a new channel also counted the daemon's side of the connection).
std::vector<int64_t> Counts(const std::vector<std::unique_ptr<api::Admin::Stub>>& admins) {
  std::vector<int64_t> counts;
  for (const auto& admin : admins) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    api::StatusRequest request;
    api::StatusReply reply;
    if (!admin->Status(&context, request, &reply).ok()) return {};
    counts.push_back(static_cast<int64_t>(reply.heap_allocations()));
  }
  return counts;
}

// The group's three echo servants, in this process, serving into kept memory.
std::vector<std::unique_ptr<Servant>> StartServants(const test::Cluster& cluster) {
  std::vector<std::unique_ptr<Servant>> servants;
  for (int i = 1; i <= 3; ++i) {
    auto servant = Servant::Create(cluster.ClientAddress(i), "g");
    REQUIRE(servant.ok());
    (*servant)->ServeInto("echo", [](const std::string& payload, std::string* reply) {
      reply->assign(payload);
      return absl::OkStatus();
    });
    REQUIRE((*servant)->Start().ok());
    servants.push_back(*std::move(servant));
  }
  return servants;
}

TEST_CASE("daemons allocate nothing per call on the hot path", "[alloc][e2e]") {
  test::Cluster cluster({kDaemons, kGroups, "", "warn"});
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Servant>> servants = StartServants(cluster);
  const std::string payload(100, 'p');  // past the short-string buffer, like cohort-bench's
  struct Path {
    const char* name;
    int client_at;
    Mode mode;
    Style style;
  };
  const Path path = GENERATE(Path{"closed all from member n2", 2, Mode::kAll, Style::kClosed},
                             Path{"open first from n4, outside", 4, Mode::kFirst, Style::kOpen});
  INFO(path.name);
  auto client = Client::Connect(cluster.ClientAddress(path.client_at));
  REQUIRE(client.ok());
  GroupReplies replies;  // the caller's, reused
  auto call = [&] {
    absl::Status status = (*client)->InvokeInto("g", "echo", payload, path.mode, &replies,
                                                absl::Seconds(10), path.style);
    return status.ok() && !replies.replies.empty() && replies.replies[0].payload == payload;
  };
  REQUIRE(test::Eventually([&] { return call(); }, 30));
  for (int i = 0; i < 300; ++i) REQUIRE(call());  // warm: every pool at its steady size

  std::vector<std::unique_ptr<api::Admin::Stub>> admins;
  for (int i = 1; i <= kDaemons; ++i) {
    admins.push_back(api::Admin::NewStub(DaemonChannel(cluster.ClientAddress(i))));
  }
  for (int i = 0; i < 3; ++i) REQUIRE(Counts(admins).size() == kDaemons);  // connections up
  // Each window below holds what one read of the counts did after taking them (its reply), so
  // subtracting the quiet window's growth from the busy one's takes that out too. A second
  // measurement is taken if the first is over the bound at any daemon (a view change on a
  // starved machine is not what this test is about); a per-message allocation fails both.
  // This process's own count is taken between the reads of the daemons' (a read allocates here).
  std::vector<double> per_call(kDaemons, 0);
  double own_per_call = 0;
  std::string seen;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const std::vector<int64_t> before = Counts(admins);
    REQUIRE(before.size() == kDaemons);
    const int64_t own_before = static_cast<int64_t>(*nso::HeapAllocations());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) REQUIRE(call());
    const auto took = std::chrono::steady_clock::now() - start;
    const int64_t own_after = static_cast<int64_t>(*nso::HeapAllocations());
    const std::vector<int64_t> after = Counts(admins);
    REQUIRE(after.size() == kDaemons);
    const int64_t own_idle_start = static_cast<int64_t>(*nso::HeapAllocations());
    std::this_thread::sleep_for(took);  // as long without calls
    const int64_t own_idle = static_cast<int64_t>(*nso::HeapAllocations()) - own_idle_start;
    const std::vector<int64_t> idle = Counts(admins);
    REQUIRE(idle.size() == kDaemons);
    own_per_call = static_cast<double>(own_after - own_before - own_idle) / kCalls;
    bool under = own_per_call < 1.0;
    absl::StrAppend(&seen, "measurement ", attempt, ", this process (client and servants): ",
                    own_after - own_before, " allocations over the calls, ", own_idle,
                    " as long without calls\n");
    for (int i = 0; i < kDaemons; ++i) {
      const int64_t busy = after[i] - before[i];
      const int64_t quiet = idle[i] - after[i];
      per_call[i] = static_cast<double>(busy - quiet) / kCalls;
      under = under && per_call[i] < 1.0;
      absl::StrAppend(&seen, "measurement ", attempt, ", n", i + 1, ": ", busy,
                      " allocations over ", kCalls, " calls (",
                      std::chrono::duration_cast<std::chrono::milliseconds>(took).count(),
                      " ms), ", quiet, " as long without calls\n");
    }
    if (under) break;
  }
  INFO(seen);
  for (int i = 0; i < kDaemons; ++i) {
    INFO("n" << i + 1);
    CHECK(per_call[i] < 1.0);  // 0.0-0.4 here (cohort-bench, and under load); 4-8 before session 63
  }
  CHECK(own_per_call < 1.0);  // 5-7 with Invoke and Serve (cohort-bench)
}

// 16 calls in flight from one thread through AsyncCalls the application keeps, each started
// again by its own completion (Client::InvokeAsyncInto, the pipelining client's way): this
// process (the client, its reader and callbacks threads, and the servants) under one allocation
// per call; InvokeAsync made 14-20 per call here (cohort-bench).
TEST_CASE("a pipelining client allocates nothing per call with InvokeAsyncInto", "[alloc][e2e]") {
  test::Cluster cluster({kDaemons, kGroups, "", "warn"});
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Servant>> servants = StartServants(cluster);
  auto client = Client::Connect(cluster.ClientAddress(2));
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == "local");
  const std::string payload(100, 'p');
  REQUIRE(test::Eventually([&] {
    return (*client)->Invoke("g", "echo", payload, Mode::kAll, absl::Seconds(10)).ok();
  }, 30));
  constexpr int kInFlight = 16;
  // One run of `total` calls; the callbacks thread's counts, read once `ended` is notified.
  struct Run {
    explicit Run(int total) : total(total) {}
    const int total;
    std::atomic<int> started{0};
    int ended = 0;
    int good = 0;
    absl::Notification all_ended;
  };
  Run* run = nullptr;
  std::vector<std::unique_ptr<AsyncCall>> kept;
  for (int k = 0; k < kInFlight; ++k) {
    kept.push_back(std::make_unique<AsyncCall>([&](AsyncCall& call) {
      const bool good = call.status().ok() && call.replies().replies.size() == 3 &&
                        call.replies().replies[0].payload == payload;
      run->good += good ? 1 : 0;
      if (run->started.fetch_add(1) < run->total) {
        (*client)->InvokeAsyncInto("g", "echo", payload, Mode::kAll, &call, absl::Seconds(10));
      }
      if (++run->ended == run->total) run->all_ended.Notify();
    }));
  }
  std::string seen;
  double own_per_call = 0;
  // A first run grows the kept memory; then up to two measured ones (the second only if the
  // first is over the bound: a view change on a starved machine is not what this is about).
  for (int attempt = 0; attempt <= 2; ++attempt) {
    Run this_run(attempt == 0 ? 300 : kCalls);
    run = &this_run;
    const int64_t before = static_cast<int64_t>(*nso::HeapAllocations());
    for (auto& call : kept) {
      this_run.started.fetch_add(1);
      (*client)->InvokeAsyncInto("g", "echo", payload, Mode::kAll, call.get(), absl::Seconds(10));
    }
    REQUIRE(this_run.all_ended.WaitForNotificationWithTimeout(absl::Seconds(120)));
    const int64_t grown = static_cast<int64_t>(*nso::HeapAllocations()) - before;
    REQUIRE(this_run.good == this_run.total);
    if (attempt == 0) continue;
    own_per_call = static_cast<double>(grown) / kCalls;
    absl::StrAppend(&seen, "measurement ", attempt, ": ", grown, " allocations over ", kCalls,
                    " calls\n");
    if (own_per_call < 1.0) break;
  }
  INFO(seen);
  CHECK(own_per_call < 1.0);
}

}  // namespace
}  // namespace cohort
