#include "nso/group_directory.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nso/local_backend.h"
#include "nso/logging.h"

namespace cohort::nso {
namespace {

constexpr char kDefine[] = "define";
constexpr char kCreated[] = "created";
constexpr char kExists[] = "exists";

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
  directory->servant_->OnGetState([self]() -> absl::StatusOr<std::string> { return self->State(); });
  directory->servant_->OnSetState([self](const std::string& state) { return self->SetState(state); });
  if (absl::Status started = directory->servant_->Start(); !started.ok()) {
    return absl::Status(started.code(), absl::StrCat("group directory: ", started.message()));
  }
  daemon->SetGroupCreator(
      [self](const api::CreateGroupRequest& request) { return self->Create(request); });
  return directory;
}

GroupDirectory::~GroupDirectory() {
  daemon_->SetGroupCreator(nullptr);
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
  Node* node = daemon_->node();
  for (int attempt = 0; attempt < 500; ++attempt) {
    bool running = false;
    absl::Status asked = RunOnLoop(daemon_->loop(), [&]() -> absl::Status {
      running = node->GroupDetails(group->name).ok();
      return absl::OkStatus();
    });
    if (!asked.ok()) return asked;
    if (running) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "group \"", group->name, "\" was created, but this daemon has not started it within 5 s"));
}

absl::StatusOr<std::string> GroupDirectory::OnDefine(const std::string& definition) {
  absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, daemon_->config());
  if (!group.ok()) return group.status();  // a caller that skipped Create's own check
  if (names_.count(group->name)) return std::string(kExists);
  Install(definition, *std::move(group));
  return std::string(kCreated);
}

void GroupDirectory::Install(const std::string& definition, GroupConfig group) {
  names_.insert(group.name);
  definitions_.push_back(definition);
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

std::string GroupDirectory::State() const { return absl::StrJoin(definitions_, "\n"); }

absl::Status GroupDirectory::SetState(const std::string& state) {
  for (absl::string_view line : absl::StrSplit(state, '\n', absl::SkipEmpty())) {
    std::string definition(line);
    absl::StatusOr<GroupConfig> group = ParseGroupDefinition(definition, daemon_->config());
    if (!group.ok()) {  // a provider of another build, or another peers list
      Log("group")->warn("group directory: definition in the state refused: {}",
                         std::string(group.status().message()));
      continue;
    }
    if (!names_.count(group->name)) Install(definition, *std::move(group));
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
