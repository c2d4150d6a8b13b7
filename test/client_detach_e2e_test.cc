// A client that is done gives its NSO back (Cohort.Detach; ~Client does it): the daemon forgets
// it at once instead of after limits.nso_idle_ms, the calls it accepted are still ordered and
// delivered, and only the caller that attached an NSO may detach it.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "nso/embedded.h"
#include "proto/api.grpc.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;
using test::Eventually;

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

// Admin.Status's count of attached NSOs at `address` (-1 on error).
int64_t AttachedAt(const std::string& address, const std::string& token = "") {
  auto admin = api::Admin::NewStub(DaemonChannel(address));
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  api::StatusRequest request;
  api::StatusReply reply;
  if (!admin->Status(&context, request, &reply).ok()) return -1;
  return static_cast<int64_t>(reply.nsos());
}

grpc::Status DetachRpc(api::Cohort::Stub* stub, uint64_t nso, const std::string& token = "") {
  grpc::ClientContext context;
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  api::DetachRequest request;
  request.set_nso(nso);
  api::Empty reply;
  return stub->Detach(&context, request, &reply);
}

// A destroyed Client detaches its NSO, and the calls it sent are still delivered. One done with
// its calls is retired as it goes: every member forgets its replies (Node::RetireClient; before
// session 54 they stayed for good, about 330 bytes per departed client and group at each member,
// up to 256 replies each).
TEST_CASE("a destroyed Client detaches its NSO; the calls it sent are still delivered; one whose "
          "calls returned is retired at every member", "[client][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  ConnectOptions options;
  options.local = path == "local";
  test::CounterCluster setup(kGroups, "", "warn", options);
  REQUIRE(setup.counters.ok());
  test::Cluster& cluster = setup.cluster;
  auto& observer = setup.counters->client;
  const std::string address = cluster.ClientAddress(2);
  auto counters_are = [&](const std::string& value) {
    auto all = (*observer)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
    if (!all.ok() || all->replies.size() != 3) return false;
    for (const Reply& reply : all->replies) {
      if (reply.payload != value) return false;
    }
    return true;
  };
  auto metric = [&](const std::string& sample) {
    return test::HttpGet(cluster.MetricsPort(2), "/metrics").find(sample + "\n") !=
           std::string::npos;
  };

  SECTION("one-way calls in flight") {
    const int64_t before = AttachedAt(address);
    REQUIRE(before >= 1);  // the replica's servant NSO at least
    auto client = Client::Connect(address, options);
    REQUIRE(client.ok());
    CHECK(AttachedAt(address) == before + 1);
    // One-way calls, accepted and then the client goes at once: each is still ordered everywhere.
    for (int i = 0; i < 20; ++i) REQUIRE((*client)->Send("counter", "add", "1").ok());
    client->reset();
    CHECK(AttachedAt(address) == before);
    CHECK(Eventually([&] { return counters_are("20"); }, 10));
    CHECK(metric("cohort_nsos_detached_total 1"));
    CHECK(metric("cohort_nsos_detached_idle_total 0"));
  }

  SECTION("calls returned: retired") {
    auto client = Client::Connect(address, options);
    REQUIRE(client.ok());
    for (int i = 0; i < 5; ++i) {
      REQUIRE((*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(5)).ok());
    }
    client->reset();
    CHECK(Eventually([&] { return metric("cohort_clients_retired_total{result=\"retired\"} 1"); },
                     10));
    CHECK(metric("cohort_clients_retired_total{result=\"kept\"} 0"));
    // The group goes on: every replica holds the 5 adds, and nothing more.
    CHECK(counters_are("5"));
  }
}

TEST_CASE("Detach: an unknown or detached NSO is NOT_FOUND; a detached NSO takes no calls",
          "[client][e2e]") {
  test::Cluster cluster{{1, "groups:\n  - {name: g, members: [n1]}\n", "", "warn"}};
  REQUIRE(cluster.Start());
  auto stub = api::Cohort::NewStub(DaemonChannel(cluster.ClientAddress(1)));
  grpc::ClientContext context;
  api::AttachRequest attach;
  attach.set_client_name("raw");
  api::AttachReply attached;
  REQUIRE(stub->Attach(&context, attach, &attached).ok());
  const uint64_t nso = attached.nso();

  grpc::Status unknown = DetachRpc(stub.get(), nso + 1000);
  CHECK(unknown.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(unknown.error_message(), Contains(absl::StrCat("unknown NSO ", nso + 1000)));
  REQUIRE(DetachRpc(stub.get(), nso).ok());
  CHECK(DetachRpc(stub.get(), nso).error_code() == grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext call_context;
  api::MulticastRequest multicast;
  multicast.set_nso(nso);
  multicast.set_group("g");
  multicast.set_payload("x");
  api::Empty empty;
  grpc::Status refused = stub->Multicast(&call_context, multicast, &empty);
  CHECK(refused.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK_THAT(refused.error_message(), Contains("unknown NSO"));
}

TEST_CASE("Detach with tokens: only the application that attached an NSO may detach it",
          "[client][e2e][security]") {
  const std::string auth = "auth:\n  tokens:\n    - {name: app1, token: token-one}\n"
                           "    - {name: app2, token: token-two}\n";
  test::Cluster cluster{{1, "groups:\n  - {name: g, members: [n1]}\n", auth, "warn"}};
  REQUIRE(cluster.Start());
  const std::string address = cluster.ClientAddress(1);
  ConnectOptions app1;
  app1.token = "token-one";
  auto client = Client::Connect(address, app1);
  REQUIRE(client.ok());
  const uint64_t nso = (*client)->nso();
  auto stub = api::Cohort::NewStub(DaemonChannel(address));

  CHECK(DetachRpc(stub.get(), nso).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status denied = DetachRpc(stub.get(), nso, "token-two");
  CHECK(denied.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_THAT(denied.error_message(), Contains("attached by another client"));
  // Still app1's: its calls go on, on the same NSO.
  CHECK((*client)->Multicast("g", "still here").ok());
  CHECK((*client)->nso() == nso);
  CHECK(AttachedAt(address, "token-one") == 1);
  client->reset();  // ~Client detaches it, with app1's token
  CHECK(AttachedAt(address, "token-one") == 0);
  CHECK(DetachRpc(stub.get(), nso, "token-one").error_code() == grpc::StatusCode::NOT_FOUND);
}

TEST_CASE("an embedded node's Client detaches its NSO when destroyed; the runtime's own stay",
          "[client][e2e][embedded]") {
  test::Cluster cluster{{1, "groups:\n  - {name: g, members: [n1]}\n", "", "warn"}};
  auto node = EmbeddedNode::StartFromFile(cluster.ConfigPath(1));  // n1 is this process
  REQUIRE(node.ok());
  const std::string address = cluster.ClientAddress(1);  // its API, for Admin.Status
  const int64_t before = AttachedAt(address);
  REQUIRE(before >= 0);
  auto client = (*node)->Connect("embedded-app");
  REQUIRE(client.ok());
  CHECK(AttachedAt(address) == before + 1);
  CHECK((*client)->Multicast("g", "m").ok());
  client->reset();
  CHECK(AttachedAt(address) == before);
  (*node)->Shutdown();
}

}  // namespace
}  // namespace cohort
