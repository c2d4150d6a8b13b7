// Wires one daemon together: config -> Node on the protocol thread, the gRPC peer transport, and
// the gRPC servers for peers and applications. The one place where the pieces meet.
#ifndef COHORT_NSO_DAEMON_H_
#define COHORT_NSO_DAEMON_H_

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/steady_time.h"
#include "nso/admin_service.h"
#include "nso/api_service.h"
#include "nso/config.h"
#include "nso/event_loop.h"
#include "nso/grpc_transport.h"
#include "nso/tcp_transport.h"
#include "nso/grpc_revocation.h"
#include "nso/tls_files.h"
#include "nso/http_server.h"
#include "nso/metrics.h"
#include "nso/local_api.h"
#include "nso/node.h"

namespace cohort::nso {

// A part of a daemon built on its node outside this library (the group directory of
// dynamic_groups, nso/group_directory.h); Daemon::Adopt keeps it until Shutdown, which destroys it
// before the node.
class DaemonPart {
 public:
  virtual ~DaemonPart() = default;
};

class Daemon {
 public:
  explicit Daemon(Config config);
  ~Daemon();

  // Binds the peer and client addresses and starts serving. An error names what failed.
  absl::Status Start();
  // Before Start (cohortd --replacing): this node's earlier processes ran where their
  // incarnation_file is lost (a machine replaced). Without a file, this start is taken for a
  // restart of some earlier process, not for a first start (Node::RestartedFrom).
  void SetReplacing() { replacing_ = true; }
  // Graceful: stops accepting, finishes queued work, cancels calls in flight with a status.
  void Shutdown();
  // Leaves every group this daemon is a member of (a view change each, agreed by the others)
  // and waits until it is out of them or `timeout_ms` passed. For SIGTERM and drains.
  void Drain(uint64_t timeout_ms);
  // SIGHUP: applies auth.tokens and groups[].acl of `fresh` (a config of the same file, already
  // loaded and checked) at once to new calls. Other changes (failure detector timeouts, tls,
  // peers, groups) need a restart; they are logged as not applied.
  void Reload(const Config& fresh);
  // A reload whose file could not be used (cohortd: it does not parse, or names another node):
  // counted for the metrics (cohort_config_reloads_total{result="refused"}).
  void ReloadRefused();

  // Samples the protocol state on the protocol thread; UNAVAILABLE if it does not answer in time.
  absl::StatusOr<NodeSnapshot> Snapshot(absl::Duration timeout = absl::Seconds(1));
  // The hosted groups without a trusted majority of their configured members ("name trusts t of
  // c"), for the health status; UNAVAILABLE if the protocol thread does not answer in 1 s.
  absl::StatusOr<std::vector<std::string>> MinorityGroups();
  // Every hosted group has a majority of its configured members trusted (the gRPC health status).
  bool serving() const { return serving_; }
  // The Prometheus text of GET /metrics.
  std::string RenderMetrics();
  // For in-process clients and servants (an embedded node, nso/embedded.h): the node may only be
  // touched by tasks posted to the loop. Valid between Start and Shutdown.
  Node* node() { return node_.get(); }
  EventLoop* loop() { return loop_.get(); }
  // Keeps `part` until Shutdown (destroyed first there).
  void Adopt(std::unique_ptr<DaemonPart> part) { parts_.push_back(std::move(part)); }
  // CreateGroup and DeleteGroup of the API go to `catalog` (null: refused, dynamic_groups off).
  void SetGroupCatalog(GroupCatalog* catalog);
  // CreateGroup / DeleteGroup for an in-process client (nso/embedded.h): as the API's, without
  // its checks of who calls (in-process code is the application itself).
  absl::Status CreateGroup(const api::CreateGroupRequest& request);
  absl::Status DeleteGroup(const std::string& group);
  const Config& config() const { return config_; }
  // The peers now: config().peers, or what the last reload made of them (ReloadPeers).
  std::vector<PeerConfig> peers() const ABSL_LOCKS_EXCLUDED(peers_mu_) {
    absl::MutexLock lock(&peers_mu_);
    return peers_;
  }
  // What ParseGroupDefinition reads of the running configuration: the peers now and the
  // failure-detector defaults (a group created after a reload may have a new peer as member).
  Config GroupDefinitionContext() const;
  // The acl of a group made by CreateGroup (any thread; null: deleted).
  void SetCreatedGroupAcl(const std::string& group, std::shared_ptr<const AclConfig> acl) {
    policy_.SetCreatedGroupAcl(group, std::move(acl));
  }
  // The port metrics.listen bound (0 when off).
  int metrics_port() const { return http_ ? http_->port() : 0; }

 private:
  // Re-evaluates the health status every kHealthPeriod until Shutdown.
  void MonitorLoop();
  // Monitor thread, every tls.reload_seconds: changed TLS files go to the raw TCP transport.
  void ReloadTlsFiles();
  // A reload's peers: added, moved to another address, removed (not while a group the node
  // runs names them). An error says why they are left for a restart.
  // `groups_removed`: the groups this reload stops (they do not keep a peer).
  absl::Status ReloadPeers(const Config& fresh, const std::vector<std::string>& groups_removed,
                           std::vector<std::string>* changes);
  void SetServing(bool serving, const std::string& why);
  // A reload's limits: applied at once, but for those fixed at start (added to `*ignored`).
  void ReloadLimits(const LimitsConfig& fresh, std::vector<std::string>* ignored);

  // Shared with the Node (one copy of the configuration in the daemon).
  const std::shared_ptr<const Config> config_owner_;
  const Config& config_;
  std::vector<std::unique_ptr<DaemonPart>> parts_;
  // The groups started by reloads (Reload's thread only); those of the file at start are in
  // config_ (not copied here: memory per group, issue 7).
  std::map<std::string, GroupConfig> added_groups_;
  // The limits the node runs with: config_.limits, then what reloads applied (Reload's thread
  // only; ReloadLimits).
  LimitsConfig running_limits_ = config_.limits;
  // Groups a reload removed (stopped here; their names come back at a restart).
  std::set<std::string, std::less<>> removed_groups_;
  AccessPolicy policy_;
  // The peers now: config_.peers, then each reload's (ReloadPeers); read by the metrics.
  mutable absl::Mutex peers_mu_;
  std::vector<PeerConfig> peers_ ABSL_GUARDED_BY(peers_mu_);
  // What gRPC's certificate provider reads; declared before everything that holds gRPC
  // credentials, so it outlives them.
  PublishedTls published_tls_;
  // tls.crl_dir: the CRLs the gRPC ports check new connections against (null without one).
  std::shared_ptr<RevocationSource> peer_revocations_, client_revocations_;
  std::unique_ptr<PeerTransport> transport_;  // gRPC streams or raw TCP (peer_transport)
  TcpTransport* tcp_transport_ = nullptr;      // transport_ when it is raw TCP
  GrpcTransport* grpc_transport_ = nullptr;    // transport_ when it is gRPC
  std::unique_ptr<TlsFiles> tls_files_;        // with tls: the files (monitor thread after start)
  uint64_t tls_checked_ms_ = 0;                // monitor thread
  std::unique_ptr<Node> node_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<ApiService> api_;
  std::unique_ptr<LocalApi> local_api_;  // listen.local (null when off)
  std::unique_ptr<grpc::Server> peer_server_;
  std::unique_ptr<grpc::Server> client_server_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<HttpServer> http_;
  InvocationMetrics invocation_metrics_;
  std::atomic<bool> serving_{true};
  // Reloads (SIGHUP, --watch-config): applied, refused (a broken file), and whether the last
  // applied one left changes for a restart.
  std::atomic<uint64_t> reloads_applied_{0};
  std::atomic<uint64_t> reloads_refused_{0};
  std::atomic<bool> restart_pending_{false};
  std::atomic<bool> last_reload_ok_{true};
  bool replacing_ = false;  // SetReplacing
  uint64_t incarnation_ = 0;           // set by Start (StatusReply)
  uint64_t previous_incarnation_ = 0;  // set by Start: incarnation_file's, 1 if unknown
  bool health_known_ = false;  // monitor thread only
  internal::SteadyNotification stop_monitor_;  // its waits measure the monotonic clock
  std::thread monitor_;
  uint64_t started_ms_ = 0;
  bool stopped_ = false;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_DAEMON_H_
