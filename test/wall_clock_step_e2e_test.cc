// A call's deadline is a span of time, not an instant of the wall clock: the wall clock may be
// stepped (NTP at boot, an operator, a virtual machine restored from a snapshot) while calls wait.
// This test process reads a wall clock it can step (wall_clock_shim.h); the daemons are other
// processes and read the real clock.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/wall_clock_shim.h"

namespace cohort {
namespace {

using Steady = std::chrono::steady_clock;

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";
constexpr int64_t kHour = test::kHourNs;

using test::WallStep;

double SecondsSince(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

TEST_CASE("the test's wall clock steps and its monotonic clock does not", "[clock]") {
  const int64_t before = absl::ToUnixSeconds(absl::Now());
  const auto steady_before = Steady::now();
  test::SetWallClockStep(kHour);
  const int64_t after = absl::ToUnixSeconds(absl::Now());
  const auto system_after = std::chrono::system_clock::now();
  const double steady_moved = SecondsSince(steady_before);
  test::SetWallClockStep(0);
  CHECK(after - before >= 3599);
  CHECK(std::chrono::duration_cast<std::chrono::seconds>(system_after.time_since_epoch()).count() -
            before >= 3599);
  CHECK(steady_moved < 60);
}

// Three daemons with a counter replica each, and a client of daemon 1 (over the local fast path
// or gRPC) that has made a call.
struct SteppedCluster {
  explicit SteppedCluster(bool local) : setup(kGroups, "", "warn", Options(local)) {
    if (!setup.counters.ok()) return;
    client = Client::Connect(setup.cluster.ClientAddress(1), Options(local));
    if (client.ok()) called = (*client)->Invoke("counter", "add", "1", Mode::kAll).ok();
  }
  static ConnectOptions Options(bool local) {
    ConnectOptions options;
    options.local = local;
    return options;
  }
  test::CounterCluster setup;
  absl::StatusOr<std::unique_ptr<Client>> client = absl::UnavailableError("not connected");
  bool called = false;
};

// A call outlives a step forward of the wall clock (before: a call waiting failed
// DEADLINE_EXCEEDED when its wait was next looked at: at once for an asynchronous call).
TEST_CASE("a call whose replies take 600 ms outlives a step forward of the wall clock",
          "[clock][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  const int64_t step = GENERATE(as<int64_t>{}, 3600, 11) * 1000000000;
  INFO("path " << path << ", step " << step << " ns");
  SteppedCluster stepped(path == "local");
  REQUIRE(stepped.called);
  Client& client = **stepped.client;
  for (auto& replica : stepped.setup.counters->replicas) replica->slow_ms = 600;
  {
    WallStep forward(std::chrono::milliseconds(200), step);
    const auto start = Steady::now();
    auto sync = client.Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
    INFO("took " << SecondsSince(start) << " s: " << sync.status());
    REQUIRE(sync.ok());
    CHECK(sync->replies.size() == 3);
  }
  {
    WallStep forward(std::chrono::milliseconds(200), step);
    const auto start = Steady::now();
    auto async = client.InvokeFuture("counter", "add", "1", Mode::kAll, absl::Seconds(10)).get();
    INFO("took " << SecondsSince(start) << " s: " << async.status());
    REQUIRE(async.ok());
    CHECK(async->replies.size() == 3);
  }
}

// A daemon answers every call by its deadline; the client waits 2 s more, then gives up on it
// (client.cc). Frozen, the daemon answers nothing, and the client's wait must end by itself
// (before: a step back of an hour made it wait an hour more; here until the daemon thaws at 9 s).
TEST_CASE("a call to a frozen daemon ends 2 s after its deadline across a step back of the wall "
          "clock", "[clock][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  const bool async = GENERATE(false, true);
  INFO("path " << path << (async ? ", InvokeFuture" : ", Invoke"));
  SteppedCluster stepped(path == "local");
  REQUIRE(stepped.called);
  Client& client = **stepped.client;
  for (auto& replica : stepped.setup.counters->replicas) replica->slow_ms = 600;
  std::atomic<bool> returned{false};
  const auto start = Steady::now();
  std::thread freezer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stepped.setup.cluster.Pause(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    test::SetWallClockStep(-kHour);
    while (!returned && Steady::now() - start < std::chrono::seconds(9)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    test::SetWallClockStep(0);
    stepped.setup.cluster.Resume(1);
  });
  absl::StatusOr<GroupReplies> result = absl::UnknownError("not called");
  if (async) {
    result = client.InvokeFuture("counter", "add", "1", Mode::kAll, absl::Seconds(1)).get();
  } else {
    result = client.Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(1));
  }
  const double took = SecondsSince(start);
  returned = true;
  freezer.join();
  INFO("took " << took << " s: " << result.status());
  CHECK(!result.ok());
  CHECK(took > 2.5);
  CHECK(took < 6);
}

}  // namespace
}  // namespace cohort
