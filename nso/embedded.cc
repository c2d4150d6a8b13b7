#include "nso/embedded.h"

#include "absl/strings/str_cat.h"
#include "nso/group_directory.h"
#include "nso/local_backend.h"
#include "nso/logging.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::Start(nso::Config config) {
  std::string name = config.node;
  nso::ConfigureLogging(config.log_level, config.log_format, config.node);  // as cohortd does
  auto daemon = std::make_unique<nso::Daemon>(std::move(config));
  absl::Status started = daemon->Start();
  if (started.ok()) started = nso::StartGroupDirectoryIfConfigured(daemon.get());
  if (!started.ok()) {
    return absl::Status(started.code(),
                        absl::StrCat("embedded node ", name, ": ", started.message()));
  }
  return std::unique_ptr<EmbeddedNode>(new EmbeddedNode(std::move(daemon), std::move(name)));
}

absl::StatusOr<std::unique_ptr<EmbeddedNode>> EmbeddedNode::StartFromFile(
    const std::string& path) {
  absl::StatusOr<nso::Config> config = nso::LoadConfigFile(path);
  if (!config.ok()) return config.status();
  return Start(*std::move(config));
}

EmbeddedNode::~EmbeddedNode() { Shutdown(); }

void EmbeddedNode::Shutdown() { daemon_->Shutdown(); }

absl::StatusOr<uint64_t> EmbeddedNode::Attach(const std::string& client_name) {
  nso::Node* node = daemon_->node();
  if (node == nullptr) return absl::UnavailableError("embedded node shut down");
  uint64_t nso = 0;
  absl::Status attached = nso::RunOnLoop(daemon_->loop(), [&]() -> absl::Status {
    absl::StatusOr<uint64_t> id = node->Attach(client_name);
    if (!id.ok()) return id.status();
    nso = *id;
    return absl::OkStatus();
  });
  if (!attached.ok()) return attached;
  return nso;
}

absl::StatusOr<std::unique_ptr<Client>> EmbeddedNode::Connect(const std::string& client_name) {
  absl::StatusOr<uint64_t> nso = Attach(client_name);
  if (!nso.ok()) return nso.status();
  return Client::WithBackend(
      nso::MakeLocalClient(daemon_->node(), daemon_->loop(), daemon_.get()), *nso, name_,
      /*owns_nso=*/true);
}

absl::StatusOr<std::unique_ptr<Servant>> EmbeddedNode::CreateServant(const std::string& group,
                                                                    const std::string& name) {
  absl::StatusOr<uint64_t> nso = Attach(name);
  if (!nso.ok()) return nso.status();
  return Servant::WithBackend(nso::MakeLocalServant(daemon_->node(), daemon_->loop()), *nso,
                              group);
}

}  // namespace cohort
