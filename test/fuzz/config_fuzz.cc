// libFuzzer target: the YAML configuration loader.
//
// cohort::nso::ParseConfig must turn any text into a Config or an error status: no crash, no
// sanitizer report, no exception escaping (yaml-cpp throws; the loader must catch). An accepted
// Config must also be usable: every group member and the node itself are configured peers.
// The same text also goes to ParseGroupDefinition (CreateGroup's definitions, which a daemon
// delivers from the system group): an accepted group has members that are peers and a name that
// is not the daemons' own.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "nso/config.h"

namespace {

const cohort::nso::Config& Running() {
  static const cohort::nso::Config* running = [] {
    absl::StatusOr<cohort::nso::Config> parsed = cohort::nso::ParseConfig(
        "node: n1\nlisten: {peer: 127.0.0.1:7101, client: 127.0.0.1:7201}\n"
        "peers:\n  - {name: n1, id: 1, address: 127.0.0.1:7101}\n"
        "  - {name: n2, id: 2, address: 127.0.0.1:7102}\n"
        "tls: {insecure: true}\ndynamic_groups: {}\n",
        "running.yaml");
    if (!parsed.ok()) std::abort();
    return new cohort::nso::Config(*std::move(parsed));
  }();
  return *running;
}

void CheckGroupDefinition(const std::string& text) {
  absl::StatusOr<cohort::nso::GroupConfig> group =
      cohort::nso::ParseGroupDefinition(text, Running());
  if (!group.ok()) {
    if (group.status().code() != absl::StatusCode::kInvalidArgument ||
        group.status().message().rfind("group definition", 0) != 0) {
      std::fprintf(stderr, "config_fuzz: definition error not named: %s\n",
                   group.status().ToString().c_str());
      std::abort();
    }
    return;
  }
  if (group->members.empty() || cohort::nso::IsDaemonsOwnGroup(group->name)) {
    std::fprintf(stderr, "config_fuzz: accepted a definition it must refuse\n");
    std::abort();
  }
  for (const std::string& member : group->members) {
    if (Running().FindPeer(member) == nullptr) {
      std::fprintf(stderr, "config_fuzz: accepted a definition with a member not a peer\n");
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  CheckGroupDefinition(text);
  absl::StatusOr<cohort::nso::Config> config = cohort::nso::ParseConfig(text, "fuzz.yaml");
  if (!config.ok()) {
    if (config.status().message().rfind("fuzz.yaml", 0) != 0) {
      std::fprintf(stderr, "config_fuzz: error does not start with the file name: %s\n",
                   config.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  auto fail = [](const char* what) {
    std::fprintf(stderr, "config_fuzz: accepted config %s\n", what);
    std::abort();
  };
  const cohort::nso::PeerConfig* self = config->FindPeer(config->node);
  if (self == nullptr || self->id != config->node_id) fail("whose node is not a peer");
  for (const cohort::nso::GroupConfig& group : config->groups) {
    if (group.members.empty()) fail("with a group without members");
    for (const std::string& member : group.members) {
      if (config->FindPeer(member) == nullptr) fail("with a group member that is not a peer");
    }
    if (config->FindGroup(group.name) != &group) fail("with a duplicate group name");
  }
  return 0;
}
