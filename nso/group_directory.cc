#include "nso/group_directory.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/local_backend.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

constexpr char kDefine[] = "define";
constexpr char kDelete[] = "delete";
constexpr char kCreated[] = "created";
constexpr char kExists[] = "exists";
constexpr char kDeleted[] = "deleted ";  // + the incarnation
constexpr char kAbsent[] = "absent";
// State lines (State()): a definition of incarnation 0 as it is (what the first build wrote),
// "@<incarnation> <definition>" for a later one, "#next <name> <incarnation>" per name.
constexpr char kLaterPrefix[] = "@";
constexpr char kNextPrefix[] = "#next ";

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
  directory->servant_ = Servant::WithBackend(MakeLocalServant(node, daemon->loop()),
                                             directory->nso_, kSystemGroup);
  GroupDirectory* self = directory.get();
  // Inline: the handlers run on the protocol thread, in the system group's total order.
  directory->servant_->DispatchInline();
  directory->servant_->Serve(kDefine, [self](const std::string& definition) {
    return self->OnDefine(definition);
  });
  directory->servant_->Serve(kDelete, [self](const std::string& name) -> absl::StatusOr<std::string> {
    return self->OnDelete(name);
  });
  directory->servant_->OnGetState([self]() -> absl::StatusOr<std::string> { return self->State(); });
  directory->servant_->OnSetState([self](const std::string& state) { return self->SetState(state); });
  if (absl::Status started = directory->servant_->Start(); !started.ok()) {
    return absl::Status(started.code(), absl::StrCat("group directory: ", started.message()));
  }
  daemon->SetGroupCatalog(self);
  return directory;
}

GroupDirectory::~GroupDirectory() {
  daemon_->SetGroupCatalog(nullptr);
  if (servant_) servant_->Stop();
}

absl::Status GroupDirectory::Create(const api::CreateGroupRequest& request) {
  const Config& config = daemon_->config();
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
                                               request.has_acl() ? &acl : nullptr);
  // Checked here first, so that a bad request is answered without a round of consensus.
  absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, config);
  if (!group.ok()) return group.status();
  if (config.FindGroup(group->name) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("group \"", group->name, "\" is in the daemons' YAML (groups:)"));
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
  absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, daemon_->config());
  if (!group.ok()) return group.status();  // a caller that skipped Create's own check
  if (live_.count(group->name)) return std::string(kExists);
  group->incarnation = next_incarnation_[group->name]++;
  Install(definition, *std::move(group));
  return std::string(kCreated);
}

std::string GroupDirectory::OnDelete(const std::string& name) {
  auto it = live_.find(name);
  if (it == live_.end()) return kAbsent;
  const uint64_t incarnation = it->second.incarnation;
  Uninstall(name);
  return absl::StrCat(kDeleted, incarnation);
}

void GroupDirectory::Install(const std::string& definition, GroupConfig group) {
  live_[group.name] = {group.incarnation, definition};
  if (daemon_->config().FindGroup(group.name) != nullptr) {
    Log("group")->warn("group {}: created by CreateGroup, but this daemon's YAML has a group of "
                       "that name: keeping the YAML's", group.name);
    return;
  }
  if (group.acl) daemon_->SetCreatedGroupAcl(group.name, group.acl);
  std::string name = group.name;
  // Only the group: Node::AddGroups reads the peers of its own configuration.
  auto fresh = std::make_shared<Config>();
  fresh->groups = {std::move(group)};
  Node* node = daemon_->node();
  // After this delivery: the node's groups are not changed under the group delivering it.
  daemon_->loop()->Post([node, fresh, name] {
    node->AddGroups(fresh, {name}, " (created by CreateGroup)");
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

std::string GroupDirectory::State() const {
  std::vector<std::string> lines;
  for (const auto& [name, live] : live_) {
    lines.push_back(live.incarnation == 0
                        ? live.definition
                        : absl::StrCat(kLaterPrefix, live.incarnation, " ", live.definition));
  }
  for (const auto& [name, next] : next_incarnation_) {
    lines.push_back(absl::StrCat(kNextPrefix, name, " ", next));
  }
  return absl::StrJoin(lines, "\n");
}

absl::Status GroupDirectory::SetState(const std::string& state) {
  std::map<std::string, std::pair<std::string, GroupConfig>> wanted;
  std::map<std::string, uint64_t> next;
  for (absl::string_view line : absl::StrSplit(state, '\n', absl::SkipEmpty())) {
    uint64_t incarnation = 0;
    if (absl::ConsumePrefix(&line, kNextPrefix)) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ');
      if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &incarnation)) {
        next[parts[0]] = incarnation;
      }
      continue;
    }
    if (absl::ConsumePrefix(&line, kLaterPrefix)) {
      size_t space = line.find(' ');
      if (space == absl::string_view::npos ||
          !absl::SimpleAtoi(line.substr(0, space), &incarnation)) {
        Log("group")->warn("group directory: malformed line in the state refused");
        continue;
      }
      line.remove_prefix(space + 1);
    }
    std::string definition(line);
    absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, daemon_->config());
    if (!group.ok()) {  // a provider of another build, or another peers list
      Log("group")->warn("group directory: definition in the state refused: {}",
                         std::string(group.status().message()));
      continue;
    }
    group->incarnation = incarnation;
    std::string name = group->name;
    wanted[name] = {std::move(definition), *std::move(group)};
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
    if (!live_.count(name)) Install(entry.first, std::move(entry.second));
  }
  for (const auto& [name, number] : next) {
    uint64_t& mine = next_incarnation_[name];
    mine = std::max(mine, number);
  }
  for (const auto& [name, live] : live_) {
    uint64_t& mine = next_incarnation_[name];
    mine = std::max(mine, live.incarnation + 1);
  }
  return absl::OkStatus();
}

absl::Status StartGroupDirectoryIfConfigured(Daemon* daemon) {
  if (!daemon->config().dynamic_groups) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<GroupDirectory>> directory = GroupDirectory::Start(daemon);
  if (!directory.ok()) return directory.status();
  daemon->Adopt(*std::move(directory));
  return absl::OkStatus();
}

}  // namespace cohort::nso
