// cohortd's command line: a broken file is refused before start with exit code 2 and an error
// naming the file, line and key; --help documents every key.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>

#include "test/cluster.h"

namespace cohort {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("cohortd refuses a broken file with exit code 2, naming file, line and key", "[cli]") {
  std::string path = WriteFile("broken.yaml",
                               "node: n1\n"
                               "listen:\n  peer: 127.0.0.1:7101\n  client: 127.0.0.1:7201\n"
                               "peers:\n  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
                               "groups:\n  - name: g\n    members: [n1]\n    ordering: paxos\n"
                               "tls: {insecure: true}\n");
  std::string output;
  int code = test::RunProcess({test::Runfile("tools/cohortd"), "--config", path}, &output);
  CHECK(code == 2);
  CHECK_THAT(output, Catch::Contains("broken.yaml:10"));
  CHECK_THAT(output, Catch::Contains("ordering"));
  CHECK_THAT(output, Catch::Contains("paxos"));
}

TEST_CASE("cohortd refuses unknown keys and missing files", "[cli]") {
  std::string path = WriteFile("unknown.yaml",
                               "node: n1\nnodee: n2\n"
                               "listen:\n  peer: 127.0.0.1:7101\n  client: 127.0.0.1:7201\n"
                               "peers:\n  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
                               "tls: {insecure: true}\n");
  std::string output;
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--config", path}, &output) == 2);
  CHECK_THAT(output, Catch::Contains("nodee"));
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--config", "/nonexistent.yaml"},
                         &output) == 2);
  CHECK_THAT(output, Catch::Contains("/nonexistent.yaml"));
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--bogus"}, &output) == 2);
}

TEST_CASE("cohortd refuses a file without a tls section with exit code 2", "[cli]") {
  std::string path = WriteFile("no_tls.yaml",
                               "node: n1\n"
                               "listen:\n  peer: 127.0.0.1:7101\n  client: 127.0.0.1:7201\n"
                               "peers:\n  - {name: n1, id: 1, address: 127.0.0.1:7101}\n");
  std::string output;
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--config", path}, &output) == 2);
  CHECK_THAT(output, Catch::Contains(path + ": tls: missing required section"));
  CHECK_THAT(output, Catch::Contains("tls: {insecure: true}"));
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--check", path},
                         &output) == 2);
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--help"}, &output) == 0);
  CHECK_THAT(output, Catch::Contains("a file without a"));
}

TEST_CASE("cohortd --help documents every key", "[cli]") {
  std::string output;
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--help"}, &output) == 0);
  for (const char* key : {"node", "cluster", "listen", "peers", "log_level", "log_format",
                          "suspect_timeout_ms", "exclude_timeout_ms", "heartbeat_interval_ms",
                          "optimisation_1", "optimisation_2", "optimisation_3", "round_delay_ms",
                          "batch_max_messages", "batch_max_bytes", "max_payload_bytes",
                          "default_deadline_ms",
                          "groups", "members", "ordering", "liveness", "silence_ms", "style",
                          "default_mode"}) {
    CHECK_THAT(output, Catch::Contains(key));
  }
}

}  // namespace cohort
