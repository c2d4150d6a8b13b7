// Client::InvokeAsync on real daemons, over each way a client reaches its NSO (the local fast
// path, gRPC, an embedded node in this process): many calls in flight from one thread, each
// callback with its own result (every replica's counter value appears exactly once), on the
// Client's callbacks thread; sync calls on the same connection meanwhile; errors and futures; a
// callback that invokes again. A frozen daemon: a call fails by its wait; a Client destroyed with
// calls pending runs their callbacks (CANCELLED) before its destructor returns. InvokeAsyncInto:
// calls the application keeps, started again from their own completions, and errors.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"
#include "nso/embedded.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

// n4 is no daemon: the embedded node of the in-process case (outside the group).
const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

using test::Eventually;

// The abstract Unix socket of daemon `index`'s local fast path, from its ready line in the log
// ("local fast path unix:@cohortd-n1-<pid>-..."), without the "unix:@"; "" if none.
std::string LocalSocketOf(const test::Cluster& cluster, int index) {
  const std::string log = test::ReadText(cluster.LogPath(index));
  const std::string marker = "local fast path unix:@";
  const size_t at = log.rfind(marker);
  if (at == std::string::npos) return "";
  const size_t start = at + marker.size();
  const size_t end = log.find(')', start);
  return log.substr(start, end - start);
}

// Connected sockets the kernel lists under the abstract name `name` (/proc/net/unix shows the
// name on the listening socket and on each connection it accepted: st 03 = connected).
int ConnectedUnixSockets(const std::string& name) {
  std::istringstream lines(test::ReadText("/proc/net/unix"));
  std::string line;
  int connected = 0;
  while (std::getline(lines, line)) {
    if (line.size() > name.size() && line.compare(line.size() - name.size(), name.size(), name) == 0 &&
        line.find(" 03 ") != std::string::npos) {
      ++connected;
    }
  }
  return connected;
}

TEST_CASE("InvokeAsync: many calls in flight from one thread, each callback with its own result; "
          "errors, futures, a callback that invokes again",
          "[async][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc", "in-process");
  INFO("path " << path);
  test::Cluster cluster{{4, kGroups, "", "warn"}};
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  std::unique_ptr<EmbeddedNode> node;
  std::unique_ptr<Client> client;
  if (path == "in-process") {
    auto started = EmbeddedNode::StartFromFile(cluster.ConfigPath(4));
    REQUIRE(started.ok());
    node = *std::move(started);
    auto connected = node->Connect("async-app");
    REQUIRE(connected.ok());
    client = *std::move(connected);
  } else {
    ConnectOptions options;
    options.client_name = "async-app";
    options.local = path == "local";
    auto connected = Client::Connect(cluster.ClientAddress(1), options);
    REQUIRE(connected.ok());
    client = *std::move(connected);
  }
  REQUIRE(std::string(client->via()) == path);
  REQUIRE(test::WaitAllReply(client.get(), "counter", 3));

  constexpr int kCalls = 400;
  absl::Mutex mu;
  std::vector<absl::StatusOr<GroupReplies>> results;
  std::set<std::thread::id> callback_threads;
  for (int k = 0; k < kCalls; ++k) {
    client->InvokeAsync("counter", "add", "1", Mode::kAll,
                        [&](absl::StatusOr<GroupReplies> result) {
                          absl::MutexLock lock(&mu);
                          results.push_back(std::move(result));
                          callback_threads.insert(std::this_thread::get_id());
                        });
    if (k % 100 == 50) {  // a sync call on the same connection meanwhile
      auto sync = client->Invoke("counter", "get", "", Mode::kFirst, absl::Seconds(10));
      CHECK(sync.ok());
    }
  }
  REQUIRE(Eventually([&] {
    absl::MutexLock lock(&mu);
    return results.size() == kCalls;
  }, 60));
  std::set<int64_t> values;
  {
    absl::MutexLock lock(&mu);
    for (const auto& result : results) {
      INFO(result.status().ToString());
      REQUIRE(result.ok());
      REQUIRE(result->replies.size() == 3);
      for (const Reply& reply : result->replies) CHECK(reply.payload == result->replies[0].payload);
      int64_t value = 0;
      REQUIRE(absl::SimpleAtoi(result->replies[0].payload, &value));
      values.insert(value);
    }
    CHECK(callback_threads.size() == 1);
    CHECK(callback_threads.count(std::this_thread::get_id()) == 0);
  }
  // Each add got its own position in the total order: 1..kCalls, each once.
  CHECK(values.size() == static_cast<size_t>(kCalls));
  CHECK(*values.begin() == 1);
  CHECK(*values.rbegin() == kCalls);

  // Errors come through the callback; the future form.
  auto unknown = client->InvokeFuture("no-such-group", "add", "1", Mode::kAll).get();
  CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
  auto got = client->InvokeFuture("counter", "get", "", Mode::kAll).get();
  REQUIRE(got.ok());
  for (const Reply& reply : got->replies) CHECK(reply.payload == std::to_string(kCalls));

  // A callback invokes again: a chain of 20 calls, each started by the previous one's callback.
  absl::Notification chained;
  std::atomic<int> chain_errors{0};
  std::function<void(int)> next = [&](int left) {
    client->InvokeAsync("counter", "add", "1", Mode::kMajority,
                        [&, left](absl::StatusOr<GroupReplies> result) {
                          if (!result.ok()) chain_errors++;
                          if (left == 0) {
                            chained.Notify();
                          } else {
                            next(left - 1);
                          }
                        });
  };
  next(19);
  REQUIRE(chained.WaitForNotificationWithTimeout(absl::Seconds(60)));
  CHECK(chain_errors.load() == 0);

  // InvokeAsyncInto: 16 calls kept by the application, each started again by its own on_done
  // until 400 more adds have been made; each on_done sees its own call's replies.
  constexpr int kSlots = 16;
  constexpr int kIntoCalls = 400;
  const int64_t first_value = kCalls + 20 + 1;
  std::atomic<int> started{0};
  std::vector<int64_t> into_values;  // on the callbacks thread only, read after `into_done`
  std::vector<std::string> into_errors;
  std::set<std::thread::id> into_threads;
  absl::Notification into_done;
  int finished = 0;  // callbacks thread
  std::vector<std::unique_ptr<AsyncCall>> slots;
  for (int k = 0; k < kSlots; ++k) {
    slots.push_back(std::make_unique<AsyncCall>([&](AsyncCall& call) {
      into_threads.insert(std::this_thread::get_id());
      int64_t value = 0;
      if (!call.status().ok() || call.replies().replies.size() != 3 ||
          !absl::SimpleAtoi(call.replies().replies[0].payload, &value)) {
        into_errors.push_back(call.status().ToString());
      } else {
        for (const Reply& reply : call.replies().replies) {
          if (reply.payload != call.replies().replies[0].payload) {
            into_errors.push_back("replicas differ: " + reply.payload);
          }
        }
        into_values.push_back(value);
      }
      if (started.fetch_add(1) < kIntoCalls) {
        client->InvokeAsyncInto("counter", "add", "1", Mode::kAll, &call);
      }
      if (++finished == kIntoCalls) into_done.Notify();
    }));
  }
  for (auto& slot : slots) {
    started.fetch_add(1);
    client->InvokeAsyncInto("counter", "add", "1", Mode::kAll, slot.get());
  }
  REQUIRE(into_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  CHECK(into_errors.empty());
  if (!into_errors.empty()) INFO(into_errors[0]);
  std::set<int64_t> into_set(into_values.begin(), into_values.end());
  CHECK(into_set.size() == static_cast<size_t>(kIntoCalls));  // each add its own position
  CHECK(*into_set.begin() == first_value);
  CHECK(*into_set.rbegin() == first_value + kIntoCalls - 1);
  CHECK(into_threads.size() == 1);
  CHECK(into_threads.count(std::this_thread::get_id()) == 0);
  // One AsyncCall again and again: an OK call, then an error, which leaves no replies from the
  // call before.
  absl::Mutex ended_mu;
  int ended = 0;
  AsyncCall reused([&](AsyncCall&) {
    absl::MutexLock lock(&ended_mu);
    ++ended;
  });
  auto ended_count = [&](int count) {
    return Eventually([&] {
      absl::MutexLock lock(&ended_mu);
      return ended == count;
    }, 30);
  };
  client->InvokeAsyncInto("counter", "get", "", Mode::kAll, &reused);
  REQUIRE(ended_count(1));
  REQUIRE(reused.status().ok());
  REQUIRE(reused.replies().replies.size() == 3);
  for (const Reply& reply : reused.replies().replies) {
    CHECK(reply.payload == std::to_string(first_value + kIntoCalls - 1));
  }
  client->InvokeAsyncInto("no-such-group", "get", "", Mode::kAll, &reused);
  REQUIRE(ended_count(2));
  CHECK(reused.status().code() == absl::StatusCode::kNotFound);
  CHECK(reused.replies().replies.empty());
  client.reset();  // before the node it lives in
}

TEST_CASE("InvokeAsync: a frozen daemon fails a call by its wait; a Client destroyed with calls "
          "pending runs their callbacks first",
          "[async][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  ConnectOptions options;
  options.local = path == "local";
  auto first = Client::Connect(cluster.ClientAddress(1), options);
  auto second = Client::Connect(cluster.ClientAddress(1), options);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(test::WaitAllReply(first->get(), "counter", 3));
  REQUIRE(test::WaitAllReply(second->get(), "counter", 3));

  cluster.Pause(1);  // the clients' daemon
  std::atomic<int> cancelled{0};
  std::atomic<int> callbacks{0};
  for (int k = 0; k < 5; ++k) {
    (*first)->InvokeAsync("counter", "add", "1", Mode::kAll,
                          [&](absl::StatusOr<GroupReplies> result) {
                            if (result.status().code() == absl::StatusCode::kCancelled) cancelled++;
                            callbacks++;
                          },
                          absl::Seconds(30));
  }
  first->reset();  // returns once the 5 callbacks have run
  CHECK(callbacks.load() == 5);
  CHECK(cancelled.load() == 5);

  const auto start = std::chrono::steady_clock::now();
  // Waits 1 s + 2 s of slack; the stub then gives up on the silent daemon.
  auto stuck = (*second)->InvokeFuture("counter", "get", "", Mode::kAll, absl::Seconds(1)).get();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(stuck.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(seconds < 20);
  // The link is reset and the daemon still frozen: an asynchronous call does not wait for a new
  // link (opening one waits up to 5 s for the frozen daemon's hello); it leaves over gRPC at once
  // and fails by its wait.
  const auto issued = std::chrono::steady_clock::now();
  std::future<absl::StatusOr<GroupReplies>> later =
      (*second)->InvokeFuture("counter", "get", "", Mode::kAll, absl::Milliseconds(500));
  const double issue_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - issued).count();
  CHECK(issue_seconds < 2.5);
  CHECK_FALSE(later.get().ok());
  cluster.Resume(1);
  // The connection was reset; the next calls open a new one.
  CHECK(Eventually([&] {
    return (*second)->InvokeFuture("counter", "get", "", Mode::kAll, absl::Seconds(2)).get().ok();
  }, 30));
}

TEST_CASE("a Client outlives its daemon's restart: it attaches again and sends the refused call "
          "once more, sync and async",
          "[async][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  test::Cluster cluster{{3, kGroups, "", "info"}};  // (info: the ready line names the socket)
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 2; i <= 3; ++i) {  // n1's replica would die with it
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  ConnectOptions options;
  options.local = path == "local";
  auto client = Client::Connect(cluster.ClientAddress(1), options);
  REQUIRE(client.ok());
  CHECK(Eventually([&] {
    return (*client)->Invoke("counter", "get", "", Mode::kFirst, absl::Seconds(2)).ok();
  }, 20));
  const uint64_t first_nso = (*client)->nso();

  cluster.Kill(1);
  REQUIRE(cluster.StartNode(1));  // a new daemon: the client's NSO is unknown there
  // The first calls may fail while the restarted daemon rejoins; none fails for good.
  CHECK(Eventually([&] {
    return (*client)->Invoke("counter", "get", "", Mode::kFirst, absl::Seconds(2)).ok();
  }, 30));
  CHECK((*client)->nso() != first_nso);
  CHECK((*client)->GroupDetails("counter").ok());
  if (path == "local") {
    // Back on the fast path: the new daemon's local socket (its abstract name carries its pid)
    // has a connection, and only this client could have made it (no servant runs at n1).
    const std::string socket = LocalSocketOf(cluster, 1);
    REQUIRE_FALSE(socket.empty());
    CHECK(Eventually([&] {
      (void)(*client)->Invoke("counter", "get", "", Mode::kFirst, absl::Seconds(2));
      return ConnectedUnixSockets(socket) > 0;
    }, 20));
  }
  // Asynchronous calls after another restart: the first one is refused ("unknown NSO") and
  // sent again by the library after it attached again.
  cluster.Kill(1);
  REQUIRE(cluster.StartNode(1));
  const uint64_t second_nso = (*client)->nso();
  CHECK(Eventually([&] {
    return (*client)
        ->InvokeFuture("counter", "get", "", Mode::kFirst, absl::Seconds(2))
        .get()
        .ok();
  }, 30));
  CHECK((*client)->nso() != second_nso);
}

}  // namespace
}  // namespace cohort
