// Security on real daemons (issue 8): mutual TLS between peers (a daemon whose certificate comes
// from another CA never gets into the others' views), TLS for applications, bearer tokens
// (UNAUTHENTICATED without or with a wrong one), group ACLs (PERMISSION_DENIED naming the group
// and the right), SIGHUP reloading the ACLs (a broken file is ignored), and cohortctl drain.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"
#include "tools/test_ca.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

using cohort::test::ReadText;

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// The log of daemon `index` (test/cluster.cc writes nN.log next to nN.yaml).
std::string LogOf(const test::Cluster& cluster, int index) {
  return ReadText(Replace(cluster.ConfigPath(index), ".yaml", ".log"));
}

// The pid of the cohortd running with `config_path` (the cluster does not expose it).
pid_t PidOf(const std::string& config_path) {
  DIR* proc = opendir("/proc");
  pid_t found = 0;
  while (dirent* entry = readdir(proc)) {
    pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::string cmdline = ReadText("/proc/" + std::string(entry->d_name) + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find("cohortd") != std::string::npos &&
        cmdline.find(" " + config_path) != std::string::npos) {
      found = pid;
    }
  }
  closedir(proc);
  return found;
}

std::string TmpDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp ? tmp : "/tmp";
}

// tools/make-test-ca into a fresh directory.
std::string MakeCa(const std::string& name) {
  std::string dir = TmpDir() + "/" + name;
  std::string out;
  REQUIRE(test::RunProcess({test::Runfile("tools/make-test-ca"), dir}, &out) == 0);
  return dir;
}

std::vector<std::string> MemberNames(const View& view) {
  std::vector<std::string> names;
  for (const ViewMember& m : view.members) names.push_back(m.name + (m.suspected ? "?" : ""));
  return names;
}

std::vector<std::string> ViewAt(const std::string& address, const ConnectOptions& options,
                                const std::string& group) {
  auto client = Client::Connect(address, options);
  if (!client.ok()) return {"<" + client.status().ToString() + ">"};
  auto view = (*client)->GroupDetails(group);
  if (!view.ok()) return {"<" + view.status().ToString() + ">"};
  return MemberNames(*view);
}

using cohort::test::Eventually;

// An application presenting `name`.pem/.key of the test CA in `ca` ("" = no certificate), over
// TLS checked against its ca.pem; over the local fast path if `local`.
ConnectOptions AsApp(const std::string& ca, const std::string& name, bool local = false,
                     absl::Duration timeout = absl::Seconds(3)) {
  ConnectOptions options;
  options.ca_file = ca + "/ca.pem";
  if (!name.empty()) {
    options.cert_file = ca + "/" + name + ".pem";
    options.key_file = ca + "/" + name + ".key";
  }
  options.local = local;
  options.timeout = timeout;
  return options;
}


// Daemon `index` presents `name`.pem/.key of the test CA's directory instead of daemon.pem.
void UseCertificate(const test::Cluster& cluster, int index, const std::string& name) {
  WriteText(cluster.ConfigPath(index),
            Replace(Replace(ReadText(cluster.ConfigPath(index)), "/daemon.pem", "/" + name + ".pem"),
                    "/daemon.key", "/" + name + ".key"));
}

// n1 and n2 form the view of g without n3, whose TLS handshakes fail: the view read `rounds`
// times 100 ms apart at both, and their logs (from `since1` and `since2` bytes on: what came
// before is not looked at).
void CheckKeptOut(const test::Cluster& cluster, const ConnectOptions& options, int rounds,
                  size_t since1 = 0, size_t since2 = 0) {
  const std::vector<std::string> majority = {"n1", "n2"};
  REQUIRE(Eventually([&] { return ViewAt(cluster.ClientAddress(1), options, "g") == majority; },
                     15));
  for (int i = 0; i < rounds; ++i) {
    CHECK(ViewAt(cluster.ClientAddress(1), options, "g") == majority);
    CHECK(ViewAt(cluster.ClientAddress(2), options, "g") == majority);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // n1 dials n3 again after a back-off that may outlast the reads above (a restarted n3).
  CHECK(Eventually([&] {
    std::string log = LogOf(cluster, 1);
    return log.find("TLS failure with node 3", std::min(since1, log.size())) != std::string::npos;
  }, 20));
  std::string log1 = LogOf(cluster, 1);
  if (since1 == 0) CHECK_THAT(log1, Contains("connected to node 2"));
  CHECK(log1.find("connected to node 3", since1) == std::string::npos);
  CHECK(LogOf(cluster, 2).find("connected to node 3", since2) == std::string::npos);
}

TEST_CASE("mutual TLS: a daemon with a certificate from another CA never joins", "[security][e2e]") {
  // Both peer transports: raw TCP (auto with IP peers) and gRPC streams.
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  std::string ca = MakeCa("ca-tls-" + transport);
  // A generous suspicion timeout: the view is read 40 times over 2 s, and on 2 busy cores (the
  // whole suite runs at once) a 50 ms stall of n2 would show as a passing "n2?".
  test::Cluster cluster({3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         TestCaTlsYaml(ca) +
                             "failure_detector: {suspect_timeout_ms: 500, exclude_timeout_ms: 1500}\n"
                             "peer_transport: " + transport + "\n",
                         "info"});
  // n3 knows the cluster's CA but its own certificate is signed by another CA.
  UseCertificate(cluster, 3, "rogue");
  REQUIRE(cluster.Start());

  ConnectOptions tls;
  tls.ca_file = ca + "/ca.pem";
  // n1 and n2 talk over mutual TLS; n3 is excluded and never comes back.
  CheckKeptOut(cluster, tls, 20);
  CHECK(LogOf(cluster, 3).find("node 1 connected") == std::string::npos);
  CHECK(LogOf(cluster, 3).find("connected to node 1") == std::string::npos);
  CHECK(LogOf(cluster, 3).find("connected to node 2") == std::string::npos);

  // Applications: TLS works, plaintext to a TLS port does not, nor a CA that did not sign it.
  auto client = Client::Connect(cluster.ClientAddress(1), tls);
  REQUIRE(client.ok());
  CHECK((*client)->GroupDetails("g").ok());
  ConnectOptions plaintext;
  plaintext.timeout = absl::Milliseconds(500);
  CHECK_FALSE(Client::Connect(cluster.ClientAddress(1), plaintext).ok());
  ConnectOptions wrong_ca;
  wrong_ca.ca_file = ca + "/rogue-ca.pem";
  wrong_ca.timeout = absl::Milliseconds(500);
  CHECK_FALSE(Client::Connect(cluster.ClientAddress(1), wrong_ca).ok());
}

TEST_CASE("tls.crl_dir: a certificate its CA revoked is refused, a daemon's (raw TCP and gRPC "
          "peers) and an application's",
          "[security][e2e]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  std::string ca = MakeCa("ca-crl-" + transport);
  test::Cluster cluster(
      {3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
       Replace(TestCaTlsYaml(ca), "}\n", ", crl_dir: " + ca + "/crl}\n") +
           "auth:\n  client_certificates: true\n"
           "failure_detector: {suspect_timeout_ms: 500, exclude_timeout_ms: 1500}\n"
           "peer_transport: " + transport + "\n",
       "info"});
  // n3's certificate is from the cluster's CA, which has revoked it (tools/make-test-ca).
  UseCertificate(cluster, 3, "revoked");
  REQUIRE(cluster.Start());
  auto as = [&](const std::string& name) { return AsApp(ca, name); };
  CheckKeptOut(cluster, as("app1"), 10);
  // Applications: app1's certificate is taken, the revoked one fails the handshake.
  auto app1 = Client::Connect(cluster.ClientAddress(1), as("app1"));
  REQUIRE(app1.ok());
  CHECK((*app1)->GroupDetails("g").ok());
  ConnectOptions revoked = as("revoked");
  revoked.timeout = absl::Milliseconds(500);
  CHECK_FALSE(Client::Connect(cluster.ClientAddress(1), revoked).ok());
}

TEST_CASE("tls.crl_dir is read again with the tls files: a certificate revoked while the "
          "daemons run is refused at its next connection, a daemon's (raw TCP and gRPC peers) "
          "and an application's",
          "[security][e2e]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  std::string ca = MakeCa("ca-crl-reload-" + transport);
  const std::string crl_dir = ca + "/crl-live";
  // (recursive: without it, copy() of a directory copies none of its files)
  constexpr auto kOverwrite =
      std::filesystem::copy_options::overwrite_existing | std::filesystem::copy_options::recursive;
  std::filesystem::create_directories(crl_dir);
  std::filesystem::copy(ca + "/crl-none", crl_dir, kOverwrite);
  test::Cluster cluster(
      {3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
       Replace(TestCaTlsYaml(ca), "}\n", ", crl_dir: " + crl_dir + ", reload_seconds: 1}\n") +
           "auth:\n  client_certificates: true\n"
           "failure_detector: {suspect_timeout_ms: 500, exclude_timeout_ms: 1500}\n"
           "peer_transport: " + transport + "\n",
       "info"});
  UseCertificate(cluster, 3, "revoked");  // not yet revoked in the CRL the daemons read
  REQUIRE(cluster.Start());
  auto as = [&](const std::string& name) { return AsApp(ca, name); };
  const std::vector<std::string> all = {"n1", "n2", "n3"};
  REQUIRE(Eventually([&] { return ViewAt(cluster.ClientAddress(1), as("app1"), "g") == all; }, 15));
  // (The first view is the configured members: wait until n3 is really connected.)
  for (int i : {1, 2}) {
    INFO("n" << i);
    REQUIRE(Eventually([&] {
      return LogOf(cluster, i).find("connected to node 3") != std::string::npos;
    }, 20));
  }
  // The application with that certificate (common name app3) is served, for now.
  {
    auto app3 = Client::Connect(cluster.ClientAddress(2), as("revoked"));
    REQUIRE(app3.ok());
    CHECK((*app3)->GroupDetails("g").ok());
  }
  // The CA revokes it: the new CRL replaces the old one; n1 and n2 read it within a second.
  std::filesystem::copy(ca + "/crl", crl_dir, kOverwrite);
  // Read within reload_seconds (1 s); generous here, for a loaded machine.
  for (int i : {1, 2}) {
    INFO("n" << i);
    REQUIRE(Eventually([&] {
      return LogOf(cluster, i).find("TLS files changed") != std::string::npos;
    }, 20));
  }
  // Its next connection to the API fails the handshake; app1's are taken.
  ConnectOptions revoked = as("revoked");
  revoked.timeout = absl::Milliseconds(500);
  CHECK_FALSE(Client::Connect(cluster.ClientAddress(2), revoked).ok());
  auto app1 = Client::Connect(cluster.ClientAddress(2), as("app1"));
  REQUIRE(app1.ok());
  CHECK((*app1)->GroupDetails("g").ok());
  // n3 restarts: its new connections are refused, and the others exclude it.
  cluster.Kill(3);
  const size_t since1 = LogOf(cluster, 1).size(), since2 = LogOf(cluster, 2).size();
  REQUIRE(cluster.StartNode(3));
  CheckKeptOut(cluster, as("app1"), 10, since1, since2);
}

TEST_CASE("mutual TLS binds a certificate to its node: an acceptor refuses a dialer whose "
          "certificate is not for the node its hello names", "[security][e2e]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  std::string ca = MakeCa("ca-bind-" + transport);
  test::Cluster cluster({3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         TestCaTlsYaml(ca) + "peer_transport: " + transport + "\n", "info"});
  // n2 knows n1 as 127.0.0.2 (n1 dials n2, so n2 never uses that address but to check who
  // dials): n1's certificate, for 127.0.0.1, localhost and cohort, is not for it.
  WriteText(cluster.ConfigPath(2), Replace(ReadText(cluster.ConfigPath(2)),
                                           "{name: n1, id: 1, address: 127.0.0.1:",
                                           "{name: n1, id: 1, address: 127.0.0.2:"));
  REQUIRE(cluster.Start());
  CHECK(Eventually([&] {
    return LogOf(cluster, 2).find("node 1: its certificate is not for \"127.0.0.2\"") != std::string::npos;
  }, 15));
  // n3 is known by its own address everywhere: both talk to it.
  CHECK(Eventually([&] {
    return LogOf(cluster, 3).find("connected") != std::string::npos &&
           LogOf(cluster, 1).find("connected to node 3") != std::string::npos;
  }, 15));
  const std::string log2 = LogOf(cluster, 2);
  CHECK(log2.find("connected to node 1") == std::string::npos);
  CHECK(log2.find("node 1 connected") == std::string::npos);
}

// Replaces `path`'s contents by `text` at once (a rename), as cert-manager's volume update does.
void ReplaceFile(const std::string& path, const std::string& text) {
  WriteText(path + ".new", text);
  REQUIRE(std::rename((path + ".new").c_str(), path.c_str()) == 0);
}

TEST_CASE("certificate rotation: a daemon whose certificate is replaced on disk joins and serves "
          "without a restart", "[security][e2e]") {
  const std::string transport = GENERATE(std::string("tcp"), std::string("grpc"));
  INFO("peer_transport: " << transport);
  std::string ca = MakeCa("ca-rotate-" + transport);
  // n3's own files, starting as copies of the certificate from the other CA.
  const std::string n3_cert = ca + "/n3.pem", n3_key = ca + "/n3.key";
  WriteText(n3_cert, ReadText(ca + "/rogue.pem"));
  WriteText(n3_key, ReadText(ca + "/rogue.key"));
  test::Cluster cluster({3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         Replace(TestCaTlsYaml(ca), "}\n", ", reload_seconds: 1}\n") +
                             "failure_detector: {exclude_timeout_ms: 1500}\n"
                             "peer_transport: " + transport + "\n",
                         "info"});
  WriteText(cluster.ConfigPath(3),
            Replace(Replace(ReadText(cluster.ConfigPath(3)), ca + "/daemon.pem", n3_cert),
                    ca + "/daemon.key", n3_key));
  REQUIRE(cluster.Start());
  ConnectOptions tls;
  tls.ca_file = ca + "/ca.pem";
  tls.timeout = absl::Milliseconds(500);
  std::vector<std::unique_ptr<Servant>> servants;
  auto serve = [&](int index) {
    auto servant = Servant::Create(cluster.ClientAddress(index), "g", tls);
    REQUIRE(servant.ok());
    (*servant)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
    REQUIRE((*servant)->Start().ok());
    servants.push_back(*std::move(servant));
  };
  serve(1);
  serve(2);
  const std::vector<std::string> majority = {"n1", "n2"};
  REQUIRE(Eventually([&] { return ViewAt(cluster.ClientAddress(1), tls, "g") == majority; }, 15));
  // Nobody trusting the cluster's CA can reach n3's API: it presents the other CA's certificate.
  CHECK_FALSE(Client::Connect(cluster.ClientAddress(3), tls).ok());

  // The operator puts a certificate from the cluster's CA in n3's files (no restart, no SIGHUP):
  // within reload_seconds n3's gRPC servers present it and its peer transport uses it, so its
  // servant can attach and n3 joins the others (state transfer over the peer links).
  ReplaceFile(n3_key, ReadText(ca + "/daemon.key"));
  ReplaceFile(n3_cert, ReadText(ca + "/daemon.pem"));
  REQUIRE(Eventually([&] { return Client::Connect(cluster.ClientAddress(3), tls).ok(); }, 10));
  serve(3);
  const std::vector<std::string> all = {"n1", "n2", "n3"};
  CHECK(Eventually([&] { return ViewAt(cluster.ClientAddress(1), tls, "g") == all; }, 20));
  CHECK(Eventually([&] { return ViewAt(cluster.ClientAddress(3), tls, "g") == all; }, 10));
  auto client = Client::Connect(cluster.ClientAddress(1), tls);
  REQUIRE(client.ok());
  auto call = (*client)->Invoke("g", "echo", "x", Mode::kAll, absl::Seconds(5));
  CHECK(call.ok());
  if (call.ok()) CHECK(call->replies.size() == 3);
  CHECK_THAT(LogOf(cluster, 3), Contains("TLS files changed: new connections use them"));

  // A broken file is named in the log and changes nothing: n3 keeps serving with what it has.
  ReplaceFile(n3_key, "not a key\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK_THAT(LogOf(cluster, 3), Contains("TLS files changed but not usable, still using the "
                                         "previous ones: tls.key_file"));
  CHECK(ViewAt(cluster.ClientAddress(1), tls, "g") == all);
  CHECK(Client::Connect(cluster.ClientAddress(3), tls).ok());
}

std::string SecurityYaml(const std::string& locked_invoke) {
  return "groups:\n"
         "  - name: open\n    members: [n1]\n"
         "    acl: {join: [\"*\"], invoke: [\"*\"], admin: [\"*\"]}\n"
         "  - name: locked\n    members: [n1]\n"
         "    acl: {join: [\"*\"], invoke: [" + locked_invoke + "], admin: [app1]}\n";
}

TEST_CASE("tokens: UNAUTHENTICATED without or with a wrong one; ACLs; SIGHUP reload",
          "[security][e2e]") {
  std::string token_file = TmpDir() + "/app2.token";
  WriteText(token_file, "token-two\n");
  const std::string auth = "auth:\n  tokens:\n    - {name: app1, token: token-one}\n"
                           "    - {name: app2, token_file: " + token_file + "}\n";
  test::Cluster cluster({1, SecurityYaml("app1"), auth, "info"});
  REQUIRE(cluster.Start());
  const std::string address = cluster.ClientAddress(1);

  ConnectOptions app1;
  app1.token = "token-one";
  ConnectOptions app2;
  app2.token = "token-two";
  std::vector<std::unique_ptr<Servant>> servants;
  for (const char* group : {"open", "locked"}) {
    auto servant = Servant::Create(address, group, app1);
    REQUIRE(servant.ok());
    (*servant)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
    REQUIRE((*servant)->Start().ok());
    servants.push_back(*std::move(servant));
  }

  ConnectOptions none;
  CHECK(Client::Connect(address, none).status().code() == absl::StatusCode::kUnauthenticated);
  ConnectOptions wrong;
  wrong.token = "token-three";
  CHECK(Client::Connect(address, wrong).status().code() == absl::StatusCode::kUnauthenticated);
  CHECK(Servant::Create(address, "open", wrong).status().code() ==
        absl::StatusCode::kUnauthenticated);

  auto c1 = Client::Connect(address, app1);
  REQUIRE(c1.ok());
  auto c2 = Client::Connect(address, app2);
  REQUIRE(c2.ok());
  CHECK((*c1)->Invoke("locked", "echo", "a", Mode::kAll).ok());
  CHECK((*c2)->Invoke("open", "echo", "b", Mode::kAll).ok());
  absl::Status denied = (*c2)->Invoke("locked", "echo", "c", Mode::kAll).status();
  CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(denied.message()), Contains("group \"locked\""));
  CHECK_THAT(std::string(denied.message()), Contains("invoke"));
  CHECK((*c2)->Multicast("locked", "m").code() == absl::StatusCode::kPermissionDenied);
  CHECK((*c2)->Multicast("open", "m").ok());

  // cohortctl carries the token; drain needs admin on every group the daemon hosts.
  const std::string ctl = test::Runfile("tools/cohortctl") + " --address " + address + " ";
  std::string out;
  CHECK(test::RunCapture(ctl + "status", &out) == 1);
  CHECK_THAT(out, Contains("UNAUTHENTICATED"));
  CHECK(test::RunCapture(ctl + "--token token-two status", &out) == 0);
  CHECK(test::RunCapture(ctl + "--token-file " + token_file + " drain", &out) == 1);
  CHECK_THAT(out, Contains("PERMISSION_DENIED"));
  CHECK_THAT(out, Contains("admin group \"locked\""));

  // SIGHUP with a changed ACL: app2 may invoke locked, app1 no longer.
  const std::string config_path = cluster.ConfigPath(1);
  const std::string original = ReadText(config_path);
  pid_t pid = PidOf(config_path);
  REQUIRE(pid > 0);
  WriteText(config_path, Replace(original, "invoke: [app1]", "invoke: [app2]"));
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(Eventually([&] { return (*c2)->Invoke("locked", "echo", "d", Mode::kAll).ok(); }, 5));
  CHECK((*c1)->Invoke("locked", "echo", "e", Mode::kAll).status().code() ==
        absl::StatusCode::kPermissionDenied);

  // A broken file on SIGHUP is logged and ignored: the daemon keeps the last good config.
  WriteText(config_path, original + "acl_typo: 1\n");
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(Eventually([&] { return LogOf(cluster, 1).find("reload failed") != std::string::npos; },
                   5));
  CHECK_THAT(LogOf(cluster, 1), Contains("acl_typo"));
  CHECK((*c2)->Invoke("locked", "echo", "f", Mode::kAll).ok());
  CHECK((*c1)->Invoke("locked", "echo", "g", Mode::kAll).status().code() ==
        absl::StatusCode::kPermissionDenied);
}

TEST_CASE("client certificates name applications: ACLs by common name over gRPC and the local "
          "fast path; a token must name the same application",
          "[security][e2e]") {
  std::string ca = MakeCa("ca-client-certificates");
  const std::string auth = "auth:\n  client_certificates: true\n  tokens:\n"
                           "    - {name: app1, token: token-one}\n";
  test::Cluster cluster({1, SecurityYaml("app1"), TestCaTlsYaml(ca) + auth, "info"});
  REQUIRE(cluster.Start());
  const std::string address = cluster.ClientAddress(1);
  auto as = [&](const std::string& name, bool local) { return AsApp(ca, name, local); };

  // Servants of app1 on the local fast path, whose register is checked against acl.join.
  std::vector<std::unique_ptr<Servant>> servants;
  for (const char* group : {"open", "locked"}) {
    auto servant = Servant::Create(address, group, as("app1", true));
    REQUIRE(servant.ok());
    (*servant)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
    REQUIRE((*servant)->Start().ok());
    servants.push_back(*std::move(servant));
  }

  // No certificate: refused by the API, naming what is missing; a token alone is not enough.
  absl::Status none = Client::Connect(address, as("", true)).status();
  CHECK(none.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(none.message()), Contains("client certificate"));
  ConnectOptions token_only = as("", true);
  token_only.token = "token-one";
  CHECK(Client::Connect(address, token_only).status().code() ==
        absl::StatusCode::kUnauthenticated);
  // A certificate from another CA fails the handshake.
  ConnectOptions rogue = as("rogue", true);
  rogue.timeout = absl::Milliseconds(500);
  CHECK_FALSE(Client::Connect(address, rogue).ok());
  // The health service stays open to probes without a certificate.
  std::string out;
  const std::string ctl = test::Runfile("tools/cohortctl") + " --address " + address +
                          " --ca-file " + ca + "/ca.pem ";
  CHECK(test::RunCapture(ctl + "health", &out) == 0);
  CHECK(test::RunCapture(ctl + "status", &out) == 1);
  CHECK_THAT(out, Contains("UNAUTHENTICATED"));
  CHECK(test::RunCapture(ctl + "--cert-file " + ca + "/app1.pem --key-file " + ca +
                             "/app1.key status",
                         &out) == 0);

  // The certificate's common name is the caller's name in the ACLs, over gRPC and over the
  // local fast path (which has no TLS: the name proven at Attach travels sealed).
  for (bool local : {false, true}) {
    INFO("local fast path: " << local);
    auto c1 = Client::Connect(address, as("app1", local));
    REQUIRE(c1.ok());
    auto c2 = Client::Connect(address, as("app2", local));
    REQUIRE(c2.ok());
    CHECK(std::string((*c1)->via()) == (local ? "local" : "grpc"));
    CHECK(std::string((*c2)->via()) == (local ? "local" : "grpc"));
    CHECK((*c1)->Invoke("locked", "echo", "a", Mode::kAll).ok());
    CHECK((*c2)->Invoke("open", "echo", "b", Mode::kAll).ok());
    absl::Status denied = (*c2)->Invoke("locked", "echo", "c", Mode::kAll).status();
    CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(denied.message()), Contains("\"app2\" may not invoke group \"locked\""));
    CHECK((*c2)->Multicast("locked", "m").code() == absl::StatusCode::kPermissionDenied);
  }

  // A token sent with a certificate must name the same application.
  ConnectOptions agreeing = as("app1", true);
  agreeing.token = "token-one";
  auto agreed = Client::Connect(address, agreeing);
  REQUIRE(agreed.ok());
  CHECK((*agreed)->Invoke("locked", "echo", "d", Mode::kAll).ok());
  ConnectOptions disagreeing = as("app2", true);
  disagreeing.token = "token-one";
  absl::Status mismatch = Client::Connect(address, disagreeing).status();
  CHECK(mismatch.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(mismatch.message()),
             Contains("the bearer token names \"app1\" but the client certificate \"app2\""));
  CHECK_THAT(LogOf(cluster, 1), Contains("applications are named by their TLS client certificates"));
}

TEST_CASE("auth.certificate_name: an application is named by its certificate's common name, "
          "first DNS or first URI subject alternative name",
          "[security][e2e]") {
  struct Case {
    std::string field, name, missing;
  };
  const Case c = GENERATE(Case{"common_name", "cn-name", ""},
                          Case{"dns", "dns-name.example", ""},
                          Case{"uri", "spiffe://cohort/uri-name", "a URI subject alternative name"});
  INFO("certificate_name: " << c.field);
  std::string ca = MakeCa("ca-certificate-name-" + c.field);
  const std::string auth = "auth: {client_certificates: true, certificate_name: " + c.field + "}\n";
  test::Cluster cluster({1, SecurityYaml("\"" + c.name + "\""), TestCaTlsYaml(ca) + auth, "info"});
  REQUIRE(cluster.Start());
  const std::string address = cluster.ClientAddress(1);
  auto as = [&](const std::string& name, bool local) { return AsApp(ca, name, local); };
  auto servant = Servant::Create(address, "locked", as("sans", true));
  REQUIRE(servant.ok());
  (*servant)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
  REQUIRE((*servant)->Start().ok());
  for (bool local : {false, true}) {
    INFO("local fast path: " << local);
    auto named = Client::Connect(address, as("sans", local));
    REQUIRE(named.ok());
    CHECK((*named)->Invoke("locked", "echo", "a", Mode::kAll).ok());
    // app1's certificate: common name app1, SAN DNS:app1, no URI.
    auto other = Client::Connect(address, as("app1", local));
    if (!c.missing.empty()) {
      CHECK(other.status().code() == absl::StatusCode::kUnauthenticated);
      CHECK_THAT(std::string(other.status().message()), Contains(c.missing));
      continue;
    }
    REQUIRE(other.ok());
    absl::Status denied = (*other)->Invoke("locked", "echo", "b", Mode::kAll).status();
    CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(denied.message()), Contains("\"app1\" may not invoke group \"locked\""));
  }
}

TEST_CASE("auth.client_ca_file: applications' certificates come from their own CA, not the "
          "daemons'",
          "[security][e2e]") {
  // The test CA's rogue-ca stands for the applications' CA: rogue.pem (common name
  // cohort-daemon) is an application's certificate here, and app1.pem (the daemons' CA) is not.
  std::string ca = MakeCa("ca-client-ca-file");
  const std::string auth = "auth: {client_certificates: true, client_ca_file: " + ca +
                           "/rogue-ca.pem}\n";
  test::Cluster cluster({1, SecurityYaml("cohort-daemon"), TestCaTlsYaml(ca) + auth, "info"});
  REQUIRE(cluster.Start());
  const std::string address = cluster.ClientAddress(1);
  // (ca.pem: the daemon's certificate is still the cluster's.)
  auto as = [&](const std::string& name) {
    return AsApp(ca, name, /*local=*/false, absl::Milliseconds(1500));
  };
  auto servant = Servant::Create(address, "locked", as("rogue"));
  REQUIRE(servant.ok());
  (*servant)->Serve("echo", [](const std::string& p) -> absl::StatusOr<std::string> { return p; });
  REQUIRE((*servant)->Start().ok());

  auto app = Client::Connect(address, as("rogue"));
  REQUIRE(app.ok());
  CHECK((*app)->Invoke("locked", "echo", "a", Mode::kAll).ok());
  CHECK_FALSE(Client::Connect(address, as("app1")).ok());  // the daemons' CA: refused
  CHECK_FALSE(Client::Connect(address, as("daemon")).ok());
}

TEST_CASE("cohortctl drain: the others install a view without the daemon", "[security][e2e]") {
  test::Cluster cluster({3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         "failure_detector: {exclude_timeout_ms: 60000}\n", "warn"});
  REQUIRE(cluster.Start());
  ConnectOptions plain;
  const std::vector<std::string> all = {"n1", "n2", "n3"};  // and nobody suspected
  for (int i = 1; i <= 3; ++i) {
    REQUIRE(Eventually([&] { return ViewAt(cluster.ClientAddress(i), plain, "g") == all; }, 10));
  }
  std::string out;
  auto start = std::chrono::steady_clock::now();
  int drained = test::RunCapture(test::Runfile("tools/cohortctl") + " --address " +
                                     cluster.ClientAddress(3) + " --timeout-ms 5000 drain",
                                 &out);
  INFO(out);
  REQUIRE(drained == 0);
  CHECK_THAT(out, Contains("drained: left g"));
  const std::vector<std::string> rest = {"n1", "n2"};
  CHECK(Eventually([&] { return ViewAt(cluster.ClientAddress(1), plain, "g") == rest; }, 5));
  CHECK(Eventually([&] { return ViewAt(cluster.ClientAddress(2), plain, "g") == rest; }, 5));
  // Well before the exclusion timeout (60 s): the view change came from the drain.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
  CHECK(cluster.Running(3));
}

}  // namespace
}  // namespace cohort
