// A Client given several daemons (a gRPC target of many addresses, "ipv4:a:p,b:q,c:r", or a DNS
// name with several records) fails over when its daemon dies: gRPC's channel connects to the next
// address, that daemon answers "unknown NSO", and the library attaches there and sends the
// refused call once more (the machinery of a daemon restart). Over the local fast path too: the
// new daemon's socket is taken up. Calls in flight at the kill may fail (their outcome is
// unknown); no later call does.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"
#include "tools/test_ca.h"

namespace cohort {
namespace {

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

using test::Eventually;

TEST_CASE("a Client given several daemons fails over to the next when its daemon dies",
          "[client][e2e]") {
  // "tls": gRPC over TLS checked against a name every daemon's certificate carries
  // (ConnectOptions::server_name; a target of several addresses names no one host).
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc", "tls");
  INFO("path " << path);
  ConnectOptions options;
  options.local = path == "local";
  std::string tls_yaml;
  if (path == "tls") {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string ca = std::string(tmp ? tmp : "/tmp") + "/failover-ca";
    std::string out;
    REQUIRE(test::RunProcess({test::Runfile("tools/make-test-ca"), ca}, &out) == 0);
    tls_yaml = TestCaTlsYaml(ca, "cohort");
    options.ca_file = ca + "/ca.pem";
    options.server_name = "cohort";  // a SAN of the test CA's daemon certificate
  }
  test::Cluster cluster{{3, kGroups, tls_yaml, "warn"}};
  REQUIRE(cluster.Start());
  auto replicas = test::StartCounterReplicas(cluster, 3, "counter",
                                             [&](int, test::CounterReplica* replica) {
                                               replica->connect = options;  // TLS, when on
                                               replica->connect.local = true;
                                             });
  REQUIRE(replicas.ok());
  std::string target = "ipv4:";
  for (int i = 1; i <= 3; ++i) {
    absl::StrAppend(&target, i > 1 ? "," : "", cluster.ClientAddress(i));
  }
  auto client = Client::Connect(target, options);
  REQUIRE(client.ok());
  CHECK((*client)->node_name() == "n1");  // gRPC's pick_first: the first address that answers
  CHECK((*client)->via() == std::string(path == "local" ? "local" : "grpc"));
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));
  REQUIRE((*client)->Invoke("counter", "add", "5", Mode::kAll).ok());
  const uint64_t first_nso = (*client)->nso();

  cluster.Kill(1);  // the client's daemon, and with it n1's replica's
  // The next calls go to n2 or n3 once the channel has moved; wait-for-majority: n1 is gone
  // (and wait-for-all would wait for its exclusion).
  CHECK(Eventually([&] {
    auto added = (*client)->Invoke("counter", "add", "1", Mode::kMajority, absl::Seconds(2));
    return added.ok() && added->replies.size() >= 2;
  }, 30));
  CHECK((*client)->nso() != first_nso);
  CHECK((*client)->node_name() != "n1");
  // Every later call succeeds, synchronous and asynchronous.
  for (int k = 0; k < 20; ++k) {
    auto got = (*client)->Invoke("counter", "get", "", Mode::kMajority, absl::Seconds(5));
    REQUIRE(got.ok());
    auto later = (*client)->InvokeFuture("counter", "get", "", Mode::kMajority, absl::Seconds(5));
    REQUIRE(later.get().ok());
  }
  if (path == "local") CHECK((*client)->local_endpoint().address.find("n1") == std::string::npos);
}

TEST_CASE("a Client idle past limits.nso_idle_ms attaches again by itself; idle servants stay",
          "[client][e2e]") {
  const std::string path = GENERATE(as<std::string>{}, "local", "grpc");
  INFO("path " << path);
  ConnectOptions options;
  options.local = path == "local";
  test::CounterCluster setup(kGroups, "limits: {nso_idle_ms: 1000}\n", "info", options);
  REQUIRE(setup.counters.ok());
  test::Cluster& cluster = setup.cluster;
  auto& client = setup.counters->client;
  const uint64_t first_nso = (*client)->nso();
  // Idle past the limit (the daemon looks every second): n1 detaches the client's NSO.
  CHECK(Eventually([&] {
    return test::ReadText(cluster.LogPath(1)).find("unused for 1000 ms detached") !=
           std::string::npos;
  }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The next calls succeed: the library attaches again after the daemon's "unknown NSO", and
  // the servants (idle too) were kept: every replica answers.
  auto all = (*client)->Invoke("counter", "get", "", Mode::kAll, absl::Seconds(5));
  REQUIRE(all.ok());
  CHECK(all->replies.size() == 3);
  CHECK((*client)->nso() != first_nso);
  auto later = (*client)->InvokeFuture("counter", "add", "1", Mode::kAll, absl::Seconds(5)).get();
  REQUIRE(later.ok());
  CHECK(later->replies.size() == 3);
  // Operators see it: cohort_nsos_detached_idle_total counts it, cohort_nsos_attached the rest.
  const std::string metrics = test::HttpGet(cluster.MetricsPort(1), "/metrics");
  CHECK_THAT(metrics, Catch::Matchers::Contains("cohort_nsos_detached_idle_total "));
  CHECK_THAT(metrics, !Catch::Matchers::Contains("cohort_nsos_detached_idle_total 0\n"));
  CHECK_THAT(metrics, Catch::Matchers::Contains("cohort_nsos_attached "));
}

}  // namespace
}  // namespace cohort
