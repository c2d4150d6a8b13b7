// Groups created at run time (dynamic_groups; 003 section 3: "the group communication system
// provides clients with create, delete and leave group operations"). Every daemon hosts a replica
// of the directory in the system group kSystemGroup (every peer, consensus order, event-driven:
// silent while nobody creates a group). CreateGroup orders the group's definition there; each
// replica, delivering definitions in the same total order, takes the first definition of a name
// and starts that group as if it were in groups[] of its YAML (Node::AddGroups), so all daemons
// agree on every created group. A daemon that restarts gets the definitions by the system group's
// state transfer. Definitions live as long as some daemon runs (no disk, like replicas' states).
//
// Deleting a group is not offered: LeaveGroup stops hosting it.
#ifndef COHORT_NSO_GROUP_DIRECTORY_H_
#define COHORT_NSO_GROUP_DIRECTORY_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "invocation/servant.h"
#include "nso/daemon.h"
#include "proto/api.pb.h"

namespace cohort::nso {

class GroupDirectory : public DaemonPart {
 public:
  // After daemon->Start(), when its config has dynamic_groups: attaches an NSO, serves the
  // system group with an inline servant and takes the daemon's CreateGroup calls.
  static absl::StatusOr<std::unique_ptr<GroupDirectory>> Start(Daemon* daemon);
  ~GroupDirectory() override;

  // CreateGroup: INVALID_ARGUMENT naming a bad key, ALREADY_EXISTS for a name in use,
  // UNAVAILABLE when the daemons cannot agree (no majority of them); OK once this daemon runs the
  // group.
  absl::Status Create(const api::CreateGroupRequest& request);

 private:
  explicit GroupDirectory(Daemon* daemon) : daemon_(daemon) {}

  // Protocol thread (the servant dispatches inline): "created" or "exists", or why the
  // definition is refused (the same at every replica: the same text, the same peers).
  absl::StatusOr<std::string> OnDefine(const std::string& definition);
  // Records a checked definition of a new name and starts its group (unless the YAML has one).
  void Install(const std::string& definition, GroupConfig group);
  std::string State() const;
  absl::Status SetState(const std::string& state);

  Daemon* const daemon_;
  uint64_t nso_ = 0;
  std::unique_ptr<Servant> servant_;
  // Protocol thread only.
  std::vector<std::string> definitions_;  // in delivery order
  std::set<std::string> names_;
};

// After daemon->Start(): with dynamic_groups in its config, starts its directory and hands it to
// the daemon (Daemon::Adopt); without, nothing.
absl::Status StartGroupDirectoryIfConfigured(Daemon* daemon);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_DIRECTORY_H_
