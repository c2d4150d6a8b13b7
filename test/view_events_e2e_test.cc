// Servant::OnViewChange on real daemons, over the local fast path and gRPC: every servant gets
// the group's views in its delivery order, and a view comes at the same point of the order at
// every member (the same position, the same counter value: virtual synchrony, 003 section 3),
// through a kill -9, a restart with state transfer, and a member leaving and joining again.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"
#include "test/raw_client.h"

namespace cohort {
namespace {

using test::CounterReplica;
using test::Eventually;

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";
// Exclusion in 1 s rather than 10: the test waits for the view without a killed member.
const char kFastExclusion[] = "failure_detector: {exclude_timeout_ms: 1000}\n";

std::string Names(const GroupView& view) {
  std::vector<std::string> names;
  for (const ViewMember& member : view.members) names.push_back(member.name);
  return absl::StrJoin(names, ",");
}

std::unique_ptr<CounterReplica> StartRecording(const test::Cluster& cluster, int index,
                                               const std::string& path) {
  auto replica = std::make_unique<CounterReplica>();
  replica->record_views = true;
  replica->connect.local = path == "local";
  REQUIRE(replica->Start(cluster.ClientAddress(index), "counter").ok());
  CHECK(replica->servant->via() == path);
  return replica;
}

// The servant's last view is `view_id` with `names`.
bool LastViewIs(const CounterReplica& replica, uint64_t view_id, const std::string& names) {
  std::vector<CounterReplica::SeenView> views = replica.Views();
  return !views.empty() && views.back().view.view_id == view_id &&
         Names(views.back().view) == names;
}

// Every view two servants both got came at the same position and counter value, with the same
// members; each servant's views only move forward. Returns how many views were compared.
int CheckAlike(const std::vector<const CounterReplica*>& replicas) {
  struct First {
    uint64_t position;
    int64_t value;
    std::string names;
  };
  std::map<uint64_t, First> first;
  int compared = 0;
  for (const CounterReplica* replica : replicas) {
    uint64_t last = 0;
    for (const CounterReplica::SeenView& seen : replica->Views()) {
      INFO("view " << seen.view.view_id << " [" << Names(seen.view) << "] at "
                   << seen.view.position << ", value " << seen.value);
      CHECK(seen.view.view_id > last);
      last = seen.view.view_id;
      CHECK(seen.view.group == "counter");
      auto [known, added] = first.emplace(
          seen.view.view_id, First{seen.view.position, seen.value, Names(seen.view)});
      if (added) continue;
      ++compared;
      CHECK(known->second.position == seen.view.position);
      CHECK(known->second.value == seen.value);
      CHECK(known->second.names == Names(seen.view));
    }
  }
  return compared;
}

TEST_CASE("servants get the group's views in their delivery order, at the same point at every "
          "member", "[views][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  test::Cluster cluster{{3, kGroups, kFastExclusion, "info"}};
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) replicas.push_back(StartRecording(cluster, i, path));
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  // The first view each servant gets is the one its first deliveries belong to: view 1, all
  // three, before any delivery.
  for (const auto& replica : replicas) {
    std::vector<CounterReplica::SeenView> views = replica->Views();
    REQUIRE(!views.empty());
    CHECK(views.front().view.view_id == 1);
    CHECK(Names(views.front().view) == "n1,n2,n3");
    CHECK(views.front().view.in_view);
    CHECK(views.front().value == 0);
  }
  for (int i = 0; i < 10; ++i) REQUIRE((*client)->Invoke("counter", "add", "1", Mode::kAll).ok());

  // A member killed: the others get the view without it, after the same deliveries, while calls
  // keep coming (a majority goes on).
  cluster.Kill(3);
  test::AddSenders senders(client->get(), "counter", 2);
  CHECK(Eventually([&] {
    return LastViewIs(*replicas[0], 2, "n1,n2") && LastViewIs(*replicas[1], 2, "n1,n2");
  }, 30));
  // Restarted, with a new servant: it is added again with the state, and gets the view that
  // adds it after the state, at the point where the others get it.
  replicas[2]->servant.reset();
  REQUIRE(cluster.StartNode(3));
  replicas[2] = StartRecording(cluster, 3, path);
  CHECK(Eventually([&] {
    return LastViewIs(*replicas[0], 3, "n1,n2,n3") && LastViewIs(*replicas[2], 3, "n1,n2,n3");
  }, 60));
  senders.Stop();
  CHECK(senders.accepted() > 0);
  REQUIRE(Eventually([&] {
    auto all = (*client)->Invoke("counter", "add", "0", Mode::kAll, absl::Seconds(2));
    return all.ok() && all->replies.size() == 3;
  }, 30));
  {
    std::vector<CounterReplica::SeenView> views = replicas[2]->Views();
    INFO(cluster.LogTails(20));
    REQUIRE(!views.empty());
    const CounterReplica::SeenView& joined = views.back();
    CHECK(joined.state_installs == 1);  // the view came after the state it belongs to
    CHECK(joined.view.in_view);
    CHECK(joined.value >= 10);
  }
  CHECK(CheckAlike({replicas[0].get(), replicas[1].get(), replicas[2].get()}) >= 4);
  // The survivors' view 2 came after the 10 calls, and every call after it is counted in it.
  for (int i = 0; i < 2; ++i) {
    std::vector<CounterReplica::SeenView> views = replicas[i]->Views();
    REQUIRE(views.size() == 3);
    CHECK(views[1].value >= 10);
    CHECK(views[1].view.position >= 10);
  }
}

TEST_CASE("a member that leaves gets the view without it, and the view with it once it joins "
          "again", "[views][e2e]") {
  test::Cluster cluster{{3, kGroups, "", "info"}};
  REQUIRE(cluster.Start());
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) replicas.push_back(StartRecording(cluster, i, "local"));
  auto client = Client::Connect(cluster.ClientAddress(1));
  auto leaver = Client::Connect(cluster.ClientAddress(2));
  REQUIRE(client.ok());
  REQUIRE(leaver.ok());
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  REQUIRE((*client)->Invoke("counter", "add", "4", Mode::kAll).ok());

  REQUIRE((*leaver)->LeaveGroup("counter").ok());
  CHECK(Eventually([&] { return LastViewIs(*replicas[1], 2, "n1,n3"); }, 30));
  {
    std::vector<CounterReplica::SeenView> views = replicas[1]->Views();
    REQUIRE(!views.empty());
    CHECK_FALSE(views.back().view.in_view);  // n2's servant is told it is out
    CHECK(views.back().value == 4);
  }
  // The others' servants get it on their own time (each daemon delivers it).
  CHECK(Eventually([&] { return LastViewIs(*replicas[0], 2, "n1,n3"); }, 10));
  CHECK(replicas[0]->Views().back().view.in_view);
  REQUIRE((*client)->Invoke("counter", "add", "3", Mode::kAll).ok());  // n2 misses it

  REQUIRE((*leaver)->JoinGroup("counter").ok());
  CHECK(Eventually([&] {
    return LastViewIs(*replicas[0], 3, "n1,n2,n3") && LastViewIs(*replicas[1], 3, "n1,n2,n3") &&
           LastViewIs(*replicas[2], 3, "n1,n2,n3");
  }, 30));
  {
    std::vector<CounterReplica::SeenView> views = replicas[1]->Views();
    CHECK(views.back().view.in_view);
    CHECK(views.back().value == 7);         // the state it got, before the view
    CHECK(views.back().state_installs == 1);
  }
  CHECK(CheckAlike({replicas[0].get(), replicas[1].get(), replicas[2].get()}) >= 5);
}

// Over the raw API (any language's servant): "$view" events come only to a servant that asked
// for them (Register.view_events), so servants written before them see nothing new.
TEST_CASE("the raw Serve stream: view events only when asked for", "[views][e2e]") {
  const bool asked = GENERATE(false, true);
  INFO("view_events " << asked);
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  REQUIRE(cluster.Start());
  // Counter replicas on n2 and n3; a raw servant on n1.
  std::vector<std::unique_ptr<CounterReplica>> replicas;
  for (int i = 2; i <= 3; ++i) replicas.push_back(StartRecording(cluster, i, "local"));
  test::RawClient raw = test::AttachRaw(DaemonChannel(cluster.ClientAddress(1)), "raw-servant");
  REQUIRE(raw.nso != 0);
  grpc::ClientContext context;
  auto stream = raw.stub->Serve(&context);
  REQUIRE(stream->Write(test::RegisterMessage(raw.nso, "counter", asked)));
  api::ServantEvent event;
  REQUIRE(stream->Read(&event));
  CHECK(event.registered());
  auto client = Client::Connect(cluster.ClientAddress(2));
  REQUIRE(client.ok());
  // Answered by n2 and n3; n1's raw servant gets the call too, in the group's order.
  auto added = (*client)->Invoke("counter", "add", "6", Mode::kMajority);
  REQUIRE(added.ok());
  REQUIRE(stream->Read(&event));
  if (asked) {
    CHECK(event.method() == "$view");
    CHECK(event.view_id() == 1);
    CHECK(event.one_way());
    CHECK(event.group_seq() == 0);
    CHECK(event.view().in_view());
    REQUIRE(event.view().members_size() == 3);
    CHECK(event.view().members(0).name() == "n1");
    CHECK(event.view().members(2).node() == 3);
    REQUIRE(stream->Read(&event));
  }
  CHECK(event.method() == "add");
  CHECK(event.payload() == "6");
  CHECK(event.group_seq() == 1);
  context.TryCancel();
}

// Client::WatchGroup (api WatchGroup): the daemon pushes the group's view and suspicions as they
// change; the watch ends with NOT_FOUND when the group is deleted.
TEST_CASE("a client watches a group: suspicion, exclusion and re-admission are pushed to it",
          "[views][e2e]") {
  test::Cluster cluster{{3, kGroups,
                         std::string(kFastExclusion) +
                             "dynamic_groups: {create: [\"*\"], state_file: \"{dir}/{node}.groups\"}\n",
                         "warn"}};
  REQUIRE(cluster.Start());
  auto counters = test::StartCountersWithClient(cluster, 3);
  REQUIRE(counters.ok());
  auto& client = counters->client;  // of n1, answered by every replica
  absl::Mutex mu;
  std::vector<View> seen;
  std::optional<absl::Status> ended;
  auto watch = (*client)->WatchGroup(
      "counter",
      [&](const View& view) {
        absl::MutexLock lock(&mu);
        seen.push_back(view);
      },
      [&](absl::Status status) {
        absl::MutexLock lock(&mu);
        ended = status;
      });
  REQUIRE(watch.ok());
  auto described = [](const View& view) {
    std::string text = absl::StrCat(view.view_id, ":");
    for (const ViewMember& member : view.members) {
      absl::StrAppend(&text, member.name, member.suspected ? "?" : "", " ");
    }
    return text;
  };
  auto saw = [&](const std::string& what) {
    absl::MutexLock lock(&mu);
    for (const View& view : seen) {
      if (described(view) == what) return true;
    }
    return false;
  };
  {
    absl::MutexLock lock(&mu);
    REQUIRE(seen.size() == 1);  // the view now, before WatchGroup returned
    CHECK(described(seen[0]) == "1:n1 n2 n3 ");
    CHECK(seen[0].group == "counter");
  }
  cluster.Kill(3);
  CHECK(Eventually([&] { return saw("1:n1 n2 n3? "); }, 10));  // suspected at once (its link)
  CHECK(Eventually([&] { return saw("2:n1 n2 "); }, 30));      // then excluded
  REQUIRE(cluster.StartNode(3));
  CHECK(Eventually([&] { return saw("3:n1 n2 n3 "); }, 60));   // re-added with the state
  {
    absl::MutexLock lock(&mu);
    for (size_t i = 1; i < seen.size(); ++i) {
      CHECK(described(seen[i]) != described(seen[i - 1]));  // pushed on changes only
      CHECK(seen[i].view_id >= seen[i - 1].view_id);
    }
    CHECK_FALSE(ended.has_value());
  }
  watch->reset();  // ends it; no callback after this

  // A group deleted while watched: the watch ends with NOT_FOUND.
  GroupSpec spec;
  spec.name = "brief";
  spec.members = {"n1", "n2", "n3"};
  REQUIRE((*client)->CreateGroup(spec).ok());
  absl::Notification brief_ended;
  absl::Status why;
  auto brief = (*client)->WatchGroup(
      "brief", [](const View&) {},
      [&](absl::Status status) {
        why = status;
        brief_ended.Notify();
      });
  REQUIRE(brief.ok());
  REQUIRE((*client)->DeleteGroup("brief").ok());
  CHECK(brief_ended.WaitForNotificationWithTimeout(absl::Seconds(10)));
  CHECK(why.code() == absl::StatusCode::kNotFound);
  // An unknown group is refused at once.
  auto unknown = (*client)->WatchGroup("nope", [](const View&) {});
  CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
}

// A watch follows its daemon: through a kill -9 and a restart (on_lost, then the view the
// restarted daemon has), and, given several daemons, to the next one after a failover. A watch
// may end itself from its own callback.
TEST_CASE("a client's watch follows its daemon through a restart and a failover",
          "[views][e2e]") {
  test::Cluster cluster{{3, kGroups, kFastExclusion, "warn"}};
  REQUIRE(cluster.Start());
  auto counters = test::StartCountersWithClient(cluster, 3);
  REQUIRE(counters.ok());
  auto& client = counters->client;  // of n1, answered by every replica

  struct Seen {
    absl::Mutex mu;
    std::vector<std::string> views ABSL_GUARDED_BY(mu);  // "id:a b? c " per on_change
    std::vector<absl::Status> lost ABSL_GUARDED_BY(mu);
    std::optional<absl::Status> ended ABSL_GUARDED_BY(mu);
    bool Saw(const std::string& what) {
      return Find([&](const std::string& view) { return view == what; }).has_value();
    }
    // The first view given that `matches`.
    std::optional<std::string> Find(const std::function<bool(const std::string&)>& matches) {
      absl::MutexLock lock(&mu);
      for (const std::string& view : views) {
        if (matches(view)) return view;
      }
      return std::nullopt;
    }
    size_t Lost() {
      absl::MutexLock lock(&mu);
      return lost.size();
    }
  };
  auto described = [](const View& view) {
    std::string text = absl::StrCat(view.view_id, ":");
    for (const ViewMember& member : view.members) {
      absl::StrAppend(&text, member.name, member.suspected ? "?" : "", " ");
    }
    return text;
  };

  // 1. The client's only daemon is killed and started again.
  Seen one;
  auto watch = (*client)->WatchGroup(
      "counter",
      [&](const View& view) {
        absl::MutexLock lock(&one.mu);
        one.views.push_back(described(view));
      },
      [&](absl::Status status) {
        absl::MutexLock lock(&one.mu);
        one.ended = status;
      },
      [&](absl::Status status) {
        absl::MutexLock lock(&one.mu);
        one.lost.push_back(status);
      });
  REQUIRE(watch.ok());
  CHECK(one.Saw("1:n1 n2 n3 "));
  cluster.Kill(1);
  REQUIRE(Eventually([&] { return one.Lost() >= 1; }, 10));
  {
    absl::MutexLock lock(&one.mu);
    CHECK(one.lost[0].code() == absl::StatusCode::kUnavailable);
  }
  REQUIRE(cluster.StartNode(1));
  // n1's earlier process is excluded and the new one re-added with the state: the watch, started
  // again at the restarted daemon, is pushed the view that has it back.
  auto back = [](const std::string& view) {
    return view != "1:n1 n2 n3 " && absl::EndsWith(view, ":n1 n2 n3 ");
  };
  REQUIRE(Eventually([&] { return one.Find(back).has_value(); }, 60));
  const std::string rejoined = *one.Find(back);
  {
    absl::MutexLock lock(&one.mu);
    CHECK_FALSE(one.ended.has_value());
    for (size_t i = 1; i < one.views.size(); ++i) {
      CHECK(one.views[i] != one.views[i - 1]);  // a view given again after the loss is skipped
    }
  }
  watch->reset();

  // 2. A client of every daemon: after n1's kill the watch moves on with the channel to n2 or
  // n3, which push n1's suspicion and exclusion. Its callback then ends the watch itself.
  std::string target = "ipv4:";
  for (int i = 1; i <= 3; ++i) {
    absl::StrAppend(&target, i > 1 ? "," : "", cluster.ClientAddress(i));
  }
  auto several = Client::Connect(target);
  REQUIRE(several.ok());
  REQUIRE((*several)->node_name() == "n1");
  Seen two;
  absl::Mutex owner_mu;
  std::unique_ptr<GroupWatch> owned;  // under owner_mu
  absl::Notification ended_itself;
  auto moving = (*several)->WatchGroup(
      "counter",
      [&](const View& view) {
        {
          absl::MutexLock lock(&two.mu);
          two.views.push_back(described(view));
        }
        if (view.members.size() == 2) {  // n1 excluded again
          std::unique_ptr<GroupWatch> self;
          {
            absl::MutexLock lock(&owner_mu);
            self = std::move(owned);
          }
          self.reset();  // from the watch's own thread: returns at once
          ended_itself.Notify();
        }
      },
      nullptr,
      [&](absl::Status status) {
        absl::MutexLock lock(&two.mu);
        two.lost.push_back(status);
      });
  REQUIRE(moving.ok());
  {
    absl::MutexLock lock(&owner_mu);
    owned = std::move(*moving);
  }
  CHECK(two.Saw(rejoined));
  cluster.Kill(1);
  REQUIRE(ended_itself.WaitForNotificationWithTimeout(absl::Seconds(60)));
  CHECK(two.Lost() >= 1);
  CHECK(two.Find([](const std::string& view) { return absl::EndsWith(view, ":n2 n3 "); })
            .has_value());
  size_t given;
  {
    absl::MutexLock lock(&two.mu);
    given = two.views.size();
  }
  absl::SleepFor(absl::Milliseconds(300));
  {
    absl::MutexLock lock(&two.mu);
    CHECK(two.views.size() == given);  // nothing after it ended itself
  }
  absl::MutexLock lock(&owner_mu);
  CHECK(owned == nullptr);
}

}  // namespace
}  // namespace cohort
