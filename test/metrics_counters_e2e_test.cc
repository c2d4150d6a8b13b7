// A counter served on /metrics never falls while its daemon runs: not at a view change of its
// group (each view's order counts afresh: Group::order_counters adds the earlier views'), and,
// summed over the groups (metrics.per_group: false), not when a group is deleted (the node keeps
// what removed groups counted, Node::removed_group_totals). Prometheus takes a fall for a reset:
// the sum since, not the difference, would count as new.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using test::Eventually;

const char kGroups[] = "groups:\n  - {name: counter, members: [n1, n2, n3]}\n";

double Metric(const test::Cluster& cluster, int index, const std::string& series) {
  return test::MetricValue(test::HttpGet(cluster.MetricsPort(index), "/metrics"), series);
}

TEST_CASE("a group's counters do not fall at its view changes", "[metrics][e2e]") {
  test::CounterCluster setup(kGroups, "failure_detector: {exclude_timeout_ms: 1000}\n", "warn",
                             {});
  REQUIRE(setup.counters.ok());
  auto& client = *setup.counters->client;
  for (int i = 0; i < 20; ++i) REQUIRE(client->Invoke("counter", "add", "1", Mode::kAll).ok());
  const std::string delivered = "cohort_deliveries_total{group=\"counter\"}";
  const std::string decided = "cohort_consensus_instances_total{group=\"counter\"}";
  const double delivered_before = Metric(setup.cluster, 1, delivered);
  const double decided_before = Metric(setup.cluster, 1, decided);
  INFO("before: " << delivered_before << " delivered, " << decided_before << " decided");
  REQUIRE(delivered_before >= 20);
  REQUIRE(decided_before >= 1);

  setup.cluster.Kill(3);  // excluded: a view of n1, n2
  REQUIRE(Eventually([&] {
    auto view = client->GroupDetails("counter");
    return view.ok() && view->members.size() == 2;
  }, 20));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(client->Invoke("counter", "add", "1", Mode::kMajority).ok());
  }
  const double delivered_after = Metric(setup.cluster, 1, delivered);
  const double decided_after = Metric(setup.cluster, 1, decided);
  INFO("after: " << delivered_after << " delivered, " << decided_after << " decided");
  CHECK(delivered_after >= delivered_before + 10);
  CHECK(decided_after > decided_before);
  CHECK(Metric(setup.cluster, 1, "cohort_view_changes_total{group=\"counter\"}") >= 1);
}

TEST_CASE("summed over the groups, a counter keeps what a deleted group counted",
          "[metrics][e2e]") {
  test::ClusterOptions options{3, kGroups, "dynamic_groups: {create: [\"*\"]}\n", "warn"};
  options.metrics = true;
  options.metrics_per_group = false;
  test::Cluster cluster(options);
  REQUIRE(cluster.Start());
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateGroup({"d", {"n1", "n2", "n3"}, "consensus"}).ok());
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  for (int i = 1; i <= 3; ++i) {
    auto at = Client::Connect(cluster.ClientAddress(i));
    REQUIRE(at.ok());
    REQUIRE(Eventually([&] { return (*at)->GroupDetails("d").ok(); }, 5));
    replicas.push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas.back()->Start(cluster.ClientAddress(i), "d").ok());
  }
  REQUIRE(test::WaitAllReply(client->get(), "d", 3));
  for (int i = 0; i < 30; ++i) REQUIRE((*client)->Invoke("d", "add", "1", Mode::kAll).ok());
  const char* const summed[] = {"cohort_deliveries_total", "cohort_consensus_instances_total",
                                "cohort_group_envelopes_sent_total",
                                "cohort_consensus_messages_sent_total{kind=\"proposal\"}"};
  std::vector<double> before;
  for (const char* series : summed) before.push_back(Metric(cluster, 1, series));
  CHECK(Metric(cluster, 1, "cohort_groups") == 3);  // counter, d and the daemons' own group
  REQUIRE(before[0] >= 30);

  REQUIRE((*client)->DeleteGroup("d").ok());
  REQUIRE(Eventually([&] { return Metric(cluster, 1, "cohort_groups") == 2; }, 10));
  for (size_t i = 0; i < before.size(); ++i) {
    const double after = Metric(cluster, 1, summed[i]);
    INFO(summed[i] << ": " << before[i] << " before the deletion, " << after << " after");
    CHECK(after >= before[i]);
  }
}

}  // namespace
}  // namespace cohort
