// Daemon::Reload: the configuration file read again (SIGHUP, --watch-config) applied to the
// running daemon: groups added and removed, peers added, moved and removed, auth tokens, acls,
// failure-detector timeouts and most limits at once; what cannot change while it runs (a group's
// members or order, TLS files' paths, the listening addresses, the limits fixed at start)
// logged as waiting for a restart.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nso/daemon.h"
#include "nso/logging.h"

namespace cohort::nso {

void Daemon::Reload(const Config& fresh) {
  std::vector<std::string> ignored;
  const FailureDetectorConfig& a = config_.failure_detector;
  const FailureDetectorConfig& b = fresh.failure_detector;
  if (a.heartbeat_interval_ms != b.heartbeat_interval_ms) {
    ignored.push_back("failure_detector.heartbeat_interval_ms");
  }
  if (a.suspect_on_disconnect != b.suspect_on_disconnect) {
    ignored.push_back("failure_detector.suspect_on_disconnect");
  }
  // Groups: a new one starts at once, on every daemon whose file gains it (at view 1 with its
  // members, as at a start: its members form it as their daemons reload). A removed one stops
  // here at once (Node::RemoveGroup: its calls end, its servants are told); its name comes back
  // only with a restart (the group would start again at view 1 while other daemons may still run
  // the old one under the same name and incarnation). A group changed (other than its acl and
  // timeouts) waits for a restart.
  std::map<std::string_view, const GroupConfig*> running;
  for (const GroupConfig& group : config_.groups) {
    if (!removed_groups_.count(group.name)) running.emplace(group.name, &group);
  }
  for (const auto& [name, group] : added_groups_) running.emplace(name, &group);
  std::vector<std::string> added;
  std::vector<std::string> changed;
  for (const GroupConfig& y : fresh.groups) {
    auto it = running.find(y.name);
    if (it == running.end() && removed_groups_.count(y.name)) {
      changed.push_back(y.name + " (removed by an earlier reload)");
      continue;
    }
    if (it == running.end()) {
      added.push_back(y.name);
      continue;
    }
    const GroupConfig& x = *it->second;
    if (x.members != y.members || x.ordering != y.ordering || x.liveness != y.liveness ||
        x.style != y.style || x.default_mode != y.default_mode || x.durable != y.durable) {
      changed.push_back(y.name);
    }
  }
  std::set<std::string_view> kept_names;
  for (const GroupConfig& group : fresh.groups) kept_names.insert(group.name);
  std::vector<std::string> removed;
  for (const auto& [name, group] : running) {
    if (kept_names.count(name)) continue;
    if (IsDaemonsOwnGroup(std::string(name))) {  // dynamic_groups was dropped: at a restart
      changed.push_back(std::string(name) + " (removed)");
    } else {
      removed.emplace_back(name);
    }
  }
  if (!changed.empty()) ignored.push_back("groups " + absl::StrJoin(changed, ", "));
  for (const std::string& name : removed) {
    added_groups_.erase(name);
    removed_groups_.insert(name);
  }
  std::vector<std::string> peer_changes;
  if (absl::Status peers = ReloadPeers(fresh, removed, &peer_changes); !peers.ok()) {
    ignored.push_back(absl::StrCat("peers (", peers.message(), ")"));
  } else if (!peer_changes.empty()) {
    Log("daemon")->info("reload: peers {}", absl::StrJoin(peer_changes, ", "));
  }
  if (!removed.empty()) {
    loop_->Post([this, removed] {
      std::vector<std::string> stopped;
      for (const std::string& name : removed) {
        if (node_->RemoveGroup(name, 0, "was removed from this daemon's configuration")) {
          stopped.push_back(name);
        }
      }
      Log("daemon")->info("reload: stopped group(s) {} (removed from the file)",
                          absl::StrJoin(stopped, ", "));
    });
  }
  // One copy of the file for the protocol thread's two tasks below.
  auto kept = std::make_shared<const Config>(fresh);
  if (!added.empty()) {
    for (const std::string& name : added) added_groups_.emplace(name, *fresh.FindGroup(name));
    loop_->Post([this, kept, added] {
      std::vector<std::string> started =
          node_->AddGroups(*kept, added, " (added by a configuration reload)");
      if (!started.empty()) {
        Log("daemon")->info("reload: started group(s) {}", absl::StrJoin(started, ", "));
      }
    });
  }
  // Failure-detector timeouts and silence periods apply at once, on the protocol thread.
  loop_->Post([this, kept] { node_->ApplyTimeouts(*kept); });
  const TlsConfig& t = config_.tls;
  const TlsConfig& u = fresh.tls;
  if (t.enabled != u.enabled || t.ca_file != u.ca_file || t.cert_file != u.cert_file ||
      t.key_file != u.key_file || t.server_name != u.server_name) {
    ignored.push_back("tls");
  }
  if (config_.listen_peer != fresh.listen_peer || config_.listen_client != fresh.listen_client ||
      config_.metrics_listen != fresh.metrics_listen ||
      config_.metrics_per_group != fresh.metrics_per_group) {
    ignored.push_back("listen/metrics");
  }
  if (config_.incarnation_file != fresh.incarnation_file) ignored.push_back("incarnation_file");
  ReloadLimits(fresh.limits, &ignored);
  // The client port's TLS settings fix it at start (AccessPolicy keeps the first value).
  if (config_.client_certificates != fresh.client_certificates) {
    ignored.push_back("auth.client_certificates");
  }
  policy_.Update(fresh);
  size_t acls = 0;
  for (const GroupConfig& group : fresh.groups) acls += group.acl ? 1 : 0;
  Log("daemon")->info("reload: applied {} auth token(s) and {} group acl(s)", fresh.tokens.size(),
                      acls);
  if (!ignored.empty()) {
    Log("daemon")->warn("reload: changes to {} are not applied until a restart",
                        absl::StrJoin(ignored, ", "));
  }
  restart_pending_ = !ignored.empty();
  last_reload_ok_ = true;
  reloads_applied_++;
}

void Daemon::ReloadLimits(const LimitsConfig& fresh, std::vector<std::string>* ignored) {
  const LimitsConfig& start = config_.limits;
  LimitsConfig applied = fresh;
  // Fixed at start: the groups' flow control is made with servant_backlog_bytes, the requests'
  // causal barrier with default_deadline_ms, and the gRPC ports' largest message with
  // max_payload_bytes (it may come down, and back up to its value at start).
  if (fresh.servant_backlog_bytes != start.servant_backlog_bytes) {
    ignored->push_back("limits.servant_backlog_bytes");
    applied.servant_backlog_bytes = start.servant_backlog_bytes;
  }
  if (fresh.default_deadline_ms != start.default_deadline_ms) {
    ignored->push_back("limits.default_deadline_ms");
    applied.default_deadline_ms = start.default_deadline_ms;
  }
  if (fresh.max_payload_bytes > start.max_payload_bytes) {
    ignored->push_back(absl::StrCat("limits.max_payload_bytes above its value at start (",
                                    start.max_payload_bytes, ")"));
    applied.max_payload_bytes = start.max_payload_bytes;
  }
  // The file's check (servant_cutoff_bytes above servant_backlog_bytes) against the running
  // backlog.
  if (applied.servant_backlog_bytes != 0 &&
      applied.servant_cutoff_bytes <= applied.servant_backlog_bytes) {
    ignored->push_back(absl::StrCat("limits.servant_cutoff_bytes (not above the running "
                                    "servant_backlog_bytes, ", applied.servant_backlog_bytes, ")"));
    applied.servant_cutoff_bytes = running_limits_.servant_cutoff_bytes;
  }
  if (applied == running_limits_) return;
  running_limits_ = applied;
  loop_->Post([this, applied] { node_->ApplyLimits(applied); });
  Log("daemon")->info("reload: limits applied");
}

void Daemon::ReloadRefused() {
  last_reload_ok_ = false;
  reloads_refused_++;
}

absl::Status Daemon::ReloadPeers(const Config& fresh,
                                 const std::vector<std::string>& groups_removed,
                                 std::vector<std::string>* changes) {
  const std::vector<PeerConfig> current = peers();
  std::map<std::string, const PeerConfig*> before, after;
  for (const PeerConfig& peer : current) before[peer.name] = &peer;
  for (const PeerConfig& peer : fresh.peers) after[peer.name] = &peer;
  std::vector<std::string> added, moved, removed;
  for (const auto& [name, peer] : after) {
    auto it = before.find(name);
    if (it == before.end()) {
      added.push_back(absl::StrCat(name, " (id ", peer->id, ") at ", peer->address));
    } else if (it->second->id != peer->id) {
      return absl::FailedPreconditionError(absl::StrCat("the id of ", name, " changed"));
    } else if (it->second->address != peer->address) {
      if (peer->id == config_.node_id) {
        return absl::FailedPreconditionError(
            absl::StrCat("this daemon's own address changed (listen.peer stays ",
                         config_.listen_peer, ")"));
      }
      moved.push_back(absl::StrCat(name, " to ", peer->address));
    }
  }
  for (const auto& [name, peer] : before) {
    if (after.count(name) == 0) removed.push_back(name);
  }
  if (!removed.empty()) {
    // A peer still named by a group the node runs (its configured members, a group made by
    // CreateGroup, or a view it joined from outside them) stays: asked on the protocol thread.
    absl::Status kept = RunOnLoop(loop_.get(), [&]() -> absl::Status {
      for (const std::string& peer : removed) {
        for (const std::string& group : node_->GroupsNaming(peer)) {
          // (A group this reload removes stops right after: it does not count.)
          if (std::find(groups_removed.begin(), groups_removed.end(), group) ==
              groups_removed.end()) {
            return absl::FailedPreconditionError(
                absl::StrCat(peer, " is still a member of group ", group));
          }
        }
      }
      return absl::OkStatus();
    });
    if (!kept.ok()) return kept;
  }
  if (added.empty() && moved.empty() && removed.empty()) return absl::OkStatus();
  std::map<NodeId, std::string> addresses;
  for (const PeerConfig& peer : fresh.peers) {
    if (peer.id != config_.node_id) addresses[peer.id] = peer.address;
  }
  {
    absl::MutexLock lock(&peers_mu_);
    peers_ = fresh.peers;
  }
  TcpTransport* tcp = tcp_transport_;
  GrpcTransport* grpc = grpc_transport_;
  const bool own_group = config_.dynamic_groups && (!added.empty() || !removed.empty());
  loop_->Post([this, tcp, grpc, addresses, own_group, peers = fresh.peers]() mutable {
    if (tcp != nullptr) tcp->SetPeers(addresses);
    if (grpc != nullptr) grpc->SetPeers(addresses);
    std::vector<NodeId> ids;
    for (const PeerConfig& peer : peers) ids.push_back(peer.id);
    node_->SetPeers(std::move(peers));
    // The daemons' own group has every peer as a member: a view change adds the new ones (each
    // gets the directory as its state once it runs) and takes out those removed. Each member
    // proposes it; the first to be ordered applies.
    if (own_group) {
      absl::Status proposed = node_->ProposeMembers(kSystemGroup, ids);
      if (!proposed.ok()) {
        Log("daemon")->warn("reload: the daemons' own group keeps its view for now: {}",
                            std::string(proposed.message()));
      }
    }
  });
  if (!added.empty()) changes->push_back("added " + absl::StrJoin(added, ", "));
  if (!moved.empty()) changes->push_back("moved " + absl::StrJoin(moved, ", "));
  if (!removed.empty()) changes->push_back("removed " + absl::StrJoin(removed, ", "));
  return absl::OkStatus();
}

}  // namespace cohort::nso
