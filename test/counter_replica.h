// Test helpers shared by the real-daemon tests: a replicated counter servant and waits for a
// group to be ready.
#ifndef COHORT_TEST_COUNTER_REPLICA_H_
#define COHORT_TEST_COUNTER_REPLICA_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"

namespace cohort::test {

// A replica of a counter: "add N" adds and answers the new value, "get" answers it; its state is
// transferred to joiners. `slow_ms` delays "add"; `executions` counts them.
struct CounterReplica {
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> value{0};
  std::atomic<int> executions{0};
  std::atomic<int> slow_ms{0};
  std::atomic<int> state_installs{0};
  bool rejoin = false;  // Servant::RejoinAfterDaemonRestart
  // Servant::OnViewChange: each view the servant got, with the counter's value and the state
  // installs so far at that point of its deliveries.
  struct SeenView {
    GroupView view;
    int64_t value = 0;
    int state_installs = 0;
  };
  bool record_views = false;
  std::vector<SeenView> Views() const {
    absl::MutexLock lock(&views_mu);
    return views;
  }
  mutable absl::Mutex views_mu;
  std::vector<SeenView> views ABSL_GUARDED_BY(views_mu);

  // The servant first: its delivery thread runs the handlers, which use the members below it
  // (destroyed before it otherwise: a view recorded into a destroyed vector was a double free).
  ~CounterReplica() { servant.reset(); }
  std::string kept_path;  // Servant::KeepStateIn, when set
  ConnectOptions connect;  // TLS and tokens, when the daemons want them (its `local` and Start's)

  // `local` false: the servant's stream goes over gRPC (ApiService::Serve), not the fast path.
  absl::Status Start(const std::string& address, const std::string& group, bool local = true) {
    ConnectOptions options = connect;
    options.client_name = "counter";
    options.local = local && connect.local;
    auto created = Servant::Create(address, group, options);
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    servant->Serve("add", [this](const std::string& payload) -> absl::StatusOr<std::string> {
      executions++;
      if (int ms = slow_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      int64_t delta = 0;
      if (!absl::SimpleAtoi(payload, &delta)) return absl::InvalidArgumentError("not a number");
      return absl::StrCat(value += delta);
    });
    servant->Serve("get", [this](const std::string&) -> absl::StatusOr<std::string> {
      return absl::StrCat(value.load());
    });
    servant->OnGetState([this]() -> absl::StatusOr<std::string> { return absl::StrCat(value.load()); });
    servant->OnSetState([this](const std::string& state) -> absl::Status {
      int64_t installed = 0;
      if (!absl::SimpleAtoi(state, &installed)) return absl::InvalidArgumentError("bad state");
      value = installed;
      state_installs++;
      return absl::OkStatus();
    });
    if (record_views) {
      servant->OnViewChange([this](const GroupView& view) {
        absl::MutexLock lock(&views_mu);
        views.push_back({view, value.load(), state_installs.load()});
      });
    }
    if (rejoin) servant->RejoinAfterDaemonRestart();
    if (!kept_path.empty()) servant->KeepStateIn(kept_path);
    return servant->Start();
  }
};

// A counter replica of `group` on each of daemons 1..count of `cluster`; `tune` sets a replica's
// options (rejoin, connect) before it starts, given its daemon's index.
inline absl::StatusOr<std::vector<std::unique_ptr<CounterReplica>>> StartCounterReplicas(
    const Cluster& cluster, int count, const std::string& group = "counter",
    const std::function<void(int, CounterReplica*)>& tune = nullptr) {
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  for (int i = 1; i <= count; ++i) {
    replicas.push_back(std::make_unique<CounterReplica>());
    if (tune) tune(i, replicas.back().get());
    if (absl::Status started = replicas.back()->Start(cluster.ClientAddress(i), group);
        !started.ok()) {
      return started;
    }
  }
  return replicas;
}

// Counter replicas of `group` on daemons 1..count and a client on daemon 1 that waited until every
// replica answers, then added 5 to the counter (the state a joiner must get).
struct CounterGroup {
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  absl::StatusOr<std::unique_ptr<Client>> client = absl::UnavailableError("not connected");
};

// Until the daemon of `client` suspects no member of `group`.
inline bool WaitHealthy(Client* client, const std::string& group) {
  for (int attempt = 0; attempt < 400; ++attempt) {
    auto view = client->GroupDetails(group);
    if (view.ok() && std::none_of(view->members.begin(), view->members.end(),
                                  [](const ViewMember& m) { return m.suspected; })) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

// Until a wait-for-all "get" to `group` is answered by `replies` members.
inline bool WaitAllReply(Client* client, const std::string& group, size_t replies) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto result = client->Invoke(group, "get", "", Mode::kAll, absl::Seconds(2));
    if (result.ok() && result->replies.size() == replies) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Counter replicas of `group` on daemons 1..count and a client connected with `options` to
// daemon `at` that waited until every replica answers.
inline absl::StatusOr<CounterGroup> StartCountersWithClient(const Cluster& cluster, int count,
                                                            const ConnectOptions& options = {},
                                                            int at = 1,
                                                            const std::string& group = "counter") {
  CounterGroup started;
  auto replicas = StartCounterReplicas(cluster, count, group);
  if (!replicas.ok()) return replicas.status();
  started.replicas = *std::move(replicas);
  started.client = Client::Connect(cluster.ClientAddress(at), options);
  if (!started.client.ok()) return started.client.status();
  if (!WaitAllReply(started.client->get(), group, static_cast<size_t>(count))) {
    return absl::DeadlineExceededError("the replicas did not all answer");
  }
  return started;
}

// Three daemons serving `groups_yaml` (a "counter" group of n1..n3) with metrics on, a counter
// replica on each, and a client on daemon 1 (`connect`) that every replica answered.
struct CounterCluster {
  CounterCluster(const std::string& groups_yaml, const std::string& extra_yaml,
                 const std::string& log_level, ConnectOptions connect)
      : connect(std::move(connect)), cluster(Options(groups_yaml, extra_yaml, log_level)) {
    if (cluster.Start()) counters = StartCountersWithClient(cluster, 3, this->connect);
  }
  static ClusterOptions Options(const std::string& groups_yaml, const std::string& extra_yaml,
                                const std::string& log_level) {
    ClusterOptions options{3, groups_yaml, extra_yaml, log_level};
    options.metrics = true;
    return options;
  }

  ConnectOptions connect;
  Cluster cluster;
  absl::StatusOr<CounterGroup> counters = absl::UnavailableError("the daemons did not start");
};

inline absl::StatusOr<CounterGroup> StartCounterGroup(const Cluster& cluster, int count,
                                                      const std::string& group = "counter") {
  absl::StatusOr<CounterGroup> started = StartCountersWithClient(cluster, count, {}, 1, group);
  if (!started.ok()) return started.status();
  auto added = (*started->client)->Invoke(group, "add", "5", Mode::kAll);
  if (!added.ok()) return added.status();
  return started;
}

// Threads sending "add 1" to `group` through `client` until Stop(): each makes 20 one-way calls,
// then a wait-for-majority call, so that many requests are in flight at any time. Counts the
// calls accepted (OK) and keeps the failures.
class AddSenders {
 public:
  AddSenders(Client* client, std::string group, int threads = 4)
      : client_(client), group_(std::move(group)) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { Run(); });
  }
  ~AddSenders() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& thread : threads_) {
      if (thread.joinable()) thread.join();
    }
  }
  int accepted() const { return accepted_.load(); }
  std::vector<std::string> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  void Run() {
    for (int i = 0; !stop_.load(); ++i) {
      absl::Status status =
          i % 21 != 20 ? client_->Send(group_, "add", "1")
                       : client_->Invoke(group_, "add", "1", Mode::kMajority).status();
      if (status.ok()) {
        accepted_++;
      } else {
        absl::MutexLock lock(&mu_);
        failures_.push_back(status.ToString());
      }
    }
  }

  Client* const client_;
  const std::string group_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace cohort::test

#endif  // COHORT_TEST_COUNTER_REPLICA_H_
