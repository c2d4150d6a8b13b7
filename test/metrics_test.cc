// Unit tests of the operations pieces that need no daemon: the Prometheus text writer, the
// invocation counters and latency histogram, the metrics HTTP server, and the `metrics:` section
// of the YAML configuration.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "nso/config.h"
#include "nso/http_server.h"
#include "nso/metrics.h"
#include "test/ops_test_util.h"

namespace cohort::nso {
namespace {

using Catch::Matchers::Contains;
using test::MetricValue;

const std::string kBase =
    "node: n1\n"
    "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
    "peers:\n"
    "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
    "tls: {insecure: true}\n";

TEST_CASE("the writer renders families and escaped labels", "[metrics]") {
  PromWriter out;
  out.Family("x_total", "counter", "An x.");
  out.Sample("x_total", {{"group", "a\"b\\c"}}, 3);
  out.Sample("x_total", {}, 0.25);
  CHECK(out.text() ==
        "# HELP x_total An x.\n# TYPE x_total counter\n"
        "x_total{group=\"a\\\"b\\\\c\"} 3\nx_total 0.25\n");
}

TEST_CASE("invocations are counted by mode and code with a cumulative histogram", "[metrics]") {
  InvocationMetrics metrics;
  metrics.RecordInvocation("all", "OK", 0.0007);
  metrics.RecordInvocation("all", "OK", 0.02);
  metrics.RecordInvocation("all", "DEADLINE_EXCEEDED", 7);
  metrics.RecordInvocation("first", "OK", 0.0001);
  metrics.RecordMulticast("OK");
  PromWriter out;
  metrics.Render(&out);
  const std::string& t = out.text();
  CHECK(metrics.invocations() == 4);
  CHECK(MetricValue(t, "cohort_invocations_total{mode=\"all\",code=\"OK\"}") == 2);
  CHECK(MetricValue(t, "cohort_invocations_total{mode=\"all\",code=\"DEADLINE_EXCEEDED\"}") == 1);
  CHECK(MetricValue(t, "cohort_invocations_total{mode=\"first\",code=\"OK\"}") == 1);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_bucket{mode=\"all\",le=\"0.0005\"}") == 0);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_bucket{mode=\"all\",le=\"0.001\"}") == 1);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_bucket{mode=\"all\",le=\"0.025\"}") == 2);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_bucket{mode=\"all\",le=\"5\"}") == 2);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_bucket{mode=\"all\",le=\"+Inf\"}") == 3);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_count{mode=\"all\"}") == 3);
  CHECK(MetricValue(t, "cohort_invocation_duration_seconds_sum{mode=\"all\"}") ==
        Approx(7.0207));
  CHECK(MetricValue(t, "cohort_multicasts_total{code=\"OK\"}") == 1);
}

TEST_CASE("a group snapshot renders views, suspicion, majority and consensus counters",
          "[metrics]") {
  NodeSnapshot snapshot;
  GroupSnapshot g;
  g.name = "counter";
  g.view_id = 4;
  g.is_member = true;
  g.configured_members = 3;
  g.trusted = 1;
  g.members = {{"n1", 1, false}, {"n2", 2, true}, {"n3", 3, true}};
  g.counters.suspicions = 2;
  g.counters.suspicions_on_disconnect = 1;
  g.counters.suspect_timeouts_raised = 3;
  g.has_order_counters = true;
  g.order.instances_decided = 9;
  g.order.messages_sent_proposal = 5;
  snapshot.groups.push_back(g);
  snapshot.outside_unordered = 3;
  snapshot.outside_resent = 7;
  snapshot.outside_given_up = 1;
  snapshot.standby_takeovers = 2;
  snapshot.managers_silent = 5;
  snapshot.fifo_held = 4;
  snapshot.fifo_gave_up = 1;
  snapshot.fifo_refused = 8;
  snapshot.fifo_asked = 5;
  snapshot.nsos_detached = 6;
  snapshot.unordered_requests = 33;
  snapshot.unordered_bytes = 3300;
  PromWriter out;
  RenderSnapshot(snapshot, &out);
  const std::string& t = out.text();
  CHECK(MetricValue(t, "cohort_outside_unordered") == 3);
  CHECK(MetricValue(t, "cohort_outside_resent_total") == 7);
  CHECK(MetricValue(t, "cohort_outside_given_up_total") == 1);
  CHECK(MetricValue(t, "cohort_standby_takeovers_total") == 2);
  CHECK(MetricValue(t, "cohort_managers_silent_total") == 5);
  CHECK(MetricValue(t, "cohort_outside_fifo_held_total") == 4);
  CHECK(MetricValue(t, "cohort_outside_fifo_gave_up_total") == 1);
  CHECK(MetricValue(t, "cohort_fifo_refused_total") == 8);
  CHECK(MetricValue(t, "cohort_outside_fifo_asked_total") == 5);
  CHECK(MetricValue(t, "cohort_nsos_detached_total") == 6);
  CHECK(MetricValue(t, "cohort_unordered_requests") == 33);
  CHECK(MetricValue(t, "cohort_unordered_bytes") == 3300);
  CHECK_FALSE(g.HasMajority());
  CHECK(MetricValue(t, "cohort_group_view_id{group=\"counter\"}") == 4);
  CHECK(MetricValue(t, "cohort_group_has_majority{group=\"counter\"}") == 0);
  CHECK(MetricValue(t, "cohort_member_suspected{group=\"counter\",member=\"n2\"}") == 1);
  CHECK(MetricValue(t, "cohort_member_suspected{group=\"counter\",member=\"n1\"}") == 0);
  CHECK(MetricValue(t, "cohort_suspicions_total{group=\"counter\"}") == 2);
  CHECK(MetricValue(t, "cohort_suspicions_on_disconnect_total{group=\"counter\"}") == 1);
  CHECK(MetricValue(t, "cohort_suspect_timeouts_raised_total{group=\"counter\"}") == 3);
  CHECK(MetricValue(t, "cohort_consensus_instances_total{group=\"counter\"}") == 9);
  CHECK(MetricValue(t, "cohort_consensus_messages_sent_total{group=\"counter\",kind=\"proposal\"}") == 5);
  g.trusted = 2;
  CHECK(g.HasMajority());
  CHECK(MetricValue(t, "cohort_groups") == 1);
}

TEST_CASE("metrics.per_group: false sums each group family over the groups, without the group "
          "label",
          "[metrics]") {
  NodeSnapshot snapshot;
  for (int i = 0; i < 3; ++i) {
    GroupSnapshot g;
    g.name = "g" + std::to_string(i);
    g.view_id = 4 + i;
    g.is_member = true;
    g.configured_members = 3;
    g.trusted = i == 0 ? 1 : 3;  // g0 in a minority
    g.members = {{"n1", 1, false}, {"n2", 2, i == 0}, {"n3", 3, i == 0}};
    g.counters.suspicions = 2;
    g.has_order_counters = true;
    g.order.instances_decided = 10 * (i + 1);
    g.order.messages_sent_proposal = 5;
    snapshot.groups.push_back(g);
  }
  PromWriter by_group;
  RenderSnapshot(snapshot, &by_group, /*per_group=*/true);
  CHECK(MetricValue(by_group.text(), "cohort_group_view_id{group=\"g2\"}") == 6);
  CHECK(MetricValue(by_group.text(), "cohort_consensus_instances_total{group=\"g1\"}") == 20);

  PromWriter summed;
  RenderSnapshot(snapshot, &summed, /*per_group=*/false);
  const std::string& t = summed.text();
  CHECK_THAT(t, !Contains("group=\""));
  CHECK_THAT(t, !Contains("cohort_group_view_id"));  // a sum of view ids would mean nothing
  CHECK(MetricValue(t, "cohort_groups") == 3);
  CHECK(MetricValue(t, "cohort_group_has_majority") == 2);  // groups with a majority
  CHECK(MetricValue(t, "cohort_group_is_member") == 3);
  CHECK(MetricValue(t, "cohort_suspicions_total") == 6);
  CHECK(MetricValue(t, "cohort_member_suspected{member=\"n2\"}") == 1);  // in one group
  CHECK(MetricValue(t, "cohort_member_suspected{member=\"n1\"}") == 0);
  CHECK(MetricValue(t, "cohort_consensus_instances_total") == 60);
  CHECK(MetricValue(t, "cohort_consensus_messages_sent_total{kind=\"proposal\"}") == 15);
  // Fewer lines: one sample per family and other labels, not one per group.
  CHECK(std::count(t.begin(), t.end(), '\n') < std::count(by_group.text().begin(),
                                                           by_group.text().end(), '\n'));
}

// Summed, a counter keeps what removed groups counted (Node::removed_group_totals): it does not
// fall when a group goes (before session 55 it did, and Prometheus took the fall for a reset).
TEST_CASE("metrics.per_group: false: a summed counter keeps what removed groups counted; gauges "
          "and per-group series do not",
          "[metrics]") {
  NodeSnapshot snapshot;
  GroupSnapshot g;
  g.name = "g";
  g.is_member = true;
  g.configured_members = 3;
  g.trusted = 3;
  g.counters.suspicions = 2;
  g.times_behind = 1;
  g.has_order_counters = true;
  g.order.instances_decided = 10;
  g.order.messages_delivered = 30;
  g.order.messages_sent_ack = 4;
  snapshot.groups.push_back(g);
  snapshot.groups.back().reply_cache_calls = 3;
  snapshot.groups.back().reply_cache_bytes = 3000;
  snapshot.removed_groups.counters.suspicions = 5;
  snapshot.removed_groups.counters.view_changes = 7;
  snapshot.removed_groups.times_behind = 3;
  snapshot.removed_groups.has_order_counters = true;
  snapshot.removed_groups.order.instances_decided = 100;
  snapshot.removed_groups.order.messages_delivered = 300;
  snapshot.removed_groups.order.messages_sent_ack = 40;

  PromWriter summed;
  RenderSnapshot(snapshot, &summed, /*per_group=*/false);
  const std::string& t = summed.text();
  CHECK(MetricValue(t, "cohort_suspicions_total") == 7);
  CHECK(MetricValue(t, "cohort_view_changes_total") == 7);
  CHECK(MetricValue(t, "cohort_group_servants_behind_total") == 4);
  CHECK(MetricValue(t, "cohort_consensus_instances_total") == 110);
  CHECK(MetricValue(t, "cohort_deliveries_total") == 330);
  CHECK(MetricValue(t, "cohort_consensus_messages_sent_total{kind=\"ack\"}") == 44);
  CHECK(MetricValue(t, "cohort_groups") == 1);  // gauges: the groups there are
  CHECK(MetricValue(t, "cohort_group_is_member") == 1);
  CHECK(MetricValue(t, "cohort_group_view_members") == 0);
  CHECK(MetricValue(t, "cohort_reply_cache_bytes") == 3000);

  PromWriter by_group;
  RenderSnapshot(snapshot, &by_group, /*per_group=*/true);
  const std::string& p = by_group.text();
  CHECK(MetricValue(p, "cohort_suspicions_total{group=\"g\"}") == 2);
  CHECK(MetricValue(p, "cohort_deliveries_total{group=\"g\"}") == 30);
  CHECK(MetricValue(p, "cohort_reply_cache_calls{group=\"g\"}") == 3);
  CHECK(MetricValue(p, "cohort_reply_cache_bytes{group=\"g\"}") == 3000);
  CHECK_THAT(p, !Contains("group=\"\""));  // no series for the removed ones
}

TEST_CASE("the HTTP server answers GETs and refuses other methods", "[metrics]") {
  HttpServer server([](const std::string& path) -> HttpResponse {
    if (path == "/metrics") return {200, "text/plain", "up 1\n"};
    return {404, "text/plain", "no\n"};
  });
  REQUIRE(server.Start("127.0.0.1:0").ok());
  REQUIRE(server.port() > 0);
  std::string ok = test::HttpGet(server.port(), "/metrics?x=1");
  CHECK_THAT(ok, Contains("HTTP/1.0 200 OK"));
  CHECK_THAT(ok, Contains("Content-Length: 5"));
  CHECK_THAT(ok, Contains("\r\n\r\nup 1\n"));
  CHECK_THAT(test::HttpGet(server.port(), "/other"), Contains("HTTP/1.0 404"));
  server.Stop();
  CHECK(test::HttpGet(server.port(), "/metrics").empty());  // closed
}

namespace {

// A TCP connection to 127.0.0.1:`port` that sends nothing unless told.
int ConnectTo(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Whether the server closed `fd` (end of stream seen), without waiting.
bool ClosedByServer(int fd) {
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

TEST_CASE("the HTTP server is not held by a client that sends nothing, or a byte at a time; "
          "past 8 connections it answers 503 at once",
          "[metrics]") {
  HttpServer server([](const std::string&) -> HttpResponse { return {200, "text/plain", "up 1\n"}; });
  REQUIRE(server.Start("127.0.0.1:0").ok());
  // A connection that sends nothing: a scrape is answered meanwhile (the server used to serve one
  // connection at a time, 2 s for each read).
  int idle = ConnectTo(server.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK_THAT(test::HttpGet(server.port(), "/metrics"), Contains("HTTP/1.0 200 OK"));
  CHECK_FALSE(ClosedByServer(idle));  // answered while it was still waiting for that one
  // A byte every 500 ms: closed once the request's 2 s are up, however it trickles.
  int trickle = ConnectTo(server.port());
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 12 && !closed; ++i) {
    ::send(trickle, "G", 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    closed = ClosedByServer(trickle);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("trickling connection closed: " << closed << " after " << seconds << " s");
  CHECK(closed);
  CHECK(seconds < 4.5);
  ::close(trickle);
  CHECK(ClosedByServer(idle));  // its 2 s are up too
  ::close(idle);
  // Eight connections that send nothing: the ninth is told the server is busy, at once.
  std::vector<int> held;
  for (int i = 0; i < HttpServer::kMaxConnections; ++i) held.push_back(ConnectTo(server.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto asked = std::chrono::steady_clock::now();
  CHECK_THAT(test::HttpGet(server.port(), "/metrics"), Contains("HTTP/1.0 503"));
  CHECK(std::chrono::steady_clock::now() - asked < std::chrono::milliseconds(1500));
  for (int fd : held) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // their threads end
  CHECK_THAT(test::HttpGet(server.port(), "/metrics"), Contains("HTTP/1.0 200 OK"));
  server.Stop();
}

TEST_CASE("metrics.listen is optional and checked", "[metrics][config]") {
  absl::StatusOr<Config> off = ParseConfig(kBase, "c.yaml");
  REQUIRE(off.ok());
  CHECK(off->metrics_listen.empty());

  absl::StatusOr<Config> on = ParseConfig(kBase + "metrics: {listen: 0.0.0.0:9101}\n", "c.yaml");
  REQUIRE(on.ok());
  CHECK(on->metrics_listen == "0.0.0.0:9101");

  absl::StatusOr<Config> bad = ParseConfig(kBase + "metrics:\n  listen: nope\n", "c.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Contains("c.yaml:7: metrics.listen"));

  absl::StatusOr<Config> clash =
      ParseConfig(kBase + "metrics: {listen: 127.0.0.1:7201}\n", "c.yaml");
  REQUIRE_FALSE(clash.ok());
  CHECK_THAT(std::string(clash.status().message()), Contains("metrics.listen: must differ"));

  CHECK(on->metrics_per_group);
  absl::StatusOr<Config> summed =
      ParseConfig(kBase + "metrics: {listen: 0.0.0.0:9101, per_group: false}\n", "c.yaml");
  REQUIRE(summed.ok());
  CHECK_FALSE(summed->metrics_per_group);
  absl::StatusOr<Config> not_bool =
      ParseConfig(kBase + "metrics: {listen: 0.0.0.0:9101, per_group: some}\n", "c.yaml");
  REQUIRE_FALSE(not_bool.ok());
  CHECK_THAT(std::string(not_bool.status().message()), Contains("per_group"));

  absl::StatusOr<Config> unknown = ParseConfig(kBase + "metrics: {port: 9}\n", "c.yaml");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(std::string(unknown.status().message()), Contains("unknown key \"port\""));
  CHECK_THAT(ConfigHelp(), Contains("metrics:"));
}

}  // namespace
}  // namespace cohort::nso
