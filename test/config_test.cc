// Tests of the daemon's YAML configuration loader (nso/config.h): a full file, defaults, and one
// test per kind of bad file, each checking that the error names the file, the line and the key.
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "nso/config.h"

namespace cohort::nso {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

constexpr char kTestdata[] = "test/testdata/config/";

// Five lines: lines of text appended to it start at line 6.
const std::string kBase =
    "node: n1\n"                                                // 1
    "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"  // 2
    "peers:\n"                                                  // 3
    "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"          // 4
    "  - {name: n2, id: 2, address: 127.0.0.1:7102}\n";         // 5

// The message of the InvalidArgument error that parsing `yaml` must give.
std::string ErrorOf(const std::string& yaml) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "config.yaml");
  REQUIRE_FALSE(config.ok());
  REQUIRE(config.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

Config ParseOk(const std::string& yaml) {
  absl::StatusOr<Config> config = ParseConfig(yaml, "config.yaml");
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *std::move(config);
}

TEST_CASE("a full file sets every field", "[config]") {
  absl::StatusOr<Config> loaded = LoadConfigFile(std::string(kTestdata) + "good.yaml");
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  const Config& config = *loaded;
  CHECK(config.node == "n2");
  CHECK(config.node_id == 2);
  CHECK(config.cluster == "test-cluster");
  CHECK(config.listen_peer == "0.0.0.0:7102");
  CHECK(config.listen_client == "127.0.0.1:7202");
  REQUIRE(config.peers.size() == 3);
  CHECK(config.peers[0].name == "n1");
  CHECK(config.peers[0].id == 1);
  CHECK(config.peers[0].address == "127.0.0.1:7101");
  CHECK(config.peers[2].address == "[::1]:7103");
  CHECK(config.log_level == "debug");
  CHECK(config.log_format == "json");
  CHECK(config.failure_detector.suspect_timeout_ms == 40);
  CHECK(config.failure_detector.exclude_timeout_ms == 5000);
  CHECK(config.failure_detector.heartbeat_interval_ms == 5);
  CHECK(config.failure_detector.fail_fast_after_ms == 0);
  CHECK_FALSE(config.failure_detector.suspect_on_disconnect);
  CHECK_FALSE(config.consensus.optimisation_1);
  CHECK(config.consensus.optimisation_2);
  CHECK_FALSE(config.consensus.optimisation_3);
  CHECK(config.consensus.round_delay_ms == 0);
  CHECK(config.consensus.batch_max_messages == 64);
  CHECK(config.consensus.batch_max_bytes == 65536);
  CHECK(config.limits.max_payload_bytes == 65536);
  CHECK(config.limits.default_deadline_ms == 2000);
  CHECK(config.limits.max_nsos == 100);
  CHECK(config.limits.max_unordered_requests == 1000);
  CHECK(config.limits.max_unordered_bytes == 123456);
  CHECK(config.limits.servant_backlog_bytes == 0);
  CHECK(config.limits.servant_stall_ms == 750);
  CHECK(config.limits.servant_cutoff_bytes == 4194304);
  REQUIRE(config.groups.size() == 2);

  const GroupConfig& counter = config.groups[0];
  CHECK(counter.name == "counter");
  CHECK(counter.members == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(counter.ordering == GroupConfig::Ordering::kSequencer);
  CHECK(counter.liveness == GroupConfig::Liveness::kEvent);
  CHECK(counter.silence_ms == 25);
  CHECK(counter.style == GroupConfig::Style::kOpen);
  CHECK(counter.default_mode == GroupConfig::DefaultMode::kMajority);
  CHECK(counter.suspect_timeout_ms == 80);
  CHECK(counter.exclude_timeout_ms == 20000);

  // The second group inherits failure_detector's timeouts and the other defaults.
  const GroupConfig& store = config.groups[1];
  CHECK(store.name == "kv.store_1");
  CHECK(store.members == std::vector<std::string>{"n2", "n3"});
  CHECK(store.ordering == GroupConfig::Ordering::kConsensus);
  CHECK(store.suspect_timeout_ms == 40);
  CHECK(store.exclude_timeout_ms == 5000);

  CHECK(config.tls.enabled);
  CHECK_FALSE(config.tls.explicit_insecure);
  CHECK(config.tls.ca_file == "/etc/cohort/ca.pem");
  CHECK(config.tls.cert_file == "/etc/cohort/n2.pem");
  CHECK(config.tls.key_file == "/etc/cohort/n2.key");
  CHECK(config.tls.server_name == "cohort");
  CHECK(config.tls.reload_seconds == 5);

  CHECK(config.FindPeer("n3") == &config.peers[2]);
  CHECK(config.FindPeer("n9") == nullptr);
  CHECK(config.FindPeerById(1) == &config.peers[0]);
  CHECK(config.FindGroup("counter") == &config.groups[0]);
  CHECK(config.FindGroup("nope") == nullptr);
}

TEST_CASE("a minimal file gets the documented defaults", "[config]") {
  absl::StatusOr<Config> loaded = LoadConfigFile(std::string(kTestdata) + "minimal.yaml");
  INFO(loaded.status().ToString());
  REQUIRE(loaded.ok());
  const Config& config = *loaded;
  CHECK(config.node == "n1");
  CHECK(config.node_id == 1);
  CHECK(config.cluster == "cohort");
  CHECK(config.log_level == "info");
  CHECK(config.log_format == "text");
  CHECK(config.failure_detector.suspect_timeout_ms == 50);
  CHECK(config.failure_detector.exclude_timeout_ms == 10000);
  CHECK(config.failure_detector.heartbeat_interval_ms == 10);
  CHECK(config.failure_detector.fail_fast_after_ms == 1000);
  CHECK(config.failure_detector.suspect_on_disconnect);
  CHECK(config.consensus.optimisation_1);
  CHECK(config.consensus.optimisation_2);
  CHECK(config.consensus.optimisation_3);
  CHECK(config.consensus.round_delay_ms == 20);
  CHECK(config.consensus.batch_max_messages == 1024);
  CHECK(config.consensus.batch_max_bytes == 1 << 20);
  CHECK(config.limits.max_payload_bytes == 4 * 1024 * 1024);
  CHECK(config.limits.default_deadline_ms == 5000);
  CHECK(config.limits.max_nsos == 1000000);
  CHECK(config.limits.servant_backlog_bytes == 8 << 20);
  CHECK(config.limits.servant_stall_ms == 2000);
  CHECK(config.limits.servant_cutoff_bytes == 64 << 20);
  CHECK(config.limits.nso_idle_ms == 600000);
  CHECK(config.groups.empty());
  CHECK_FALSE(config.tls.enabled);
  CHECK(config.tls.explicit_insecure);
}

// Issue 8: plaintext only when the file says so.
const std::string kInsecure = "tls: {insecure: true}\n";

TEST_CASE("a file without a tls section is refused, naming the file and both fixes", "[config]") {
  for (const std::string& text : {kBase, kBase + "tls:\n", kBase + "groups: []\n"}) {
    INFO(text);
    std::string message = ErrorOf(text);
    CHECK_THAT(message, StartsWith("config.yaml: tls: missing required section"));
    CHECK_THAT(message, Contains("tls: {ca_file: CA.pem, cert_file: NODE.pem, key_file: NODE.key}"));
    CHECK_THAT(message, Contains("tls: {insecure: true}"));
  }
  // From a file: the error names its path.
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/no_tls.yaml";
  std::ofstream(path) << kBase;
  absl::StatusOr<Config> loaded = LoadConfigFile(path);
  REQUIRE(loaded.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(loaded.status().message()), StartsWith(path + ": tls: missing required"));
  // Other errors come first, with their lines.
  CHECK_THAT(ErrorOf(kBase + "log_level: loud\n"), StartsWith("config.yaml:6: log_level:"));
  // Either form is accepted.
  CHECK(ParseOk(kBase + kInsecure).tls.explicit_insecure);
  CHECK(ParseOk(kBase + "tls: {ca_file: a, cert_file: b, key_file: c}\n").tls.enabled);
  CHECK(ParseOk(kBase + "tls: {ca_file: a, cert_file: b, key_file: c}\n").tls.reload_seconds == 60);
  CHECK(ParseOk(kBase + "tls: {ca_file: a, cert_file: b, key_file: c, crl_dir: /etc/crl}\n")
            .tls.crl_dir == "/etc/crl");
  CHECK_THAT(ErrorOf(kBase + "tls: {insecure: true, crl_dir: /etc/crl}\n"),
             Contains("must not be set with tls.insecure"));
  CHECK_THAT(ErrorOf(kBase + "tls: {ca_file: a, cert_file: b, key_file: c, reload_seconds: 0}\n"),
             StartsWith("config.yaml:6: tls.reload_seconds: "));
  CHECK_THAT(ErrorOf(kBase + "tls: {insecure: true, reload_seconds: 5}\n"),
             Contains("tls.reload_seconds: must not be set with tls.insecure: true"));
}

TEST_CASE("003 s3: the silence period must be below the suspicion timeout", "[config]") {
  auto result = ParseConfig(kBase + "groups:\n  - name: g\n    members: [n1]\n    silence_ms: 60\n",
                            "config.yaml");
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(std::string(result.status().message()),
             StartsWith("config.yaml:9: groups[0].silence_ms: (60) must be less than"));
}

TEST_CASE("a group with only name and members gets the defaults", "[config]") {
  Config config = ParseOk(kBase + kInsecure +
                          "groups:\n"
                          "  - name: g\n"
                          "    members: [n1, n2]\n");
  REQUIRE(config.groups.size() == 1);
  const GroupConfig& group = config.groups[0];
  CHECK(group.ordering == GroupConfig::Ordering::kConsensus);
  CHECK(group.liveness == GroupConfig::Liveness::kLively);
  CHECK(group.silence_ms == 10);  // failure_detector.heartbeat_interval_ms
  CHECK(group.style == GroupConfig::Style::kClosed);
  CHECK(group.default_mode == GroupConfig::DefaultMode::kAll);
  CHECK(group.suspect_timeout_ms == 50);
  CHECK(group.exclude_timeout_ms == 10000);
  CHECK(ToString(group.default_mode) == "all");
  CHECK(ToString(GroupConfig::DefaultMode::kOneWay) == "one_way");
}

TEST_CASE("a YAML syntax error gives file and line", "[config]") {
  std::string message = ErrorOf(kBase +
                                "groups:\n"                 // 6
                                "  - name: g\n"             // 7
                                "    members: [n1, n2\n"    // 8: unclosed
                                "    style: open\n");       // 9
  // yaml-cpp notices the unclosed list at the next line.
  CHECK_THAT(message, StartsWith("config.yaml:9: YAML syntax error"));

  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen:\n"
                     "  peer: 127.0.0.1:7101\n"
                     " client: 127.0.0.1:7201\n"),
             StartsWith("config.yaml:4: YAML syntax error"));
}

TEST_CASE("an unknown top-level key is named, with the valid keys", "[config]") {
  std::string message = ErrorOf(kBase + "silense_ms: 3\n");
  CHECK_THAT(message, StartsWith("config.yaml:6: silense_ms: unknown key \"silense_ms\""));
  CHECK_THAT(message, Contains("node, cluster, listen, peers"));
}

TEST_CASE("an unknown key in a group is named, with a suggestion", "[config]") {
  std::string message = ErrorOf(kBase +
                                "groups:\n"                // 6
                                "  - name: g\n"            // 7
                                "    members: [n1]\n"      // 8
                                "    silense_ms: 100\n");  // 9
  CHECK_THAT(message,
             StartsWith("config.yaml:9: groups[0].silense_ms: unknown key \"silense_ms\""));
  CHECK_THAT(message, Contains("did you mean \"silence_ms\""));
  CHECK_THAT(message, Contains("name, members, ordering"));
}

TEST_CASE("an unknown key in a section is named", "[config]") {
  CHECK_THAT(ErrorOf(kBase +
                     "failure_detector:\n"           // 6
                     "  suspect_timeout_ms: 50\n"    // 7
                     "  exclude_ms: 100\n"),         // 8
             StartsWith("config.yaml:8: failure_detector.exclude_ms: unknown key"));
}

TEST_CASE("a duplicate key is an error", "[config]") {
  CHECK_THAT(ErrorOf(kBase + "log_level: info\nlog_level: debug\n"),
             StartsWith("config.yaml:7: log_level: duplicate key \"log_level\" (first at line 6)"));
}

TEST_CASE("a missing required key is named", "[config]") {
  CHECK_THAT(ErrorOf("listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
                     "peers:\n"
                     "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:1: node: missing required key"));
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen:\n"
                     "  peer: 127.0.0.1:7101\n"
                     "peers:\n"
                     "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:2: listen.client: missing required key"));
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"         // 6
                     "  - name: g\n"),   // 7
             StartsWith("config.yaml:7: groups[0].members: missing required key"));
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"               // 6
                     "  - name: g\n"           // 7
                     "    members: []\n"),     // 8
             StartsWith("config.yaml:8: groups[0].members: must be a non-empty list"));
}

TEST_CASE("an empty file names the required keys", "[config]") {
  CHECK_THAT(ErrorOf(""), StartsWith("config.yaml:1: the file is empty"));
  CHECK_THAT(ErrorOf("# nothing\n"), Contains("node, listen, peers"));
}

TEST_CASE("a value of the wrong type is named", "[config]") {
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
                     "peers:\n"
                     "  - {name: n1, id: one, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:4: peers[0].id: must be an integer, got \"one\""));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  max_nsos: \"100\"\n"),
             StartsWith("config.yaml:7: limits.max_nsos: must be an integer"));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  max_nsos: 1.5\n"),
             StartsWith("config.yaml:7: limits.max_nsos: must be an integer, got \"1.5\""));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  nso_idle_ms: -1\n"),
             StartsWith("config.yaml:7: limits.nso_idle_ms:"));
  CHECK(ParseOk(kBase + "tls: {insecure: true}\nlimits:\n  nso_idle_ms: 0\n").limits.nso_idle_ms ==
        0);  // never
  CHECK_THAT(ErrorOf(kBase + "limits:\n  servant_backlog_bytes: -1\n"),
             StartsWith("config.yaml:7: limits.servant_backlog_bytes:"));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  servant_stall_ms: 0\n"),
             StartsWith("config.yaml:7: limits.servant_stall_ms:"));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  servant_cutoff_bytes: 0\n"),
             StartsWith("config.yaml:7: limits.servant_cutoff_bytes:"));
  // Flow control must engage before the cut-off.
  CHECK_THAT(ErrorOf(kBase + "limits:\n  servant_cutoff_bytes: 8388608\n"),
             StartsWith("config.yaml:7: limits.servant_cutoff_bytes: servant_cutoff_bytes "
                        "(8388608) must be greater than servant_backlog_bytes (8388608"));
  CHECK_THAT(ErrorOf(kBase + "limits:\n  servant_backlog_bytes: 67108864\n"),
             StartsWith("config.yaml:7: limits.servant_backlog_bytes: servant_cutoff_bytes "
                        "(67108864) must be greater than servant_backlog_bytes (67108864"));
  CHECK(ParseOk(kBase + "tls: {insecure: true}\nlimits:\n  servant_backlog_bytes: 0\n  "
                "servant_cutoff_bytes: 1000\n").limits.servant_cutoff_bytes == 1000);
  CHECK_THAT(ErrorOf(kBase + "consensus:\n  optimisation_2: 3\n"),
             StartsWith("config.yaml:7: consensus.optimisation_2: must be true or false"));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - name: g\n    members: n1\n"),
             StartsWith("config.yaml:8: groups[0].members: must be a list of peer names, got "
                        "\"n1\""));
  CHECK_THAT(ErrorOf(kBase + "groups: {name: g}\n"),
             StartsWith("config.yaml:6: groups: must be a list of groups, got a map"));
  CHECK_THAT(ErrorOf("node: [n1]\n"), StartsWith("config.yaml:1: node: must be a string"));
  CHECK_THAT(ErrorOf("- n1\n"), StartsWith("config.yaml:1: the top level must be a map"));
}

TEST_CASE("a value out of range is named", "[config]") {
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
                     "peers:\n"
                     "  - {name: n1, id: 70000, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:4: peers[0].id: must be in 1..65535, got 70000"));
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen:\n"
                     "  peer: 127.0.0.1:70000\n"
                     "  client: 127.0.0.1:7201\n"),
             StartsWith("config.yaml:3: listen.peer: must be host:port with a port in 1..65535"));
  CHECK_THAT(ErrorOf(kBase + "failure_detector:\n  suspect_timeout_ms: 0\n"),
             StartsWith("config.yaml:7: failure_detector.suspect_timeout_ms: must be in "
                        "1..86400000, got 0"));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - name: g\n    members: [n1]\n    silence_ms: -5\n"),
             StartsWith("config.yaml:9: groups[0].silence_ms: must be in 1..86400000, got -5"));
  CHECK_THAT(ErrorOf(kBase + "consensus: {batch_max_messages: 0}\n"),
             StartsWith("config.yaml:6: consensus.batch_max_messages: must be in 1.."));
  CHECK_THAT(ErrorOf(kBase + "consensus: {batch_max_bytes: 0}\n"),
             StartsWith("config.yaml:6: consensus.batch_max_bytes: must be in 1.."));
  // A request crosses the daemons in one peer frame (at most 256 MiB): up to 64 MiB each.
  CHECK_THAT(ErrorOf(kBase + "limits: {max_payload_bytes: 67108865}\n"),
             StartsWith("config.yaml:6: limits.max_payload_bytes: must be in 1..67108864, got "
                        "67108865"));
}

TEST_CASE("an address that is not host:port is named", "[config]") {
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
                     "peers:\n"
                     "  - {name: n1, id: 1, address: localhost}\n"),
             StartsWith("config.yaml:4: peers[0].address: must be host:port"));
  CHECK_THAT(ErrorOf("node: n1\nlisten: {peer: ':7101', client: 127.0.0.1:7201}\n"),
             StartsWith("config.yaml:2: listen.peer: must be host:port: the host is empty"));
  CHECK_THAT(ErrorOf("node: n1\nlisten: {peer: '::1:7101', client: 127.0.0.1:7201}\n"),
             Contains("IPv6 host must be in brackets"));
}

TEST_CASE("a bad enum value lists the choices", "[config]") {
  std::string path = std::string(kTestdata) + "bad_ordering.yaml";
  absl::StatusOr<Config> config = LoadConfigFile(path);
  REQUIRE(config.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(config.status().message() ==
        path + ":10: groups[1].ordering: must be \"consensus\" or \"sequencer\", got \"paxos\"");

  CHECK_THAT(ErrorOf(kBase + "log_level: verbose\n"),
             StartsWith("config.yaml:6: log_level: must be one of \"trace\", \"debug\", \"info\", "
                        "\"warn\", \"error\", \"off\", got \"verbose\""));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - {name: g, members: [n1], default_mode: any}\n"),
             StartsWith("config.yaml:7: groups[0].default_mode: must be one of \"one_way\""));
}

TEST_CASE("node must name a peer", "[config]") {
  CHECK_THAT(ErrorOf("node: n9\n"
                     "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
                     "peers:\n"
                     "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:1: node: \"n9\" is not a peer; peers[].name are: n1"));
}

TEST_CASE("peer names, ids and addresses are unique", "[config]") {
  const std::string head =
      "node: n1\n"
      "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
      "peers:\n"
      "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n";
  CHECK_THAT(ErrorOf(head +
                     "  - name: n2\n"                   // 5
                     "    id: 1\n"                      // 6
                     "    address: 127.0.0.1:7102\n"),  // 7
             StartsWith("config.yaml:6: peers[1].id: duplicate peer id 1 (also peers[0])"));
  CHECK_THAT(ErrorOf(head + "  - {name: n1, id: 2, address: 127.0.0.1:7102}\n"),
             StartsWith("config.yaml:5: peers[1].name: duplicate peer name \"n1\""));
  CHECK_THAT(ErrorOf(head + "  - {name: n2, id: 2, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:5: peers[1].address: duplicate peer address"));
}

TEST_CASE("group members must be distinct peer names", "[config]") {
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"                  // 6
                     "  - name: g\n"              // 7
                     "    members:\n"             // 8
                     "      - n1\n"               // 9
                     "      - n7\n"),             // 10
             StartsWith("config.yaml:10: groups[0].members[1]: \"n7\" is not a peer name"));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - name: g\n    members: [n1, n2, n1]\n"),
             StartsWith("config.yaml:8: groups[0].members[2]: \"n1\" is listed twice"));
}

TEST_CASE("group names are unique and well formed", "[config]") {
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"                            // 6
                     "  - {name: counter, members: [n1]}\n" // 7
                     "  - name: other\n"                    // 8
                     "    members: [n2]\n"                  // 9
                     "  - name: counter\n"                  // 10
                     "    members: [n2]\n"),                // 11
             StartsWith("config.yaml:10: groups[2].name: duplicate group name \"counter\" (also "
                        "groups[0])"));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - {name: 'my group', members: [n1]}\n"),
             StartsWith("config.yaml:7: groups[0].name: must match [A-Za-z0-9_.-]{1,64}, got "
                        "\"my group\""));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - {name: " + std::string(65, 'x') + ", members: [n1]}\n"),
             StartsWith("config.yaml:7: groups[0].name: must match"));
}

TEST_CASE("dynamic_groups: the system group of every peer; cohort.* names are the daemons' own; "
          "a group definition is checked like groups[]", "[config]") {
  const std::string insecure = "tls: {insecure: true}\n";
  Config off = ParseOk(kBase + insecure + "groups:\n  - {name: g, members: [n1]}\n");
  CHECK_FALSE(off.dynamic_groups);
  CHECK(off.FindGroup(kSystemGroup) == nullptr);

  Config on = ParseOk(kBase + insecure + "groups:\n  - {name: g, members: [n1]}\n"
                      "dynamic_groups: {}\n");
  CHECK(on.dynamic_groups);
  CHECK(on.dynamic_group_creators == std::vector<std::string>{"*"});
  const GroupConfig* system = on.FindGroup(kSystemGroup);
  REQUIRE(system != nullptr);
  CHECK(system->members == std::vector<std::string>{"n1", "n2"});
  CHECK(system->ordering == GroupConfig::Ordering::kConsensus);
  CHECK(system->liveness == GroupConfig::Liveness::kEvent);
  Config creators = ParseOk(kBase + insecure + "dynamic_groups: {create: [ops, \"*\"]}\n");
  CHECK(creators.dynamic_group_creators == std::vector<std::string>{"ops", "*"});
  CHECK(creators.dynamic_groups_state_file.empty());
  Config kept = ParseOk(kBase + insecure + "dynamic_groups: {state_file: /var/lib/cohort/g}\n");
  CHECK(kept.dynamic_groups_state_file == "/var/lib/cohort/g");
  CHECK(kept.dynamic_group_creators == std::vector<std::string>{"*"});
  CHECK_THAT(ErrorOf(kBase + insecure + "dynamic_groups: {state_file: [a]}\n"),
             Contains("state_file"));
  CHECK_THAT(ErrorOf(kBase + insecure + "dynamic_groups: {statefile: x}\n"),
             Contains("statefile"));

  CHECK_THAT(ErrorOf(kBase + insecure + "groups:\n  - {name: cohort.system, members: [n1]}\n"
                     "dynamic_groups: {}\n"),
             StartsWith("config.yaml:8: groups[0].name: \"cohort.system\": names starting with "
                        "\"cohort.\" are the daemons' own"));
  CHECK_THAT(ErrorOf(kBase + insecure + "groups:\n  - {name: cohort.x, members: [n1]}\n"),
             Contains("are the daemons' own"));
  CHECK_THAT(ErrorOf(kBase + insecure + "dynamic_groups: {creators: [a]}\n"),
             Contains("dynamic_groups.creators: unknown key"));

  // CreateGroup's definitions: the same rules and messages as groups[] entries.
  std::string yaml = GroupDefinitionYaml("dyn", {"n1", "n2"}, "sequencer", "event", "", "first");
  absl::StatusOr<GroupConfig> dyn = ParseGroupDefinition(yaml, on);
  REQUIRE(dyn.ok());
  CHECK(dyn->name == "dyn");
  CHECK(dyn->members == std::vector<std::string>{"n1", "n2"});
  CHECK(dyn->ordering == GroupConfig::Ordering::kSequencer);
  CHECK(dyn->liveness == GroupConfig::Liveness::kEvent);
  CHECK(dyn->style == GroupConfig::Style::kClosed);
  CHECK(dyn->default_mode == GroupConfig::DefaultMode::kFirst);
  CHECK(dyn->suspect_timeout_ms == on.failure_detector.suspect_timeout_ms);
  CHECK_FALSE(dyn->durable);
  absl::StatusOr<GroupConfig> durable = ParseGroupDefinition(
      GroupDefinitionYaml("kept", {"n1"}, "", "", "", "", nullptr, /*durable=*/true), on);
  REQUIRE(durable.ok());
  CHECK(durable->durable);
  auto error_of = [&](const std::string& definition) {
    absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, on);
    REQUIRE_FALSE(group.ok());
    CHECK(group.status().code() == absl::StatusCode::kInvalidArgument);
    return std::string(group.status().message());
  };
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {"n3"}, "", "", "", "")),
             Contains("\"n3\" is not a peer name"));
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {"n1", "n1"}, "", "", "", "")), Contains("n1"));
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {}, "", "", "", "")), Contains("members"));
  CHECK_THAT(error_of(GroupDefinitionYaml("x y", {"n1"}, "", "", "", "")), Contains("must match"));
  CHECK_THAT(error_of(GroupDefinitionYaml("cohort.x", {"n1"}, "", "", "", "")),
             Contains("the daemons' own"));
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {"n1"}, "", "", "sideways", "")), Contains("style"));
  // A text that tries to smuggle more keys in stays one string.
  CHECK_THAT(error_of(GroupDefinitionYaml("x\", acl: {join: [a]}", {"n1"}, "", "", "", "")),
             Contains("must match"));
  // An acl names applications, not checked against this daemon's tokens (all daemons must agree).
  AclConfig acl{true, {"*"}, {"billing"}, {}};
  absl::StatusOr<GroupConfig> guarded =
      ParseGroupDefinition(GroupDefinitionYaml("x", {"n1"}, "", "", "", "", &acl), on);
  REQUIRE(guarded.ok());
  REQUIRE(guarded->acl != nullptr);
  CHECK(guarded->acl->invoke == std::vector<std::string>{"billing"});
  CHECK(guarded->acl->admin.empty());
  AclConfig bad{true, {"two words"}, {}, {}};
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {"n1"}, "", "", "", "", &bad)),
             Contains("acl.join[0]"));
  // Certificates' names: a URI SAN (auth.certificate_name: uri) is an application name.
  AclConfig spiffe{true, {"spiffe://cluster/ns/app"}, {"billing.example.com"}, {}};
  absl::StatusOr<GroupConfig> by_uri =
      ParseGroupDefinition(GroupDefinitionYaml("x", {"n1"}, "", "", "", "", &spiffe), on);
  REQUIRE(by_uri.ok());
  CHECK(by_uri->acl->join == std::vector<std::string>{"spiffe://cluster/ns/app"});
  AclConfig control{true, {"a\tb"}, {}, {}};
  CHECK_THAT(error_of(GroupDefinitionYaml("x", {"n1"}, "", "", "", "", &control)),
             Contains("a\\tb"));
  CHECK_THAT(error_of("[1, 2]"), Contains("must be a map"));
  CHECK_THAT(error_of("{name: x"), Contains("group definition"));
}

TEST_CASE("suspect timeout must be below exclude timeout", "[config]") {
  CHECK_THAT(ErrorOf(kBase +
                     "failure_detector:\n"              // 6
                     "  exclude_timeout_ms: 100\n"      // 7
                     "  suspect_timeout_ms: 100\n"),    // 8
             StartsWith("config.yaml:8: failure_detector.suspect_timeout_ms: must be less than "
                        "exclude_timeout_ms (100), got 100"));
  CHECK_THAT(ErrorOf(kBase + "failure_detector:\n  exclude_timeout_ms: 30\n"),
             StartsWith("config.yaml:7: failure_detector.exclude_timeout_ms: must be greater than "
                        "suspect_timeout_ms (50), got 30"));
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"                        // 6
                     "  - name: g\n"                    // 7
                     "    members: [n1]\n"              // 8
                     "    suspect_timeout_ms: 20000\n"),// 9
             StartsWith("config.yaml:9: groups[0].suspect_timeout_ms: must be less than "
                        "exclude_timeout_ms (10000), got 20000"));
  CHECK_THAT(ErrorOf(kBase +
                     "groups:\n"                        // 6
                     "  - name: g\n"                    // 7
                     "    members: [n1]\n"              // 8
                     "    exclude_timeout_ms: 40\n"),   // 9
             StartsWith("config.yaml:9: groups[0].exclude_timeout_ms: must be greater than "
                        "suspect_timeout_ms (50), got 40"));
  CHECK_THAT(ErrorOf(kBase + "failure_detector:\n  heartbeat_interval_ms: 50\n"),
             StartsWith("config.yaml:7: failure_detector.heartbeat_interval_ms: "));
  CHECK_THAT(ErrorOf(kBase + "failure_detector:\n  fail_fast_after_ms: -1\n"),
             StartsWith("config.yaml:7: failure_detector.fail_fast_after_ms: "));
  CHECK_THAT(ErrorOf(kBase + "failure_detector:\n  suspect_on_disconnect: maybe\n"),
             StartsWith("config.yaml:7: failure_detector.suspect_on_disconnect: "));
}

TEST_CASE("listen addresses must differ", "[config]") {
  CHECK_THAT(ErrorOf("node: n1\n"
                     "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7101}\n"
                     "peers:\n"
                     "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"),
             StartsWith("config.yaml:2: listen.client: must differ from listen.peer"));
}

TEST_CASE("more than one YAML document is an error", "[config]") {
  CHECK_THAT(ErrorOf(kBase + "---\nnode: n2\n"), Contains("more than one YAML document"));
}

TEST_CASE("a nonexistent file is NotFound naming the path", "[config]") {
  absl::StatusOr<Config> config = LoadConfigFile("/nonexistent/cohort.yaml");
  CHECK(config.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(config.status().message()), Contains("/nonexistent/cohort.yaml"));
}

TEST_CASE("the help text documents every key", "[config]") {
  std::string help = ConfigHelp();
  for (const char* key :
       {"node:", "cluster:", "listen:", "peer:", "client:", "peers:", "name:", "id:", "address:",
        "log_level:", "log_format:", "failure_detector:", "suspect_timeout_ms:",
        "exclude_timeout_ms:", "heartbeat_interval_ms:", "fail_fast_after_ms:", "suspect_on_disconnect:", "consensus:", "optimisation_1:",
        "optimisation_2:", "optimisation_3:", "round_delay_ms:", "batch_max_messages:",
        "batch_max_bytes:", "limits:",
        "max_payload_bytes:", "default_deadline_ms:", "max_nsos:", "max_unordered_requests:", "max_unordered_bytes:", "servant_backlog_bytes:", "servant_stall_ms:", "servant_cutoff_bytes:", "groups:", "members:",
        "ordering:", "liveness:", "silence_ms:", "style:", "default_mode:", "tls:", "reload_seconds:", "ca_file:",
        "cert_file:", "key_file:", "server_name:", "insecure: true", "client_certificates:",
        "client_ca_file:", "certificate_name:", "dynamic_groups:", "create:"}) {
    INFO(key);
    CHECK_THAT(help, Contains(key));
  }
  CHECK_THAT(help, Contains("a file without a"));
}

}  // namespace

TEST_CASE("incarnation_file: optional, a path", "[config]") {
  CHECK(ParseOk(kBase + kInsecure).incarnation_file.empty());
  CHECK(ParseOk(kBase + kInsecure + "incarnation_file: /var/lib/cohort/n1.incarnation\n")
            .incarnation_file == "/var/lib/cohort/n1.incarnation");
  CHECK_THAT(ErrorOf(kBase + kInsecure + "incarnation_file: [a]\n"), Contains("incarnation_file"));
  CHECK_THAT(ConfigHelp(), Contains("incarnation_file:"));
}

TEST_CASE("a durable group needs incarnation_file; durable is a boolean", "[config]") {
  const std::string group = "groups:\n  - {name: g, members: [n1, n2], durable: true}\n";
  CHECK_FALSE(ParseOk(kBase + kInsecure + "groups:\n  - {name: g, members: [n1, n2]}\n")
                  .groups[0].durable);
  CHECK(ParseOk(kBase + kInsecure + group + "incarnation_file: /var/lib/cohort/n1\n")
            .groups[0].durable);
  CHECK_THAT(ErrorOf(kBase + kInsecure + group),
             Contains("group \"g\" is durable: set incarnation_file"));
  CHECK_THAT(ErrorOf(kBase + kInsecure + group), Contains("groups[0].durable"));
  CHECK_THAT(ErrorOf(kBase + kInsecure + "incarnation_file: x\n" +
                     "groups:\n  - {name: g, members: [n1, n2], durable: maybe}\n"),
             Contains("durable"));
  CHECK_THAT(ConfigHelp(), Contains("durable:"));
}

TEST_CASE("peer_transport: auto is tcp with IP peers (plaintext or TLS), else grpc",
          "[config]") {
  const std::string tls = "tls: {ca_file: a, cert_file: b, key_file: c}\n";
  CHECK(ParseOk(kBase + kInsecure).peer_transport == "tcp");
  CHECK(ParseOk(kBase + tls).peer_transport == "tcp");
  CHECK(ParseOk(kBase + kInsecure + "peer_transport: grpc\n").peer_transport == "grpc");
  CHECK(ParseOk(kBase + kInsecure + "peer_transport: tcp\n").peer_transport == "tcp");
  CHECK(ParseOk(kBase + tls + "peer_transport: auto\n").peer_transport == "tcp");
  CHECK(ParseOk(kBase + tls + "peer_transport: tcp\n").peer_transport == "tcp");
  CHECK(ParseOk(kBase + tls + "peer_transport: grpc\n").peer_transport == "grpc");
  CHECK_THAT(ErrorOf(kBase + kInsecure + "peer_transport: udp\n"), Contains("peer_transport"));
  // A DNS name among the peers keeps gRPC under auto (no DNS look-up on the protocol thread).
  const std::string named =
      "node: n1\nlisten: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\npeers:\n"
      "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
      "  - {name: n2, id: 2, address: cohort-2.cohort.svc:7101}\n";
  CHECK(ParseOk(named + kInsecure).peer_transport == "grpc");
  CHECK(ParseOk(named + tls).peer_transport == "grpc");
  CHECK(ParseOk(named + kInsecure + "peer_transport: tcp\n").peer_transport == "tcp");
}

}  // namespace cohort::nso

namespace cohort::nso {

TEST_CASE("a stray comma at block level is refused, not a hang (found by fuzzing)", "[config]") {
  for (const char* text : {",", "  ,", "# c\n,", "[a],", "a: b\n---\n,"}) {
    absl::StatusOr<Config> result = ParseConfig(text, "fuzz.yaml");
    INFO(text);
    CHECK_FALSE(result.ok());
    CHECK(std::string(result.status().message()).rfind("fuzz.yaml:", 0) == 0);
  }
}

}  // namespace cohort::nso

namespace cohort::nso {
namespace {

TEST_CASE("auth.certificate_name: common_name (default), dns or uri; needs client certificates",
          "[config]") {
  const std::string tls = "tls: {ca_file: a, cert_file: b, key_file: c}\n";
  CHECK(ParseOk(kBase + tls + "auth: {client_certificates: true}\n").certificate_name ==
        CertificateNameField::kCommonName);
  CHECK(ParseOk(kBase + tls + "auth: {client_certificates: true, certificate_name: dns}\n")
            .certificate_name == CertificateNameField::kDns);
  CHECK(ParseOk(kBase + tls + "auth: {client_certificates: true, certificate_name: uri}\n")
            .certificate_name == CertificateNameField::kUri);
  CHECK_THAT(ErrorOf(kBase + tls + "auth: {client_certificates: true, certificate_name: san}\n"),
             Contains("auth.certificate_name"));
  CHECK_THAT(ErrorOf(kBase + tls + "auth: {tokens: [{name: a, token: t}], certificate_name: uri}\n"),
             Contains("needs auth.client_certificates"));
  // A URI names an application in an acl with client certificates.
  Config config = ParseOk(kBase + tls +
                          "auth: {client_certificates: true, certificate_name: uri}\n"
                          "groups:\n  - name: g\n    members: [n1]\n"
                          "    acl: {invoke: [\"spiffe://cluster/ns/app\"]}\n");
  REQUIRE(config.groups.size() == 1);
  CHECK(config.groups[0].acl->invoke == std::vector<std::string>{"spiffe://cluster/ns/app"});
}

}  // namespace
}  // namespace cohort::nso
