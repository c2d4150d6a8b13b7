// The security keys of the daemon's YAML (issue 8): tls, auth.tokens and groups[].acl, strict like
// the rest of the loader (errors name file:line:key).
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "nso/config.h"

namespace cohort::nso {
namespace {

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// Five lines: lines of text appended to it start at line 6.
const std::string kBase =
    "node: n1\n"
    "listen: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
    "peers:\n"
    "  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
    "  - {name: n2, id: 2, address: 127.0.0.1:7102}\n";

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

const std::string kInsecure = "tls: {insecure: true}\n";

TEST_CASE("no tls section is refused; tls files or insecure: true", "[config]") {
  CHECK_THAT(ErrorOf(kBase), StartsWith("config.yaml: tls: missing required section: add `tls: "
                                        "{ca_file: CA.pem, cert_file: NODE.pem, key_file: "
                                        "NODE.key}`"));
  CHECK_THAT(ErrorOf(kBase), Contains("or `tls: {insecure: true}`"));

  Config insecure = ParseOk(kBase + kInsecure);
  CHECK_FALSE(insecure.tls.enabled);
  CHECK(insecure.tls.explicit_insecure);
  CHECK(insecure.tokens.empty());

  Config tls = ParseOk(kBase +
                       "tls: {ca_file: /c/ca.pem, cert_file: /c/n1.pem, key_file: /c/n1.key,"
                       " server_name: cohort}\n");
  CHECK(tls.tls.enabled);
  CHECK(tls.tls.ca_file == "/c/ca.pem");
  CHECK(tls.tls.cert_file == "/c/n1.pem");
  CHECK(tls.tls.key_file == "/c/n1.key");
  CHECK(tls.tls.server_name == "cohort");
}

TEST_CASE("tls errors name file, line and key", "[config]") {
  CHECK_THAT(ErrorOf(kBase + "tls: {ca_file: /ca.pem, cert_file: /n1.pem}\n"),
             StartsWith("config.yaml:6: tls.key_file: missing required key"));
  CHECK_THAT(ErrorOf(kBase + "tls:\n  insecure: true\n  ca_file: /ca.pem\n"),
             StartsWith("config.yaml:8: tls.ca_file: must not be set with tls.insecure: true"));
  CHECK_THAT(ErrorOf(kBase + "tls:\n  insecure: maybe\n"),
             StartsWith("config.yaml:7: tls.insecure: must be true or false"));
  CHECK_THAT(ErrorOf(kBase + "tls: {ca_fle: x}\n"),
             Contains("tls.ca_fle: unknown key \"ca_fle\" (did you mean \"ca_file\"?)"));
}

TEST_CASE("auth tokens inline or from a file; acl names are token names or *", "[config]") {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string token_file = std::string(tmp ? tmp : "/tmp") + "/app2.token";
  std::ofstream(token_file) << "  file-secret\n";
  Config config = ParseOk(kBase + kInsecure +
                          "auth:\n"
                          "  tokens:\n"
                          "    - {name: app1, token: inline-secret}\n"
                          "    - {name: app2, token_file: " + token_file + "}\n"
                          "groups:\n"
                          "  - name: g\n"
                          "    members: [n1]\n"
                          "    acl: {join: [app1], invoke: [\"*\"]}\n"
                          "  - {name: h, members: [n1]}\n");
  REQUIRE(config.tokens.size() == 2);
  CHECK(config.tokens[0].token == "inline-secret");
  CHECK(config.tokens[1].name == "app2");
  CHECK(config.tokens[1].token == "file-secret");
  const GroupConfig* g = config.FindGroup("g");
  REQUIRE(g != nullptr);
  REQUIRE(g->acl != nullptr);
  CHECK(g->acl->present);
  CHECK(g->acl->join == std::vector<std::string>{"app1"});
  CHECK(g->acl->invoke == std::vector<std::string>{"*"});
  CHECK(g->acl->admin.empty());
  CHECK(config.FindGroup("h")->acl == nullptr);
}

TEST_CASE("auth and acl errors name file, line and key", "[config]") {
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a}\n"),
             StartsWith("config.yaml:8: auth.tokens[0]: needs exactly one of token and token_file"));
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a, token: x, token_file: /f}\n"),
             Contains("auth.tokens[0]: needs exactly one of token and token_file"));
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a, token_file: /nonexistent/t}\n"),
             StartsWith("config.yaml:8: auth.tokens[0].token_file: cannot read \"/nonexistent/t\""));
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a, token: x}\n    - {name: a, token: y}\n"),
             StartsWith("config.yaml:9: auth.tokens[1].name: duplicate token name \"a\""));
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a, token: x}\n    - {name: b, token: x}\n"),
             Contains("auth.tokens[1]: the same token as auth.tokens[0]"));
  CHECK_THAT(ErrorOf(kBase + "auth: {tokens: []}\n"),
             Contains("auth.tokens: must be a non-empty list of tokens"));
  CHECK_THAT(ErrorOf(kBase + "auth:\n  tokens:\n    - {name: a, token: x}\n"
                             "groups:\n  - name: g\n    members: [n1]\n"
                             "    acl:\n      invoke: [a, b]\n"),
             StartsWith("config.yaml:13: groups[0].acl.invoke[1]: \"b\" is not an "
                        "auth.tokens[].name (or \"*\"; names of client certificates need "
                        "auth.client_certificates)"));
  CHECK_THAT(ErrorOf(kBase + "groups:\n  - name: g\n    members: [n1]\n    acl: {read: [\"*\"]}\n"),
             Contains("groups[0].acl.read: unknown key \"read\""));
}

const std::string kTlsFiles = "tls: {ca_file: /c/ca.pem, cert_file: /c/n1.pem, key_file: /c/n1.key}\n";

TEST_CASE("auth.client_certificates: names from certificates, with or without tokens", "[config]") {
  Config off = ParseOk(kBase + kTlsFiles + "auth:\n  tokens:\n    - {name: a, token: x}\n");
  CHECK_FALSE(off.client_certificates);

  // Alone: acl names are certificates' common names, which the loader cannot know.
  Config alone = ParseOk(kBase + kTlsFiles +
                         "auth: {client_certificates: true}\n"
                         "groups:\n  - name: g\n    members: [n1]\n"
                         "    acl: {invoke: [billing, \"*\"]}\n");
  CHECK(alone.client_certificates);
  CHECK(alone.tokens.empty());
  CHECK(alone.FindGroup("g")->acl->invoke == std::vector<std::string>{"billing", "*"});

  Config own_ca = ParseOk(kBase + kTlsFiles +
                          "auth: {client_certificates: true, client_ca_file: /c/apps-ca.pem}\n");
  CHECK(own_ca.client_ca_file == "/c/apps-ca.pem");
  CHECK(alone.client_ca_file.empty());

  Config both = ParseOk(kBase + kTlsFiles +
                        "auth:\n  client_certificates: true\n  tokens:\n    - {name: a, token: x}\n");
  CHECK(both.client_certificates);
  CHECK(both.tokens.size() == 1);
}

TEST_CASE("auth.client_certificates errors name file, line and key", "[config]") {
  // A client certificate travels in the TLS handshake: plaintext cannot carry one.
  CHECK_THAT(ErrorOf(kBase + kInsecure + "auth: {client_certificates: true}\n"),
             StartsWith("config.yaml:7: auth.client_certificates: needs TLS"));
  CHECK_THAT(ErrorOf(kBase + kTlsFiles + "auth: {client_certificates: maybe}\n"),
             Contains("auth.client_certificates"));
  // Without certificates an auth section must list tokens.
  CHECK_THAT(ErrorOf(kBase + kTlsFiles + "auth: {client_certificates: false}\n"),
             StartsWith("config.yaml:7: auth.tokens: missing required key"));
  CHECK_THAT(ErrorOf(kBase + kTlsFiles + "auth:\n  tokens:\n    - {name: a, token: x}\n"
                                         "  client_ca_file: /c/apps-ca.pem\n"),
             StartsWith("config.yaml:10: auth.client_ca_file: needs auth.client_certificates: true"));
  CHECK_THAT(ErrorOf(kBase + kTlsFiles + "auth: {client_certs: true}\n"),
             Contains("auth.client_certs: unknown key \"client_certs\"; valid keys here: tokens, "
                      "client_certificates, client_ca_file"));
}

}  // namespace
}  // namespace cohort::nso
