// Validates the deployment files (deploy/): every YAML parses; the Kubernetes manifests have a
// StatefulSet behind a headless Service, gRPC health probes, a PodDisruptionBudget keeping a
// majority, peers as stable DNS names, and every embedded cohortd config passes `cohortd --check`;
// the systemd unit starts cohortd with a config and checks it first.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "test/cluster.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

using cohort::test::ReadText;

std::vector<YAML::Node> Manifests() {
  std::vector<YAML::Node> docs = YAML::LoadAllFromFile(test::Runfile("deploy/kubernetes/cohort.yaml"));
  REQUIRE(docs.size() >= 5);
  return docs;
}

YAML::Node OfKind(const std::vector<YAML::Node>& docs, const std::string& kind,
                  const std::string& name = "") {
  for (const YAML::Node& doc : docs) {
    if (doc["kind"].as<std::string>() == kind &&
        (name.empty() || doc["metadata"]["name"].as<std::string>() == name)) {
      return doc;
    }
  }
  FAIL("no " << kind << " " << name);
  return YAML::Node();
}

int CheckConfig(const std::string& text, const std::string& name, std::string* error) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return test::RunProcess({test::Runfile("tools/cohortd"), "--check", path}, error);
}

TEST_CASE("every YAML file under deploy/ parses", "[deploy]") {
  int files = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(test::Runfile("deploy"))) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path());
    CHECK_NOTHROW(YAML::LoadAllFromFile(entry.path().string()));
    ++files;
  }
  CHECK(files >= 2);
}

TEST_CASE("the Kubernetes manifests: StatefulSet, headless Service, probes, PDB", "[deploy]") {
  std::vector<YAML::Node> docs = Manifests();
  std::set<std::string> kinds;
  for (const YAML::Node& doc : docs) {
    kinds.insert(doc["kind"].as<std::string>());
    REQUIRE(doc["apiVersion"]);
    REQUIRE(doc["metadata"]["name"]);
  }
  for (const char* kind : {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"}) {
    INFO(kind);
    CHECK(kinds.count(kind) == 1);
  }

  YAML::Node sts = OfKind(docs, "StatefulSet");
  int replicas = sts["spec"]["replicas"].as<int>();
  CHECK(replicas == 3);
  std::string service_name = sts["spec"]["serviceName"].as<std::string>();
  YAML::Node headless = OfKind(docs, "Service", service_name);
  CHECK(headless["spec"]["clusterIP"].as<std::string>() == "None");
  CHECK(headless["spec"]["publishNotReadyAddresses"].as<bool>());

  YAML::Node container = sts["spec"]["template"]["spec"]["containers"][0];
  YAML::Node readiness = container["readinessProbe"];
  YAML::Node liveness = container["livenessProbe"];
  REQUIRE(readiness["grpc"]);
  REQUIRE(liveness["grpc"]);
  CHECK(readiness["grpc"]["port"].as<int>() == 7201);
  CHECK(liveness["grpc"]["port"].as<int>() == 7201);
  CHECK(liveness["grpc"]["service"].as<std::string>() == "cohort.liveness");
  CHECK_FALSE(readiness["httpGet"]);

  YAML::Node pdb = OfKind(docs, "PodDisruptionBudget");
  CHECK(pdb["apiVersion"].as<std::string>() == "policy/v1");
  CHECK(pdb["spec"]["minAvailable"].as<int>() == replicas / 2 + 1);
  CHECK(pdb["spec"]["selector"]["matchLabels"]["app"].as<std::string>() ==
        sts["spec"]["selector"]["matchLabels"]["app"].as<std::string>());
}

TEST_CASE("every embedded cohortd config loads and names its peers by DNS", "[deploy]") {
  std::vector<YAML::Node> docs = Manifests();
  YAML::Node sts = OfKind(docs, "StatefulSet");
  std::string ns = sts["metadata"]["namespace"].as<std::string>();
  std::string service = sts["spec"]["serviceName"].as<std::string>();
  std::string set_name = sts["metadata"]["name"].as<std::string>();
  YAML::Node data = OfKind(docs, "ConfigMap")["data"];
  int replicas = sts["spec"]["replicas"].as<int>();
  REQUIRE(static_cast<int>(data.size()) == replicas);
  for (int i = 0; i < replicas; ++i) {
    std::string pod = set_name + "-" + std::to_string(i);
    INFO(pod);
    REQUIRE(data[pod + ".yaml"]);  // the container reads /etc/cohort/$(POD_NAME).yaml
    std::string text = data[pod + ".yaml"].as<std::string>();
    std::string error;
    CHECK(CheckConfig(text, pod + ".yaml", &error) == 0);
    INFO(error);
    YAML::Node config = YAML::Load(text);
    CHECK(config["node"].as<std::string>() == pod);
    REQUIRE(config["peers"].size() == static_cast<size_t>(replicas));
    for (int j = 0; j < replicas; ++j) {
      std::string want = set_name + "-" + std::to_string(j) + "." + service + "." + ns + ".svc:7101";
      CHECK(config["peers"][j]["address"].as<std::string>() == want);
    }
    CHECK(config["metrics"]["listen"].as<std::string>() == "0.0.0.0:9101");
    // The incarnation file on the pod's own persistent volume (a restart knows it is one).
    CHECK(config["incarnation_file"].as<std::string>() == "/var/lib/cohort/incarnation");
  }
  YAML::Node mounts = sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"];
  std::string state_volume;
  for (const YAML::Node& mount : mounts) {
    if (mount["mountPath"].as<std::string>() == "/var/lib/cohort") {
      state_volume = mount["name"].as<std::string>();
      CHECK_FALSE(mount["readOnly"]);
    }
  }
  REQUIRE_FALSE(state_volume.empty());
  CHECK(sts["spec"]["template"]["spec"]["securityContext"]["fsGroup"].as<int>() == 65534);
  REQUIRE(sts["spec"]["volumeClaimTemplates"].size() == 1);
  CHECK(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"].as<std::string>() ==
        state_volume);
}

TEST_CASE("the systemd unit checks, starts and restarts cohortd", "[deploy]") {
  std::string unit = ReadText(test::Runfile("deploy/systemd/cohortd.service"));
  CHECK_THAT(unit, Contains("[Service]"));
  CHECK_THAT(unit, Contains("ExecStartPre=/usr/local/bin/cohortd --check /etc/cohort/cohortd.yaml"));
  CHECK_THAT(unit, Contains("ExecStart=/usr/local/bin/cohortd --config /etc/cohort/cohortd.yaml"));
  CHECK_THAT(unit, Contains("Restart=on-failure"));
  CHECK_THAT(unit, Contains("RestartPreventExitStatus=2"));
  CHECK_THAT(unit, Contains("WantedBy=multi-user.target"));
  // Its config keeps the incarnation file in the unit's writable state directory.
  CHECK_THAT(unit, Contains("StateDirectory=cohort"));
  CHECK(YAML::LoadFile(test::Runfile("deploy/systemd/cohortd.yaml"))["incarnation_file"]
            .as<std::string>() == "/var/lib/cohort/incarnation");
  std::string error;
  CHECK(test::RunProcess({test::Runfile("tools/cohortd"), "--check",
                          test::Runfile("deploy/systemd/cohortd.yaml")},
                         &error) == 0);
  INFO(error);
}

}  // namespace
}  // namespace cohort
