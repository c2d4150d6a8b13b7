// Embedded mode (issue 7; 003 section 3): an application runs its own node in-process, a member of
// a group with three real cohortd daemons; its Client and Servant are the stub library's classes.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3, n4]
    ordering: consensus
)";

// The same counter as test::CounterReplica, served by the embedded node's Servant.
struct EmbeddedCounter {
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> value{0};
  std::atomic<int> block_ms{0};  // how long "block" holds the handler (an inline one: its node)
  // The views it got (Servant::OnViewChange): "view_id@position:members".
  absl::Mutex mu;
  std::vector<std::string> views ABSL_GUARDED_BY(mu);
  std::vector<std::string> Views() {
    absl::MutexLock lock(&mu);
    return views;
  }
  // "watch-here" watches the group through `watcher` from the handler; "end-watch" destroys
  // `held_watch` there (an inline handler: on the node's protocol thread).
  Client* watcher = nullptr;
  std::unique_ptr<GroupWatch> held_watch;
  ~EmbeddedCounter() { servant.reset(); }  // its handlers use the members above

  absl::Status Start(EmbeddedNode* node, bool dispatch_inline = false) {
    auto created = node->CreateServant("counter", "embedded-counter");
    if (!created.ok()) return created.status();
    servant = std::move(*created);
    if (dispatch_inline) servant->DispatchInline();
    servant->OnViewChange([this](const GroupView& view) {
      std::string members;
      for (const ViewMember& member : view.members) absl::StrAppend(&members, member.name, ";");
      absl::MutexLock lock(&mu);
      views.push_back(absl::StrCat(view.view_id, "@", view.position, ":", members));
    });
    servant->Serve("add", [this](const std::string& payload) -> absl::StatusOr<std::string> {
      int64_t delta = 0;
      if (!absl::SimpleAtoi(payload, &delta)) return absl::InvalidArgumentError("not a number");
      return absl::StrCat(value += delta);
    });
    servant->Serve("get", [this](const std::string&) -> absl::StatusOr<std::string> {
      return absl::StrCat(value.load());
    });
    // The same into the servant's kept reply memory (Servant::ServeInto); "fail" is refused.
    servant->ServeInto("get-into", [this](const std::string& payload, std::string* reply) {
      if (payload == "fail") return absl::InvalidArgumentError("asked to fail");
      absl::StrAppend(reply, "value ", value.load());
      return absl::OkStatus();
    });
    servant->Serve("block", [this](const std::string&) -> absl::StatusOr<std::string> {
      std::this_thread::sleep_for(std::chrono::milliseconds(block_ms.load()));
      return absl::StrCat(value.load());
    });
    servant->Serve("watch-here", [this](const std::string&) -> absl::StatusOr<std::string> {
      if (watcher == nullptr) return std::string("no watcher");
      auto watch = watcher->WatchGroup("counter", [](const View&) {});
      if (!watch.ok()) return watch.status();
      return std::string("watching");
    });
    servant->Serve("end-watch", [this](const std::string&) -> absl::StatusOr<std::string> {
      if (held_watch == nullptr) return std::string("no watch");
      held_watch.reset();
      return std::string("ended");
    });
    // A group-to-group call from the handler (003 section 4.3); its status is the reply.
    servant->Serve("nested", [this](const std::string&) -> absl::StatusOr<std::string> {
      auto call = servant->InvokeGroup("counter", "get", "", Mode::kFirst);
      if (!call.ok()) return call.status();
      return std::string("nested call answered");
    });
    return servant->Start();
  }
};

std::set<std::string> Members(const GroupReplies& replies) {
  std::set<std::string> members;
  for (const Reply& reply : replies.replies) members.insert(reply.member);
  return members;
}

}  // namespace

TEST_CASE("embedded node: a member of a group with three daemons invokes and serves", "[e2e]") {
  // n1..n3 are cohortd processes; n4 is this test process (its YAML is written by the helper).
  test::Cluster cluster{{4, kGroups, "", "warn"}};
  for (int i = 1; i <= 3; ++i) REQUIRE(cluster.StartNode(i));
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(4));
  REQUIRE(node.ok());
  REQUIRE((*node)->node_name() == "n4");

  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "counter").ok());
  }
  EmbeddedCounter local;
  REQUIRE(local.Start(node->get()).ok());

  auto client = (*node)->Connect("embedded-app");
  REQUIRE(client.ok());
  REQUIRE(test::WaitHealthy(client->get(), "counter"));
  auto view = (*client)->GroupDetails("counter");
  REQUIRE(view.ok());
  CHECK(view->members.size() == 4);

  SECTION("the embedded client's wait-for-all call is answered by all four replicas") {
    auto result = (*client)->Invoke("counter", "add", "5", Mode::kAll, absl::Seconds(5));
    REQUIRE(result.ok());
    CHECK(result->wanted == 4);
    CHECK(Members(*result) == std::set<std::string>{"n1", "n2", "n3", "n4"});
    for (const Reply& reply : result->replies) {
      CHECK(reply.status.ok());
      CHECK(reply.payload == "5");
    }
    // A client of a daemon reaches the embedded servant too, in the same total order.
    auto remote = Client::Connect(cluster.ClientAddress(1), "remote-app");
    REQUIRE(remote.ok());
    auto second = (*remote)->Invoke("counter", "add", "2", Mode::kAll, absl::Seconds(5));
    REQUIRE(second.ok());
    CHECK(Members(*second).count("n4") == 1);
    for (const Reply& reply : second->replies) CHECK(reply.payload == "7");
    CHECK(local.value.load() == 7);
  }

  SECTION("concurrent calls from the embedded client keep one total order at every replica") {
    constexpr int kThreads = 8;
    constexpr int kCalls = 15;
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < kThreads; ++t) {
      callers.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          auto result = (*client)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(5));
          if (!result.ok() || result->replies.size() < result->wanted) failures++;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    CHECK(failures.load() == 0);
    auto all = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    REQUIRE(all->replies.size() == 4);
    for (const Reply& reply : all->replies) CHECK(reply.payload == absl::StrCat(kThreads * kCalls));
  }

  SECTION("errors are the daemon mode's: unknown group, one-way and multicast accepted") {
    auto unknown = (*client)->Invoke("nope", "add", "1", Mode::kAll, absl::Seconds(1));
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
    CHECK((*client)->Send("counter", "add", "1").ok());
    CHECK((*client)->Multicast("counter", "hello").ok());
    // InvokeInto in-process (the result moved in) reaching a ServeInto method of the embedded
    // servant (its reply moved on by the in-process backend: made again next time); the
    // daemons' servants do not serve it. Twice into the same memory.
    GroupReplies replies;
    for (int round = 0; round < 2; ++round) {
      REQUIRE((*client)->InvokeInto("counter", "get-into", "", Mode::kAll, &replies,
                                    absl::Seconds(5)).ok());
      REQUIRE(replies.replies.size() == 4);
      for (const Reply& reply : replies.replies) {
        if (reply.member == "n4") {
          CHECK(reply.status.ok());
          CHECK(reply.payload == "value 1");
        } else {
          CHECK(reply.status.code() == absl::StatusCode::kUnimplemented);
        }
      }
    }
  }

  client->reset();
  local.servant.reset();
  replicas.clear();
  (*node)->Shutdown();
}

constexpr char kInlineGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
)";

TEST_CASE("embedded nodes: inline servants keep one total order and refuse nested calls", "[e2e]") {
  // n1..n3 are embedded nodes of this process, each with an inline servant; n4 is a cohortd.
  test::Cluster cluster{{4, kInlineGroups, "", "warn"}};
  REQUIRE(cluster.StartNode(4));
  std::vector<std::unique_ptr<EmbeddedNode>> nodes;
  std::vector<std::unique_ptr<EmbeddedCounter>> counters;
  for (int i = 1; i <= 3; ++i) {
    auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(i));
    REQUIRE(node.ok());
    nodes.push_back(*std::move(node));
    counters.push_back(std::make_unique<EmbeddedCounter>());
  }
  for (int i = 0; i < 3; ++i) {
    EmbeddedCounter& counter = *counters[i];
    REQUIRE(counter.Start(nodes[i].get(), /*dispatch_inline=*/true).ok());
  }
  auto c1 = nodes[0]->Connect("app-1");
  auto c2 = nodes[1]->Connect("app-2");
  REQUIRE(c1.ok());
  REQUIRE(c2.ok());
  REQUIRE(test::WaitHealthy(c1->get(), "counter"));

  SECTION("concurrent callers on two nodes: every replica applies every call in one order") {
    constexpr int kThreads = 4;
    constexpr int kCalls = 25;
    std::atomic<int> failures{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 2 * kThreads; ++t) {
      Client* client = t % 2 == 0 ? c1->get() : c2->get();
      callers.emplace_back([&, client] {
        for (int i = 0; i < kCalls; ++i) {
          auto result = client->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(5));
          if (!result.ok() || result->replies.size() < result->wanted) failures++;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    CHECK(failures.load() == 0);
    auto all = (*c2)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    REQUIRE(all->replies.size() == 3);
    for (const Reply& reply : all->replies) CHECK(reply.payload == absl::StrCat(2 * kThreads * kCalls));
    // The replies of each add were the counter's successive values: one total order.
    for (auto& counter : counters) CHECK(counter->value.load() == 2 * kThreads * kCalls);
    // Inline handlers served into kept memory (Servant::ServeInto), called into kept memory.
    GroupReplies replies;
    for (const char* payload : {"", "fail", ""}) {
      REQUIRE((*c1)->InvokeInto("counter", "get-into", payload, Mode::kAll, &replies,
                                absl::Seconds(5)).ok());
      REQUIRE(replies.replies.size() == 3);
      for (const Reply& reply : replies.replies) {
        if (std::string(payload) == "fail") {
          CHECK(reply.status.code() == absl::StatusCode::kInvalidArgument);
          CHECK(reply.status.message() == "asked to fail");
        } else {
          CHECK(reply.status.ok());
          CHECK(reply.payload == absl::StrCat("value ", 2 * kThreads * kCalls));
        }
      }
    }
    // An inline servant gets its view too, before any delivery (Servant::OnViewChange).
    for (auto& counter : counters) {
      CHECK(counter->Views() == std::vector<std::string>{"1@0:n1;n2;n3;"});
    }
    // An in-process client watches the group as a daemon's client does (Client::WatchGroup).
    std::vector<std::string> watched;
    auto watch = (*c2)->WatchGroup("counter", [&](const View& view) {
      watched.push_back(absl::StrCat(view.view_id, ":", view.members.size()));
    });
    REQUIRE(watch.ok());
    CHECK(watched == std::vector<std::string>{"1:3"});  // the view now, before it returned
    watch->reset();
    CHECK((*c2)->WatchGroup("nope", [](const View&) {}).status().code() ==
          absl::StatusCode::kNotFound);
  }

  SECTION("a group-to-group call from an inline handler is refused with a clear error") {
    // Every replica's handler is refused at once (a wait would never end: it would need the
    // protocol thread the handler runs on).
    auto result = (*c1)->Invoke("counter", "nested", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(result.ok());
    REQUIRE(result->replies.size() == 3);
    for (const Reply& reply : result->replies) {
      CHECK(reply.status.code() == absl::StatusCode::kFailedPrecondition);
      CHECK(std::string(reply.status.message()).find("dispatches inline") != std::string::npos);
    }
  }

  SECTION("a watch is refused on the protocol thread, and may be ended there") {
    // A watch from an inline handler would wait for the protocol thread the handler runs on.
    counters[0]->watcher = c1->get();
    auto watch = (*c1)->WatchGroup("counter", [](const View&) {});
    REQUIRE(watch.ok());
    counters[0]->held_watch = std::move(*watch);
    auto refused = (*c2)->Invoke("counter", "watch-here", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(refused.ok());
    REQUIRE(refused->replies.size() == 3);
    for (const Reply& reply : refused->replies) {
      if (reply.member != "n1") continue;
      CHECK(reply.status.code() == absl::StatusCode::kFailedPrecondition);
      CHECK(std::string(reply.status.message()).find("protocol thread") != std::string::npos);
    }
    // Ending a watch there returns at once (it does not wait for the thread it runs on).
    auto ended = (*c2)->Invoke("counter", "end-watch", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(ended.ok());
    REQUIRE(ended->replies.size() == 3);
    for (const Reply& reply : ended->replies) {
      CHECK(reply.status.ok());
      CHECK(reply.payload == (reply.member == "n1" ? "ended" : "no watch"));
    }
    CHECK(counters[0]->held_watch == nullptr);
    counters[0]->watcher = nullptr;
  }

  SECTION("an inline handler that blocks stalls its node: suspected, not excluded, no call lost") {
    // A watch of n2 that ends itself from its own callback once n1 is suspected.
    absl::Mutex watch_mu;
    std::unique_ptr<GroupWatch> self_ending;  // under watch_mu
    absl::Notification watch_ended;
    auto watch = (*c2)->WatchGroup("counter", [&](const View& view) {
      for (const ViewMember& member : view.members) {
        if (member.name != "n1" || !member.suspected) continue;
        std::unique_ptr<GroupWatch> self;
        {
          absl::MutexLock lock(&watch_mu);
          self = std::move(self_ending);
        }
        self.reset();  // from the watch's own thread: returns at once
        if (!watch_ended.HasBeenNotified()) watch_ended.Notify();
      }
    });
    REQUIRE(watch.ok());
    {
      absl::MutexLock lock(&watch_mu);
      self_ending = std::move(*watch);
    }
    // Servant::DispatchInline's contract: a handler that blocks stops its node's protocol
    // thread, so it sends nothing, not even "I am alive". 600 ms is 12 suspicion timeouts and
    // far below the exclusion timeout (004 section 5's two timeouts): the peers suspect n1 and
    // order without it; n1 is trusted again once the handler returns, the view is unchanged.
    auto before = (*c2)->GroupDetails("counter");
    REQUIRE(before.ok());
    REQUIRE(before->members.size() == 3);
    auto suspected_n1 = [&] {
      auto view = (*c2)->GroupDetails("counter");
      if (!view.ok()) return false;
      for (const ViewMember& member : view->members) {
        if (member.name == "n1") return member.suspected;
      }
      return false;
    };
    counters[0]->block_ms = 600;
    absl::StatusOr<GroupReplies> blocked = absl::UnknownError("not run");
    std::atomic<bool> done{false};
    std::thread blocker([&] {
      blocked = (*c2)->Invoke("counter", "block", "", Mode::kAll, absl::Seconds(20));
      done = true;
    });
    bool saw_suspected = false;
    int majority_ok = 0, majority_calls = 0;
    // A wait-for-all call made while n1 is suspected but silent for less than
    // failure_detector.fail_fast_after_ms (1000 ms) is not refused: it waits for n1.
    absl::StatusOr<GroupReplies> all_while_suspected = absl::UnknownError("not run");
    std::thread all_caller;
    while (!done) {
      saw_suspected = saw_suspected || suspected_n1();
      if (saw_suspected && !all_caller.joinable()) {
        all_caller = std::thread([&] {
          all_while_suspected = (*c2)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(20));
        });
      }
      auto add = (*c2)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(10));
      ++majority_calls;
      if (add.ok() && add->replies.size() >= 2) ++majority_ok;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    blocker.join();
    if (all_caller.joinable()) all_caller.join();
    INFO(all_while_suspected.status().ToString());
    CHECK(all_while_suspected.ok());
    if (all_while_suspected.ok()) CHECK(all_while_suspected->replies.size() == 3);
    counters[0]->block_ms = 0;
    INFO(blocked.status().ToString());
    REQUIRE(blocked.ok());
    CHECK(blocked->replies.size() == 3);  // n1 answered too, once its handler returned
    CHECK(saw_suspected);
    CHECK(majority_calls > 0);
    CHECK(majority_ok == majority_calls);  // n2 and n3 ordered and answered without n1
    bool trusted = false;
    for (int attempt = 0; attempt < 200 && !trusted; ++attempt) {
      trusted = !suspected_n1();
      if (!trusted) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(trusted);
    CHECK(watch_ended.WaitForNotificationWithTimeout(absl::Seconds(5)));
    {
      absl::MutexLock lock(&watch_mu);
      CHECK(self_ending == nullptr);
    }
    auto after = (*c2)->GroupDetails("counter");
    REQUIRE(after.ok());
    CHECK(after->view_id == before->view_id);
    CHECK(after->members.size() == 3);
    auto all = (*c2)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    REQUIRE(all->replies.size() == 3);
    for (const Reply& reply : all->replies) CHECK(reply.payload == absl::StrCat(majority_ok));
  }

  SECTION("an inline servant replaced by a newer servant of its group is told why it ended") {
    // One servant per group per daemon (Node::ReplaceServants): the newer one, not inline here,
    // takes over n3's replica; the inline one's Wait returns, ABORTED, naming the replacement.
    EmbeddedCounter newer;
    REQUIRE(newer.Start(nodes[2].get(), /*dispatch_inline=*/false).ok());
    absl::Status ended;
    REQUIRE(counters[2]->servant->Ended(&ended));  // before Start returned
    CHECK(ended.code() == absl::StatusCode::kAborted);
    CHECK(std::string(ended.message()).find("replaced by a newer servant") != std::string::npos);
    CHECK(counters[2]->servant->Wait().code() == absl::StatusCode::kAborted);
    // Stop after the end keeps why it ended.
    counters[2]->servant->Stop();
    CHECK(counters[2]->servant->Wait().code() == absl::StatusCode::kAborted);
    // n3 rejoins for its newer servant: wait-for-all is answered by the three replicas again.
    CHECK(test::WaitAllReply(c1->get(), "counter", 3));
    auto all = (*c1)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(5));
    REQUIRE(all.ok());
    CHECK(Members(*all) == std::set<std::string>{"n1", "n2", "n3"});
    CHECK(newer.value.load() == 1);  // no state hooks: the newer object starts from 0
    newer.servant->Stop();
  }

  SECTION("a servant of a daemon cannot dispatch inline; Stop ends an inline servant") {
    auto remote = Servant::Create(cluster.ClientAddress(4), "counter", "remote");
    REQUIRE(remote.ok());
    (*remote)->DispatchInline();
    absl::Status started = (*remote)->Start();
    CHECK(started.code() == absl::StatusCode::kUnimplemented);
    CHECK(std::string(started.message()).find("embedded node") != std::string::npos);

    counters[2]->servant->Stop();
    absl::Status ended;
    CHECK(counters[2]->servant->Ended(&ended));
    CHECK(ended.code() == absl::StatusCode::kCancelled);
    // n3's replica is gone: wait-for-majority still succeeds with n1 and n2.
    auto result = (*c1)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(5));
    REQUIRE(result.ok());
    CHECK(result->replies.size() >= 2);
  }

  c1->reset();
  c2->reset();
  counters.clear();
  for (auto& node : nodes) node->Shutdown();
}
TEST_CASE("embedded node: its in-process client creates a group at run time (dynamic_groups), "
          "which the daemons start and serve", "[e2e][dynamic]") {
  // n1 and n2 are cohortd processes, n3 this test process; every file has dynamic_groups.
  test::Cluster cluster{{3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         "dynamic_groups: {}\n", "warn"}};
  for (int i = 1; i <= 2; ++i) REQUIRE(cluster.StartNode(i));
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(3));
  REQUIRE(node.ok());
  auto client = (*node)->Connect("creator");
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == "in-process");
  REQUIRE((*client)->CreateGroup({"made", {"n1", "n2"}, "sequencer"}).ok());
  CHECK((*client)->CreateGroup({"made", {"n1"}}).code() == absl::StatusCode::kAlreadyExists);
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 2; ++i) {
    replicas.push_back(std::make_unique<test::CounterReplica>());
    absl::Status started;
    for (int attempt = 0; attempt < 100; ++attempt) {  // until n<i> has delivered the definition
      started = replicas.back()->Start(cluster.ClientAddress(i), "made");
      if (started.ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(started.ok());
  }
  REQUIRE(test::WaitAllReply(client->get(), "made", 2));
  auto added = (*client)->Invoke("made", "add", "7", Mode::kAll);
  REQUIRE(added.ok());
  CHECK(Members(*added) == std::set<std::string>{"n1", "n2"});
  for (const Reply& reply : added->replies) CHECK(reply.payload == "7");
  client->reset();
}

}  // namespace cohort
