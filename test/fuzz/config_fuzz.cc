// libFuzzer target: the YAML configuration loader.
//
// cohort::nso::ParseConfig must turn any text into a Config or an error status: no crash, no
// sanitizer report, no exception escaping (yaml-cpp throws; the loader must catch). An accepted
// Config must also be usable: every group member and the node itself are configured peers.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/statusor.h"
#include "nso/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
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
