#include "nso/group_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/durable_file.h"
#include "nso/local_backend.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

constexpr char kDefine[] = "define";
constexpr char kDelete[] = "delete";
constexpr char kCreated[] = "created";
constexpr char kExists[] = "exists";
constexpr char kRestore[] = "restore";
constexpr char kDeleted[] = "deleted ";  // + the incarnation
constexpr char kAbsent[] = "absent";
// The state is "DS1:" and a DirectoryState. The first build's was text lines: a definition of
// incarnation 0 as it is, "@<incarnation> <definition>" for a later one, "#next <name>
// <incarnation>" per name (still read, from a daemon of that build).
constexpr char kStatePrefix[] = "DS1:";
constexpr char kLaterPrefix[] = "@";
constexpr char kNextPrefix[] = "#next ";

absl::Status Restoring() {
  return absl::UnavailableError(
      "the daemons are restoring their group directory from their files "
      "(dynamic_groups.state_file): a majority of them must be up; try again");
}

// The first build's text state as a DirectoryState.
wire::DirectoryState FromText(const std::string& text) {
  wire::DirectoryState state;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    uint64_t incarnation = 0;
    if (absl::ConsumePrefix(&line, kNextPrefix)) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &incarnation)) {
        wire::DirectoryState::NextIncarnation* next = state.add_next();
        next->set_name(parts[0]);
        next->set_incarnation(incarnation);
      }
      continue;
    }
    if (absl::ConsumePrefix(&line, kLaterPrefix)) {
      size_t space = line.find(' ');
      if (space == absl::string_view::npos ||
          !absl::SimpleAtoi(line.substr(0, space), &incarnation)) {
        continue;
      }
      line.remove_prefix(space + 1);
    }
    wire::DirectoryState::Group* group = state.add_groups();
    group->set_incarnation(incarnation);
    group->set_definition(std::string(line));  // the name comes from the definition
  }
  return state;
}

absl::StatusOr<wire::DirectoryState> ReadStateFile(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dynamic_groups.state_file \"", path, "\": its directory is not writable: ",
        std::strerror(errno)));
  }
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (absl::IsNotFound(text.status())) return wire::DirectoryState();  // a first start
  if (!text.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dynamic_groups.state_file ", text.status().message()));
  }
  absl::string_view body = *text;
  wire::DirectoryState state;
  if (!absl::ConsumePrefix(&body, kStatePrefix) ||
      !state.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dynamic_groups.state_file \"", path, "\" is not a group directory written by cohortd "
        "(damaged?): move it away to start with no created groups"));
  }
  return state;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupDirectory>> GroupDirectory::Start(Daemon* daemon) {
  std::unique_ptr<GroupDirectory> directory(new GroupDirectory(daemon));
  Node* node = daemon->node();
  absl::Status attached = RunOnLoop(daemon->loop(), [&]() -> absl::Status {
    absl::StatusOr<uint64_t> nso = node->Attach("group-directory");
    if (!nso.ok()) return nso.status();
    directory->nso_ = *nso;
    return absl::OkStatus();
  });
  if (!attached.ok()) return attached;
  std::optional<wire::DirectoryState> file;
  const std::string& path = daemon->config().dynamic_groups_state_file;
  if (!path.empty()) {
    absl::StatusOr<wire::DirectoryState> read = ReadStateFile(path);
    if (!read.ok()) return read.status();
    file = *std::move(read);
    directory->restoring_ = true;  // before the servant: before any delivery
  }
  directory->servant_ = Servant::WithBackend(MakeLocalServant(node, daemon->loop()),
                                             directory->nso_, kSystemGroup);
  GroupDirectory* self = directory.get();
  // Inline: the handlers run on the protocol thread, in the system group's total order.
  directory->servant_->DispatchInline();
  directory->servant_->Serve(kDefine, [self](const std::string& definition) {
    return self->OnDefine(definition);
  });
  directory->servant_->Serve(kDelete, [self](const std::string& name) {
    return self->OnDelete(name);
  });
  directory->servant_->Serve(kRestore, [self](const std::string& payload) -> absl::StatusOr<std::string> {
    return self->OnRestore(payload);
  });
  directory->servant_->OnGetState([self]() -> absl::StatusOr<std::string> { return self->State(); });
  directory->servant_->OnSetState([self](const std::string& state) { return self->SetState(state); });
  if (absl::Status started = directory->servant_->Start(); !started.ok()) {
    return absl::Status(started.code(), absl::StrCat("group directory: ", started.message()));
  }
  daemon->SetGroupCatalog(self);
  if (file) {
    Log("group")->info("group directory: restoring from {} (version {}, {} group(s)) with the "
                       "other daemons' files", path, file->version(), file->groups_size());
    file->set_from(daemon->config().node);
    directory->restore_thread_ =
        std::thread([self, file = *std::move(file)]() mutable { self->SendRestore(std::move(file)); });
  }
  return directory;
}

GroupDirectory::~GroupDirectory() {
  stopping_.Notify();
  if (restore_thread_.joinable()) restore_thread_.join();
  daemon_->SetGroupCatalog(nullptr);
  if (servant_) servant_->Stop();
}

absl::Status GroupDirectory::Create(const api::CreateGroupRequest& request) {
  const Config& config = daemon_->config();
  const Config context = daemon_->GroupDefinitionContext();  // the peers now
  std::vector<std::string> members(request.members().begin(), request.members().end());
  AclConfig acl;
  if (request.has_acl()) {
    acl.present = true;
    acl.join.assign(request.acl().join().begin(), request.acl().join().end());
    acl.invoke.assign(request.acl().invoke().begin(), request.acl().invoke().end());
    acl.admin.assign(request.acl().admin().begin(), request.acl().admin().end());
  }
  std::string definition = GroupDefinitionYaml(request.group(), members, request.ordering(),
                                               request.liveness(), request.style(),
                                               request.default_mode(),
                                               request.has_acl() ? &acl : nullptr,
                                               request.durable());
  // Checked here first, so that a bad request is answered without a round of consensus.
  absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, context);
  if (!group.ok()) return group.status();
  if (config.FindGroup(group->name) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("group \"", group->name, "\" is in the daemons' YAML (groups:)"));
  }
  if (group->durable && config.incarnation_file.empty()) {
    // As the loader for a durable group of the YAML (nso/config_yaml.cc CheckDurable).
    return absl::FailedPreconditionError(absl::StrCat(
        "CreateGroup(\"", group->name, "\"): a durable group needs incarnation_file in the "
        "daemons' YAML (a restart of every member is told by it), and ", config.node,
        " has none"));
  }
  std::unique_ptr<Client> client =
      Client::WithBackend(MakeLocalClient(daemon_->node(), daemon_->loop()), nso_, config.node);
  absl::StatusOr<GroupReplies> replies =
      client->Invoke(kSystemGroup, kDefine, definition, Mode::kMajority, absl::Seconds(5));
  if (!replies.ok()) {
    return absl::Status(replies.status().code(),
                        absl::StrCat("CreateGroup(\"", group->name, "\"): the daemons did not "
                                     "agree on it: ", replies.status().message()));
  }
  for (const auto& reply : replies->replies) {
    if (!reply.status.ok()) return reply.status;
    if (reply.payload == kExists) {
      return absl::AlreadyExistsError(absl::StrCat("group \"", group->name, "\" already exists"));
    }
  }
  // The majority runs it; this daemon too before the caller goes on (Serve, Invoke here).
  return AwaitHere(absl::StrCat("group \"", group->name, "\" was created, but this daemon has not "
                                "started it"),
                   [name = group->name](Node* node) { return node->GroupDetails(name).ok(); });
}

absl::Status GroupDirectory::Delete(const std::string& name) {
  const Config& config = daemon_->config();
  if (IsDaemonsOwnGroup(name)) {
    return absl::PermissionDeniedError(absl::StrCat("group \"", name, "\" is the daemons' own"));
  }
  if (config.FindGroup(name) != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "group \"", name, "\" is in the daemons' YAML (groups:): it is removed there, not by "
        "DeleteGroup"));
  }
  std::unique_ptr<Client> client =
      Client::WithBackend(MakeLocalClient(daemon_->node(), daemon_->loop()), nso_, config.node);
  absl::StatusOr<GroupReplies> replies =
      client->Invoke(kSystemGroup, kDelete, name, Mode::kMajority, absl::Seconds(5));
  if (!replies.ok()) {
    return absl::Status(replies.status().code(),
                        absl::StrCat("DeleteGroup(\"", name, "\"): the daemons did not agree on "
                                     "it: ", replies.status().message()));
  }
  std::optional<uint64_t> incarnation;
  for (const auto& reply : replies->replies) {
    if (!reply.status.ok()) return reply.status;
    uint64_t number = 0;
    if (absl::StartsWith(reply.payload, kDeleted) &&
        absl::SimpleAtoi(reply.payload.substr(sizeof(kDeleted) - 1), &number)) {
      incarnation = number;
    }
  }
  if (!incarnation) {
    return absl::NotFoundError(
        absl::StrCat("no group \"", name, "\" made by CreateGroup (it may be deleted already)"));
  }
  // The majority stopped it; this daemon too before the caller goes on.
  return AwaitHere(absl::StrCat("group \"", name, "\" was deleted, but this daemon has not "
                                "stopped it"),
                   [name, number = *incarnation](Node* node) {
                     absl::StatusOr<GroupInfo> info = node->GroupDetails(name);
                     return !info.ok() || info->config->incarnation != number;
                   });
}

absl::Status GroupDirectory::AwaitHere(const std::string& what, std::function<bool(Node*)> fn) {
  Node* node = daemon_->node();
  for (int attempt = 0; attempt < 500; ++attempt) {
    bool done = false;
    absl::Status asked = RunOnLoop(daemon_->loop(), [&]() -> absl::Status {
      done = fn(node);
      return absl::OkStatus();
    });
    if (!asked.ok()) return asked;
    if (done) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(what, " within 5 s"));
}

absl::StatusOr<std::string> GroupDirectory::OnDefine(const std::string& definition) {
  if (restoring_) return Restoring();
  absl::StatusOr<GroupConfig> group =
      ParseGroupDefinition(definition, daemon_->GroupDefinitionContext());
  if (!group.ok()) return group.status();  // a caller that skipped Create's own check
  if (live_.count(group->name)) return std::string(kExists);
  group->incarnation = next_incarnation_[group->name]++;
  Install(definition, *std::move(group));
  ++version_;
  Persist();  // before the answer: an acknowledged creation is on a majority's disks
  return std::string(kCreated);
}

absl::StatusOr<std::string> GroupDirectory::OnDelete(const std::string& name) {
  if (restoring_) return Restoring();
  auto it = live_.find(name);
  if (it == live_.end()) return std::string(kAbsent);
  const uint64_t incarnation = it->second.incarnation;
  Uninstall(name);
  ++version_;
  Persist();
  return absl::StrCat(kDeleted, incarnation);
}

std::string GroupDirectory::OnRestore(const std::string& payload) {
  wire::DirectoryState file;
  if (!restoring_ || !file.ParseFromString(payload) || file.from().empty()) return "ignored";
  if (!restored_from_.insert(file.from()).second) return "counted";  // a resend
  if (restored_from_.size() == 1 || file.version() > best_.version()) {
    best_ = file;
    best_.clear_from();
  }
  const size_t peers = daemon_->peers().size();
  const size_t majority = peers / 2 + 1;
  if (restored_from_.size() < majority) return "counted";
  // A majority's files: the newest holds every acknowledged operation (see the header).
  Log("group")->info("group directory restored from the files of {} ({} of {} daemons): "
                     "version {}, {} group(s)",
                     absl::StrJoin(restored_from_, ", "), restored_from_.size(),
                     peers, best_.version(), best_.groups_size());
  wire::DirectoryState chosen = std::move(best_);
  restoring_ = false;
  restored_from_.clear();
  best_.Clear();
  Adopt(chosen, /*with_restore=*/false);
  Persist();
  return "restored";
}

void GroupDirectory::Install(const std::string& definition, GroupConfig group, bool existed) {
  live_[group.name] = {group.incarnation, definition};
  if (daemon_->config().FindGroup(group.name) != nullptr) {
    Log("group")->warn("group {}: created by CreateGroup, but this daemon's YAML has a group of "
                       "that name: keeping the YAML's", group.name);
    return;
  }
  if (group.acl) daemon_->SetCreatedGroupAcl(group.name, group.acl);
  if (group.durable && daemon_->config().incarnation_file.empty() &&
      std::find(group.members.begin(), group.members.end(), daemon_->config().node) !=
          group.members.end()) {
    // Every daemon takes a definition alike; this one cannot keep its part of the promise.
    Log("group")->error("group {}: created durable, but this member's daemon has no "
                        "incarnation_file: after a restart of every member it cannot tell it "
                        "restarted, and the group waits for it to say what its servant kept "
                        "until it runs with one", group.name);
  }
  std::string name = group.name;
  // Only the group: Node::AddGroups reads the peers of its own configuration.
  auto fresh = std::make_shared<Config>();
  fresh->groups = {std::move(group)};
  Node* node = daemon_->node();
  // After this delivery: the node's groups are not changed under the group delivering it.
  daemon_->loop()->Post([node, fresh, name, existed] {
    node->AddGroups(*fresh, {name}, existed ? " (created by CreateGroup; from the directory's state)"
                                           : " (created by CreateGroup)",
                    existed);
  });
}

void GroupDirectory::Uninstall(const std::string& name) {
  auto it = live_.find(name);
  if (it == live_.end()) return;
  const uint64_t incarnation = it->second.incarnation;
  live_.erase(it);
  if (daemon_->config().FindGroup(name) != nullptr) return;  // the YAML's, kept (Install)
  daemon_->SetCreatedGroupAcl(name, nullptr);
  Node* node = daemon_->node();
  // After this delivery, as Install's start; before a later Install's start of the name.
  daemon_->loop()->Post([node, name, incarnation] { node->RemoveGroup(name, incarnation); });
}

wire::DirectoryState GroupDirectory::Snapshot(bool with_restore) const {
  wire::DirectoryState state;
  for (const auto& [name, live] : live_) {
    wire::DirectoryState::Group* group = state.add_groups();
    group->set_name(name);
    group->set_incarnation(live.incarnation);
    group->set_definition(live.definition);
  }
  for (const auto& [name, next] : next_incarnation_) {
    wire::DirectoryState::NextIncarnation* entry = state.add_next();
    entry->set_name(name);
    entry->set_incarnation(next);
  }
  state.set_version(version_);
  if (with_restore && restoring_) {
    state.set_restoring(true);
    for (const std::string& from : restored_from_) state.add_restored_from(from);
    *state.mutable_best() = best_;
  }
  return state;
}

void GroupDirectory::Adopt(const wire::DirectoryState& state, bool with_restore) {
  std::map<std::string, std::pair<std::string, GroupConfig>> wanted;
  for (const wire::DirectoryState::Group& entry : state.groups()) {
    absl::StatusOr<GroupConfig> group = ParseGroupDefinition(entry.definition(), daemon_->config());
    if (!group.ok()) {  // a daemon of another build, or another peers list
      Log("group")->warn("group directory: definition refused: {}",
                         std::string(group.status().message()));
      continue;
    }
    group->incarnation = entry.incarnation();
    std::string name = group->name;
    wanted[name] = {entry.definition(), *std::move(group)};
  }
  // This replica may have missed deletions and creations (it was excluded meanwhile).
  std::vector<std::string> gone;
  for (const auto& [name, live] : live_) {
    auto it = wanted.find(name);
    if (it == wanted.end() || it->second.second.incarnation != live.incarnation) {
      gone.push_back(name);
    }
  }
  for (const std::string& name : gone) Uninstall(name);
  for (auto& [name, entry] : wanted) {
    if (!live_.count(name)) Install(entry.first, std::move(entry.second), /*existed=*/true);
  }
  for (const wire::DirectoryState::NextIncarnation& next : state.next()) {
    uint64_t& mine = next_incarnation_[next.name()];
    mine = std::max(mine, next.incarnation());
  }
  for (const auto& [name, live] : live_) {
    uint64_t& mine = next_incarnation_[name];
    mine = std::max(mine, live.incarnation + 1);
  }
  version_ = state.version();
  if (with_restore) {
    restoring_ = state.restoring();
    restored_from_ = {state.restored_from().begin(), state.restored_from().end()};
    best_ = state.best();
  }
}

std::string GroupDirectory::State() const {
  return kStatePrefix + Snapshot(/*with_restore=*/true).SerializeAsString();
}

absl::Status GroupDirectory::SetState(const std::string& text) {
  absl::string_view bytes = text;
  wire::DirectoryState state;
  if (absl::ConsumePrefix(&bytes, kStatePrefix)) {
    if (!state.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return absl::InvalidArgumentError("group directory: the state transferred is damaged");
    }
  } else {
    state = FromText(text);  // from a daemon of the first build
  }
  // The provider's directory, restoring or not (a joiner's own restore is then ignored or
  // counted like any other).
  Adopt(state, /*with_restore=*/true);
  if (!restoring_) Persist();
  return absl::OkStatus();
}

void GroupDirectory::Persist() const {
  const std::string& path = daemon_->config().dynamic_groups_state_file;
  if (path.empty()) return;
  const std::string bytes = kStatePrefix + Snapshot(/*with_restore=*/false).SerializeAsString();
  absl::Status written = WriteFileDurably(path, bytes);
  if (!written.ok()) {
    Log("group")->error("group directory: dynamic_groups.state_file: {}: the created groups may "
                        "not survive a restart of every daemon",
                        std::string(written.message()));
  }
}

void GroupDirectory::SendRestore(wire::DirectoryState file) {
  std::unique_ptr<Client> client = Client::WithBackend(
      MakeLocalClient(daemon_->node(), daemon_->loop()), nso_, daemon_->config().node);
  const std::string payload = file.SerializeAsString();
  // Until it is delivered (a majority of the daemons must be up to order it), or shutdown (which
  // waits for the attempt in progress: short ones).
  while (!stopping_.HasBeenNotified()) {
    absl::StatusOr<GroupReplies> replies =
        client->Invoke(kSystemGroup, kRestore, payload, Mode::kMajority, absl::Seconds(1));
    if (replies.ok()) return;
    stopping_.WaitForNotificationWithTimeout(absl::Milliseconds(200));
  }
}

absl::Status StartGroupDirectoryIfConfigured(Daemon* daemon) {
  if (!daemon->config().dynamic_groups) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<GroupDirectory>> directory = GroupDirectory::Start(daemon);
  if (!directory.ok()) return directory.status();
  daemon->Adopt(*std::move(directory));
  return absl::OkStatus();
}

}  // namespace cohort::nso
