// A servant that stops reading is cut off at limits.servant_cutoff_bytes unread, whichever way it
// reaches its daemon: a gRPC stream, the local fast path, an embedded node's queue. What waited for
// it is dropped, its stream ends UNAVAILABLE (naming the limit where the stream can carry it), its
// daemon leaves the group (the replica's state went with its only servant) and keeps serving, and
// the other replicas apply every call. Before session 50 a gRPC or embedded servant that did not
// read had no bound: its daemon queued everything the group delivered for it.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"
#include "test/raw_client.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

constexpr int kCalls = 400;
constexpr size_t kPayloadBytes = 16 * 1024;  // 6.4 MB in all, the cut-off 2 MiB
const char kLimits[] =
    "limits: {servant_backlog_bytes: 524288, servant_cutoff_bytes: 2097152, servant_stall_ms: 300}\n";

// A replica counting "put" calls; "count" answers how many. `blocked`: its first "put" waits for
// `release` (a servant that stops reading: its delivery thread is held).
struct Counter {
  std::unique_ptr<Servant> servant;
  bool blocked = false;
  absl::Notification release;
  mutable absl::Mutex mu;
  int puts ABSL_GUARDED_BY(mu) = 0;

  ~Counter() {
    if (!release.HasBeenNotified()) release.Notify();
    servant.reset();  // its delivery thread uses the members above
  }

  absl::Status Start(absl::StatusOr<std::unique_ptr<Servant>> created) {
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    servant->Serve("put", [this](const std::string&) -> absl::StatusOr<std::string> {
      if (blocked) release.WaitForNotification();
      absl::MutexLock lock(&mu);
      ++puts;
      return std::string();
    });
    servant->Serve("count", [this](const std::string&) -> absl::StatusOr<std::string> {
      absl::MutexLock lock(&mu);
      return absl::StrCat(puts);
    });
    return servant->Start();
  }
  absl::Status Start(const std::string& address) {
    ConnectOptions options;
    options.client_name = "counter";
    options.local = true;
    return Start(Servant::Create(address, "log", options));
  }
  int count() const {
    absl::MutexLock lock(&mu);
    return puts;
  }
};

// Counters on the local fast path of daemons first..last, each started.
std::vector<std::unique_ptr<Counter>> StartReaders(test::Cluster& cluster, int first, int last) {
  std::vector<std::unique_ptr<Counter>> readers;
  for (int i = first; i <= last; ++i) {
    readers.push_back(std::make_unique<Counter>());
    REQUIRE(readers.back()->Start(cluster.ClientAddress(i)).ok());
  }
  return readers;
}

double Metric(test::Cluster& cluster, int node, const std::string& series) {
  return test::MetricValue(test::HttpGet(cluster.MetricsPort(node), "/metrics"), series);
}

test::ClusterOptions Options(int size, const std::string& members) {
  test::ClusterOptions options;
  options.size = size;
  options.groups_yaml = absl::StrCat("groups:\n  - {name: log, members: [", members, "]}\n");
  options.extra_yaml = kLimits;
  options.metrics = true;
  return options;
}

// The group answers a wait-for-all call from n2's clients with `replies` replies.
bool Replies(test::Cluster& cluster, size_t replies) {
  auto client = Client::Connect(cluster.ClientAddress(2));
  if (!client.ok()) return false;
  auto all = (*client)->Invoke("log", "count", "", Mode::kAll, absl::Seconds(2));
  return all.ok() && all->replies.size() == replies;
}

// kCalls one-way calls of kPayloadBytes from a client of n2 that waits for room; then every
// replica in `readers` applies them all, n1 cut its servant off (log and metric), and the group
// goes on without n1's daemon, which still serves its clients from outside the group.
void FloodAndCheck(test::Cluster& cluster, const std::vector<std::unique_ptr<Counter>>& readers,
                   int cut_at, bool cut_at_daemon = true) {
  ConnectOptions connect;
  connect.backpressure_wait = absl::Seconds(60);
  auto client = Client::Connect(cluster.ClientAddress(2), connect);
  REQUIRE(client.ok());
  const std::string pad(kPayloadBytes, 'x');
  for (int i = 0; i < kCalls; ++i) {
    absl::Status status = (*client)->Send("log", "put", pad);
    INFO("call " << i);
    REQUIRE(status.ok());
  }
  const bool applied = test::Eventually([&] {
    for (const auto& reader : readers) {
      if (reader->count() < kCalls) return false;
    }
    return true;
  }, 60);
  std::string counts;
  for (const auto& reader : readers) absl::StrAppend(&counts, reader->count(), " ");
  INFO("applied: " << counts << "\n" << cluster.LogTails(20));
  CHECK(applied);
  for (const auto& reader : readers) CHECK(reader->count() == kCalls);
  if (cut_at_daemon) {
    // n1 may still be delivering what the other replicas have applied (a slower machine, or
    // n1 behind on its share of the CPU): the cut-off comes once its servant's unread bytes pass
    // the limit, not necessarily by the time the readers are done.
    CHECK(test::Eventually(
        [&] { return Metric(cluster, cut_at, "cohort_servants_cut_off_total") >= 1; }, 30));
    CHECK(Metric(cluster, cut_at, "cohort_servants_cut_off_total") == 1);
    const std::string log = test::ReadText(cluster.LogPath(cut_at));
    CHECK_THAT(log, Contains("does not read what it is sent"));
    CHECK_THAT(log, Contains("limits.servant_cutoff_bytes): cut off"));
    CHECK_THAT(log, Contains("its last servant detached"));
  }
  for (int node = 1; node <= 3; ++node) {  // the daemons
    if (node != cut_at) CHECK(Metric(cluster, node, "cohort_servants_cut_off_total") == 0);
  }
  // The cut-off replica's daemon left the group; n1 still serves a client's call.
  CHECK(test::Eventually([&] { return Replies(cluster, readers.size()); }, 20));
  auto at_n1 = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(at_n1.ok());
  auto all = (*at_n1)->Invoke("log", "count", "", Mode::kAll, absl::Seconds(5));
  REQUIRE(all.ok());
  CHECK(all->replies.size() == readers.size());
}

}  // namespace

TEST_CASE("a gRPC servant that reads nothing is cut off: its stream ends UNAVAILABLE naming the "
          "limit, the group goes on without its daemon",
          "[flow][e2e]") {
  test::Cluster cluster(Options(3, "n1, n2, n3"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Counter>> readers = StartReaders(cluster, 2, 3);
  // n1's servant: a raw stream (what another language's servant is) that registers and then
  // reads nothing.
  test::RawClient raw = test::AttachRaw(test::SmallWindowChannel(cluster.ClientAddress(1)),
                                        "raw-servant");
  REQUIRE(raw.nso != 0);
  grpc::ClientContext context;
  auto stream = raw.stub->Serve(&context);
  REQUIRE(stream->Write(test::RegisterMessage(raw.nso, "log")));
  api::ServantEvent event;
  REQUIRE(stream->Read(&event));
  REQUIRE(event.registered());

  FloodAndCheck(cluster, readers, 1);

  // Reading again, the servant gets what was in flight, then the end naming the limit.
  int read = 0;
  while (stream->Read(&event)) ++read;
  CHECK(read < kCalls);
  grpc::Status status = stream->Finish();
  CHECK(status.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK_THAT(status.error_message(), Contains("limits.servant_cutoff_bytes"));
}

TEST_CASE("a servant on the local fast path that stops reading is cut off: its link is closed",
          "[flow][e2e]") {
  test::Cluster cluster(Options(3, "n1, n2, n3"));
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<Counter>> readers = StartReaders(cluster, 2, 3);
  Counter stuck;
  stuck.blocked = true;
  REQUIRE(stuck.Start(cluster.ClientAddress(1)).ok());
  REQUIRE(std::string(stuck.servant->via()) == "local");
  REQUIRE(test::Eventually([&] { return Replies(cluster, 3); }, 20));

  FloodAndCheck(cluster, readers, 1);

  stuck.release.Notify();
  absl::Status why = stuck.servant->Wait();
  CHECK(why.code() == absl::StatusCode::kUnavailable);
  CHECK(stuck.count() < kCalls);
}

TEST_CASE("an embedded node's servant that stops taking its deliveries is cut off: Wait says why",
          "[flow][e2e]") {
  // n1..n3 are cohortd processes; n4 is this test process, whose servant stops.
  test::Cluster cluster(Options(4, "n1, n2, n3, n4"));
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(4));
  REQUIRE(node.ok());
  std::vector<std::unique_ptr<Counter>> readers = StartReaders(cluster, 1, 3);
  {
    Counter stuck;
    stuck.blocked = true;
    REQUIRE(stuck.Start((*node)->CreateServant("log", "embedded-log")).ok());
    REQUIRE(test::Eventually([&] { return Replies(cluster, 4); }, 20));

    FloodAndCheck(cluster, readers, /*cut_at=*/4, /*cut_at_daemon=*/false);

    stuck.release.Notify();
    absl::Status why = stuck.servant->Wait();
    CHECK(why.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(why.message()), Contains("limits.servant_cutoff_bytes"));
    CHECK(stuck.count() == 1);  // the delivery it was held in; nothing after the cut-off
    // n4 left the group and still serves its own clients, from outside.
    auto client = (*node)->Connect("after");
    REQUIRE(client.ok());
    auto all = (*client)->Invoke("log", "count", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    CHECK(all->replies.size() == 3);
  }
  readers.clear();  // the servants before their node
}

}  // namespace cohort
