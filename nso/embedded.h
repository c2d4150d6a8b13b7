// Embedded mode (issue 7; 003 section 3: client and NSO in one address space is the fastest
// configuration): an application links the NSO runtime and runs its own node in-process. The node
// is a full member of the cluster: it talks to the other daemons directly over the peer transport,
// hosts groups from its YAML, and serves the gRPC API on listen.client like any cohortd (so
// cohortctl can inspect it). Its Clients and Servants are the stub library's own classes with the
// same interface as in daemon mode; their calls go to the protocol thread without gRPC.
//
//   auto node = cohort::EmbeddedNode::Start(config);                  // nso::Config, as cohortd's
//   auto servant = (*node)->CreateServant("counter", "replica-4");   // cohort::Servant
//   (*servant)->Serve("add", ...);  (*servant)->Start();
//   auto client = (*node)->Connect("my-app");                         // cohort::Client
//   auto result = (*client)->Invoke("counter", "add", "5", cohort::Mode::kAll);
//
// Clients and Servants of a node must be destroyed before the node.
#ifndef COHORT_NSO_EMBEDDED_H_
#define COHORT_NSO_EMBEDDED_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/config.h"
#include "nso/daemon.h"

namespace cohort {

class EmbeddedNode {
 public:
  // Starts the node (binds listen.peer and listen.client, joins the cluster as config.node).
  static absl::StatusOr<std::unique_ptr<EmbeddedNode>> Start(nso::Config config);
  // The same from a cohortd YAML file.
  static absl::StatusOr<std::unique_ptr<EmbeddedNode>> StartFromFile(const std::string& path);
  ~EmbeddedNode();  // Shutdown

  // A client with its own NSO in this node (like Client::Connect to a daemon).
  absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& client_name = "");
  // A servant of `group` hosted by this node (like Servant::Create against a daemon); call
  // Serve/OnGetState/... and then Start on it.
  absl::StatusOr<std::unique_ptr<Servant>> CreateServant(const std::string& group,
                                                         const std::string& name = "");

  // Graceful stop (as cohortd on SIGTERM without the drain): calls in flight end CANCELLED.
  void Shutdown();
  const std::string& node_name() const { return name_; }

 private:
  EmbeddedNode(std::unique_ptr<nso::Daemon> daemon, std::string name)
      : daemon_(std::move(daemon)), name_(std::move(name)) {}
  absl::StatusOr<uint64_t> Attach(const std::string& client_name);

  std::unique_ptr<nso::Daemon> daemon_;
  const std::string name_;
};

}  // namespace cohort

#endif  // COHORT_NSO_EMBEDDED_H_
