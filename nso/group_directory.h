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
//
// dynamic_groups.state_file keeps the directory on disk, so that created groups survive a restart
// of every daemon. Each replica writes its state (wire.proto, DirectoryState) durably when it
// applies a creation or deletion, before it answers; an operation is acknowledged once a majority
// answered, so a majority of the files holds it. After a restart every replica starts
// "restoring": it orders its file's content in the system group (a restore), refuses creations
// and deletions meanwhile (UNAVAILABLE, the same at every replica), and, once restores from a
// majority of the daemons are delivered, adopts the newest (highest version: the longest prefix
// of the one total order of operations). Any majority shares a daemon with the majority that
// held the last acknowledged operation, so nothing acknowledged is lost. Every replica delivers
// the same restores in the same order and adopts the same state. A daemon that joins a running
// system group gets the state (and whether it is still restoring) by state transfer, and its own
// restore is then ignored.
#ifndef COHORT_NSO_GROUP_DIRECTORY_H_
#define COHORT_NSO_GROUP_DIRECTORY_H_

#include <memory>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <atomic>
#include <set>
#include <thread>

#include "absl/status/statusor.h"
#include "invocation/steady_time.h"
#include "invocation/servant.h"
#include "nso/daemon.h"
#include "proto/api.pb.h"
#include "proto/wire.pb.h"

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
  absl::StatusOr<std::string> OnDelete(const std::string& name);
  // A daemon's file (DirectoryState with `from`): counted while restoring, else ignored.
  std::string OnRestore(const std::string& payload);
  // Records a checked definition of a name not in use and starts its group (unless the YAML has
  // one of that name). `existed`: from a directory's state (Adopt), so the group is older than
  // this process (Node::AddGroups).
  void Install(const std::string& definition, GroupConfig group, bool existed = false);
  // Forgets a live group and stops it here.
  void Uninstall(const std::string& name);
  // The directory as a message (`with_restore`: the restoring fields too).
  wire::DirectoryState Snapshot(bool with_restore) const;
  // Makes this replica's directory `state`: stops the groups it no longer has, starts the new
  // ones, takes its version (and, with `with_restore`, its restoring fields).
  void Adopt(const wire::DirectoryState& state, bool with_restore);
  std::string State() const;
  absl::Status SetState(const std::string& state);
  // Writes the directory to dynamic_groups.state_file (if set): a temporary file, fsync, rename.
  void Persist() const;
  // The restore thread: orders this daemon's file in the system group until it is delivered.
  void SendRestore(wire::DirectoryState file);
  // Runs `fn` on the protocol thread every 10 ms until it returns true (5 s at most).
  absl::Status AwaitHere(const std::string& what, std::function<bool(Node*)> fn);

  struct Live {
    uint64_t incarnation = 0;
    std::string definition;
  };

  Daemon* const daemon_;
  uint64_t nso_ = 0;
  std::unique_ptr<Servant> servant_;
  std::thread restore_thread_;
  internal::SteadyNotification stopping_;  // its waits measure the monotonic clock
  // Protocol thread only.
  std::map<std::string, Live> live_;            // the groups made and not deleted
  std::map<std::string, uint64_t> next_incarnation_;  // every name ever created
  uint64_t version_ = 0;        // creations and deletions applied
  bool restoring_ = false;      // state_file: until a majority of the daemons' files came
  std::set<std::string> restored_from_;
  wire::DirectoryState best_;   // the newest of those files
};

// After daemon->Start(): with dynamic_groups in its config, starts its directory and hands it to
// the daemon (Daemon::Adopt); without, nothing.
absl::Status StartGroupDirectoryIfConfigured(Daemon* daemon);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GROUP_DIRECTORY_H_
