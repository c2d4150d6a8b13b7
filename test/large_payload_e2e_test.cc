// Payloads of exactly limits.max_payload_bytes (4 MiB) on every route a call can take: each
// ordering (consensus, sequencer, a durable group), from a member's daemon and from outside the
// group, over the local fast path and gRPC, closed and open, wait-for-first and wait-for-all,
// one-way and multicast; every servant answers with a reply of the same size, so a wait-for-all
// result holds 12 MiB. Until session 52 such results failed over gRPC (the daemon's send bound)
// and an open group's to an outside caller over the gRPC peer transport (slow_reader_e2e_test).
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"
#include "test/raw_client.h"

namespace cohort {
namespace {

constexpr size_t kMaxPayload = 4 << 20;  // limits.max_payload_bytes' default

// A payload of exactly kMaxPayload bytes that starts with `tag`.
std::string FullPayload(const std::string& tag) {
  std::string payload = tag + ":";
  payload.resize(kMaxPayload, 'p');
  return payload;
}

// Every group's echo servants on n1..n3 count the full-size one-way calls and multicasts they get.
struct Replicas {
  std::vector<std::unique_ptr<Servant>> servants;
  std::atomic<int> one_way{0};
  std::atomic<int> multicasts{0};
};

}  // namespace

TEST_CASE("payloads and replies of limits.max_payload_bytes go through every ordering, route "
          "and mode",
          "[e2e]") {
  test::ClusterOptions options;
  options.size = 4;  // n4 is in no group: its calls come from outside
  options.groups_yaml =
      "groups:\n"
      "  - {name: cons, members: [n1, n2, n3]}\n"
      "  - {name: seq, members: [n1, n2, n3], ordering: sequencer}\n"
      "  - {name: dur, members: [n1, n2, n3], durable: true}\n";
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  const std::vector<std::string> groups = {"cons", "seq", "dur"};
  std::vector<std::unique_ptr<Replicas>> replicas;
  for (const std::string& group : groups) {
    auto& r = *replicas.emplace_back(std::make_unique<Replicas>());
    for (int i = 1; i <= 3; ++i) {
      auto servant = Servant::Create(cluster.ClientAddress(i), group);
      REQUIRE(servant.ok());
      (*servant)->Serve("echo", [&r](const std::string& payload) -> absl::StatusOr<std::string> {
        if (payload.rfind("one-way", 0) == 0) ++r.one_way;
        return payload;
      });
      (*servant)->OnMulticast([&r](const std::string& payload) {
        if (payload.size() == kMaxPayload) ++r.multicasts;
      });
      REQUIRE((*servant)->Start().ok());
      r.servants.push_back(*std::move(servant));
    }
  }

  for (int from : {2, 4}) {
    for (bool local : {true, false}) {
      ConnectOptions connect;
      connect.local = local;
      connect.client_name = absl::StrCat("n", from, local ? "-local" : "-grpc");
      auto client = Client::Connect(cluster.ClientAddress(from), connect);
      REQUIRE(client.ok());
      for (size_t g = 0; g < groups.size(); ++g) {
        const std::string& group = groups[g];
        for (Style style : {Style::kClosed, Style::kOpen}) {
          for (Mode mode : {Mode::kFirst, Mode::kAll}) {
            const std::string tag = absl::StrCat(group, " from n", from, local ? " local" : " grpc",
                                                 style == Style::kOpen ? " open" : " closed",
                                                 mode == Mode::kAll ? " all" : " first");
            INFO(tag);
            const std::string payload = FullPayload(tag);
            auto result = (*client)->Invoke(group, "echo", payload, mode, absl::Seconds(30), style);
            INFO(result.status() << (result.ok() ? std::string() : cluster.LogTails(5)));
            REQUIRE(result.ok());
            REQUIRE(result->replies.size() >= (mode == Mode::kAll ? 3u : 1u));
            for (const auto& reply : result->replies) {
              CHECK(reply.status.ok());
              CHECK(reply.payload == payload);
            }
          }
        }
        INFO(group << " from n" << from << (local ? " local" : " grpc"));
        REQUIRE((*client)->Send(group, "echo", FullPayload("one-way")).ok());
        REQUIRE((*client)->Multicast(group, FullPayload("multicast")).ok());
      }
    }
  }
  // Each group got 4 one-way calls and 4 multicasts (2 daemons x 2 paths), at each of its 3
  // replicas.
  constexpr int kEach = 3 * 4;
  for (size_t g = 0; g < groups.size(); ++g) {
    INFO(groups[g]);
    Replicas& r = *replicas[g];
    CHECK(test::Eventually([&] { return r.one_way.load() >= kEach; }, 30));
    CHECK(test::Eventually([&] { return r.multicasts.load() >= kEach; }, 30));
    CHECK(r.one_way.load() == kEach);
    CHECK(r.multicasts.load() == kEach);
  }
  for (auto& r : replicas) {
    for (auto& servant : r->servants) servant->Stop();
  }
}

TEST_CASE("a servant's reply over limits.max_payload_bytes reaches its callers as an error naming "
          "the bound, and the servant goes on serving",
          "[e2e]") {
  // n1's servant speaks the API itself (as another language's library might, without checking):
  // its daemon turns the reply into the error (Node::Answer). n2's and n3's are the C++ library's
  // (local fast path, gRPC), which answer so themselves (ServantEvent.max_reply_bytes), even for
  // a reply past the daemon's frame bound (12 MiB here, the bound 9 MiB) that used to break the
  // servant's stream. Until session 52 replies had no bound: up to 9 MiB went through, more broke
  // the stream.
  test::ClusterOptions options;
  options.size = 3;
  options.groups_yaml = "groups:\n  - {name: g, members: [n1, n2, n3]}\n";
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());

  test::RawClient raw = test::AttachRaw(
      grpc::CreateChannel(cluster.ClientAddress(1), grpc::InsecureChannelCredentials()), "raw");
  REQUIRE(raw.nso != 0);
  grpc::ClientContext serve_context;
  auto stream = raw.stub->Serve(&serve_context);
  REQUIRE(stream->Write(test::RegisterMessage(raw.nso, "g")));
  api::ServantEvent ack;
  REQUIRE(stream->Read(&ack));
  CHECK(ack.registered());
  CHECK(ack.max_reply_bytes() == kMaxPayload);
  std::thread raw_servant([&] {
    api::ServantEvent event;
    while (stream->Read(&event)) {
      if (event.method().empty() || event.one_way()) continue;
      api::ServantMessage answer;
      answer.mutable_answer()->set_delivery(event.delivery());
      answer.mutable_answer()->set_payload(
          event.method() == "echo" ? event.payload() : std::string(kMaxPayload + 1, 'o'));
      if (!stream->Write(answer)) return;
    }
  });
  std::vector<std::unique_ptr<Servant>> servants;
  for (int i = 2; i <= 3; ++i) {
    ConnectOptions servant_options;
    servant_options.local = i == 2;
    auto servant = Servant::Create(cluster.ClientAddress(i), "g", servant_options);
    REQUIRE(servant.ok());
    (*servant)->Serve("echo", [](const std::string& payload) -> absl::StatusOr<std::string> {
      return payload;
    });
    (*servant)->Serve("over", [](const std::string&) -> absl::StatusOr<std::string> {
      return std::string(kMaxPayload + 1, 'o');
    });
    (*servant)->Serve("huge", [](const std::string&) -> absl::StatusOr<std::string> {
      return std::string(12 << 20, 'h');
    });
    REQUIRE((*servant)->Start().ok());
    CHECK((*servant)->via() == std::string(i == 2 ? "local" : "grpc"));
    servants.push_back(*std::move(servant));
  }

  auto client = Client::Connect(cluster.ClientAddress(2));
  REQUIRE(client.ok());
  for (const std::string method : {"over", "huge"}) {
    INFO(method);
    auto result = (*client)->Invoke("g", method, "", Mode::kAll, absl::Seconds(30));
    INFO(result.status() << (result.ok() ? std::string() : cluster.LogTails(5)));
    REQUIRE(result.ok());
    REQUIRE(result->replies.size() == 3);
    for (const auto& reply : result->replies) {
      INFO("n" << reply.node << ": " << reply.status);
      CHECK(reply.status.code() == absl::StatusCode::kResourceExhausted);
      CHECK(reply.status.message().find("exceeds") != absl::string_view::npos);
      CHECK(reply.status.message().find("limits.max_payload_bytes (4194304)") !=
            absl::string_view::npos);
      CHECK(reply.payload.empty());
    }
  }
  // Every servant still serves.
  auto echoed = (*client)->Invoke("g", "echo", "still", Mode::kAll, absl::Seconds(30));
  REQUIRE(echoed.ok());
  REQUIRE(echoed->replies.size() == 3);
  for (const auto& reply : echoed->replies) {
    CHECK(reply.status.ok());
    CHECK(reply.payload == "still");
  }
  for (auto& servant : servants) servant->Stop();
  serve_context.TryCancel();
  raw_servant.join();
}

}  // namespace cohort
