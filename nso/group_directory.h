// Groups created at run time (dynamic_groups; 003 section 3: "the group communication system
// provides clients with create, delete and leave group operations"). Every daemon hosts a replica
// of the directory in the system group kSystemGroup (every peer, consensus order, event-driven:
// silent while nobody creates a group). CreateGroup orders the group's definition there; each
// replica, delivering definitions in the same total order, takes the first definition of a name
// and starts that group as if it were in groups[] of its YAML (Node::AddGroups), so all daemons
// agree on every created group. A daemon that restarts gets the definitions by the system group's
// state transfer. Definitions live as long as some daemon runs (no disk, like replicas' states).
//
// DeleteGroup (003 section 3's delete operation) is ordered the same way: every replica stops the
// group (Node::RemoveGroup). The name may then be created again: the new group is another
// incarnation of the name (GroupConfig::incarnation, the number of earlier creations of the name,
// the same at every replica), and each daemon drops the traffic of an incarnation it does not run,
// so messages of the old group never reach the new one however late they come.
#ifndef COHORT_NSO_GROUP_DIRECTORY_H_
#define COHORT_NSO_GROUP_DIRECTORY_H_

#include <memory>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "invocation/servant.h"
#include "nso/daemon.h"
#include "proto/api.pb.h"

namespace cohort::nso {

class GroupDirectory : public DaemonPart, public GroupCatalog {
 public:
  // After daemon->Start(), when its config has dynamic_groups: attaches an NSO, serves the
  // system group with an inline servant and takes the daemon's CreateGroup calls.
  static absl::StatusOr<std::unique_ptr<GroupDirectory>> Start(Daemon* daemon);
  ~GroupDirectory() override;

  // CreateGroup: INVALID_ARGUMENT naming a bad key, ALREADY_EXISTS for a name in use,
  // UNAVAILABLE when the daemons cannot agree (no majority of them); OK once this daemon runs the
  // group.
  absl::Status Create(const api::CreateGroupRequest& request) override;
  // DeleteGroup: NOT_FOUND when no group of that name was made by CreateGroup,
  // FAILED_PRECONDITION for a group of the YAML, UNAVAILABLE without a majority of the daemons;
  // OK once this daemon has stopped the group.
  absl::Status Delete(const std::string& group) override;

 private:
  explicit GroupDirectory(Daemon* daemon) : daemon_(daemon) {}

  // Protocol thread (the servant dispatches inline): "created" or "exists", or why the
  // definition is refused (the same at every replica: the same text, the same peers).
  absl::StatusOr<std::string> OnDefine(const std::string& definition);
  // "deleted <incarnation>" or "absent".
  std::string OnDelete(const std::string& name);
  // Records a checked definition of a name not in use and starts its group (unless the YAML has
  // one of that name).
  void Install(const std::string& definition, GroupConfig group);
  // Forgets a live group and stops it here.
  void Uninstall(const std::string& name);
  // The live definitions and every name's next incarnation, one per line.
  std::string State() const;
  // Makes this replica's directory the state's: stops the groups it no longer has, starts the
  // new ones.
  absl::Status SetState(const std::string& state);
  // Runs `fn` on the protocol thread every 10 ms until it returns true (5 s at most).
  absl::Status AwaitHere(const std::string& what, std::function<bool(Node*)> fn);

  struct Live {
    uint64_t incarnation = 0;
    std::string definition;
  };

  Daemon* const daemon_;
  uint64_t nso_ = 0;
  std::unique_ptr<Servant> servant_;
  // Protocol thread only.
  std::map<std::string, Live> live_;            // the groups made and not deleted
  std::map<std::string, uint64_t> next_incarnation_;  // every name ever created
};

// After daemon->Start(): with dynamic_groups in its config, starts its directory and hands it to
// the daemon (Daemon::Adopt); without, nothing.
absl::Status StartGroupDirectoryIfConfigured(Daemon* daemon);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_DIRECTORY_H_
