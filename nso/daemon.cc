#include "nso/daemon.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <set>
#include <string_view>
#include <tuple>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nso/framing.h"
#include "nso/group_event_log.h"
#include "nso/grpc_revocation.h"
#include "nso/heap_count.h"
#include "nso/keepalive.h"
#include "nso/incarnation_file.h"
#include "nso/logging.h"
#include "nso/tls_files.h"

namespace cohort::nso {
namespace {

// The gRPC message size limit of the API and peer servers: frames carry batches of payloads, so
// the payload limit twice plus room for headers.
int MaxMessageBytes(const Config& config) {
  return static_cast<int>(
      std::min<int64_t>(config.limits.max_payload_bytes * 2 + (1 << 20), INT32_MAX));
}

constexpr uint32_t kTickMs = 2;
constexpr size_t kLoopQueueMax = 1 << 20;
constexpr absl::Duration kHealthPeriod = absl::Milliseconds(100);
constexpr char kApiService[] = "cohort.api.Cohort";
constexpr char kAdminService[] = "cohort.api.Admin";
// Always SERVING while the process runs (a liveness probe must not restart a daemon merely for
// being in a minority partition; readiness uses "" or cohort.api.Cohort).
constexpr char kLivenessService[] = "cohort.liveness";

// `max_message_bytes`: the longest message it reads. What it sends is not bounded: a result holds
// a reply from each member, each up to limits.max_payload_bytes (the gRPC default, or the receive
// bound, once failed every wait-for-all call over 9 MiB of replies: "Sent message larger than
// max").
std::unique_ptr<grpc::Server> StartServer(const std::string& address,
                                          std::shared_ptr<grpc::ServerCredentials> credentials,
                                          std::vector<grpc::Service*> services,
                                          int max_message_bytes) {
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second daemon (or any process of the same user) on the
  // same address would then start too and take half of the connections, peers' and clients' alike
  // (seen: two test daemons given one port served it together; calls and peer frames went to
  // either at random). One address, one daemon: the second fails to start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int bound_port = 0;
  builder.AddListeningPort(address, std::move(credentials), &bound_port);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(-1);
  AddKeepalive(&builder);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) return nullptr;
  return server;
}

// The credentials of the two servers and of the peer dialer (all insecure without tls).
struct Credentials {
  std::shared_ptr<grpc::ServerCredentials> peer_server;
  std::shared_ptr<grpc::ServerCredentials> client_server;
  std::shared_ptr<grpc::ChannelCredentials> peer_dialer;
  std::shared_ptr<TlsContext> peer_tls;  // the raw TCP peer transport's (nullptr: plaintext)
};

// The stores of tls.crl_dir for the gRPC ports, from the texts `files` last validated: the
// peers' CA and the applications' CA, each with the CRLs.
absl::Status MakeRevocationStores(const TlsFiles& files,
                                  std::shared_ptr<const RevocationStore>* peers,
                                  std::shared_ptr<const RevocationStore>* applications) {
  absl::StatusOr<std::shared_ptr<const RevocationStore>> peer =
      RevocationStore::Create("tls.ca_file", files.ca_pem(), files.crl_pem());
  if (!peer.ok()) return peer.status();
  absl::StatusOr<std::shared_ptr<const RevocationStore>> application =
      RevocationStore::Create("auth.client_ca_file", files.client_ca_pem(), files.crl_pem());
  if (!application.ok()) return application.status();
  *peers = *std::move(peer);
  *applications = *std::move(application);
  return absl::OkStatus();
}

absl::StatusOr<Credentials> MakeCredentials(const TlsConfig& tls, bool client_certificates,
                                            TlsFiles* files,
                                            PublishedTls* published,
                                            std::shared_ptr<RevocationSource>* peer_revocations,
                                            std::shared_ptr<RevocationSource>* client_revocations) {
  Credentials credentials;
  if (!tls.enabled) {
    credentials.peer_server = grpc::InsecureServerCredentials();
    credentials.client_server = grpc::InsecureServerCredentials();
    credentials.peer_dialer = grpc::InsecureChannelCredentials();
    return credentials;
  }
  // Read once here, so that a missing or broken file stops the daemon at start, naming it.
  absl::StatusOr<std::shared_ptr<TlsContext>> peer_tls = files->Load();
  if (!peer_tls.ok()) return peer_tls.status();
  credentials.peer_tls = *std::move(peer_tls);
  // gRPC reads the validated texts (nso/tls_files.h, PublishedTls) again every reload_seconds:
  // new connections use a rotated certificate once the monitor thread published it.
  if (absl::Status done = published->Publish(files->ca_pem(), files->cert_pem(), files->key_pem(),
                                             files->client_ca_pem());
      !done.ok()) {
    return done;
  }
  namespace tls_api = grpc::experimental;
  // tls.crl_dir: our own verifier on every gRPC port, fed the CRLs TlsFiles re-reads. (gRPC's
  // crl_directory keeps a CRL once it has read it: a revocation would need a restart there.)
  if (!tls.crl_dir.empty()) {
    std::shared_ptr<const RevocationStore> peers, applications;
    if (absl::Status made = MakeRevocationStores(*files, &peers, &applications); !made.ok()) {
      return made;
    }
    *peer_revocations = std::make_shared<RevocationSource>(std::move(peers));
    *client_revocations = std::make_shared<RevocationSource>(std::move(applications));
  }
  const bool revocations = *peer_revocations != nullptr;
  auto provider = std::make_shared<tls_api::FileWatcherCertificateProvider>(
      published->identity_path(), published->identity_path(), published->ca_path(),
      static_cast<unsigned int>(tls.reload_seconds));
  // Peers: mutual TLS, a dialer without a certificate from the CA is refused in the handshake.
  tls_api::TlsServerCredentialsOptions peer(provider);
  peer.watch_root_certs();
  peer.watch_identity_key_cert_pairs();
  peer.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (revocations) peer.set_certificate_verifier(MakeRevocationVerifier(*peer_revocations, false));
  credentials.peer_server = grpc::experimental::TlsServerCredentials(peer);
  // Applications: server-side TLS; they authenticate with bearer tokens (auth.tokens) or with
  // client certificates from the CA (auth.client_certificates). A certificate is requested, not
  // required, in the handshake: the health service and reflection stay open to probes, and a call
  // of the API without one gets UNAUTHENTICATED naming what is missing (AccessPolicy).
  // The applications' CA (auth.client_ca_file, else tls.ca_file) has a provider of its own, so
  // that a certificate of that CA is never taken on the peer port.
  std::shared_ptr<tls_api::CertificateProviderInterface> client_provider = provider;
  if (client_certificates) {
    client_provider = std::make_shared<tls_api::FileWatcherCertificateProvider>(
        published->identity_path(), published->identity_path(), published->client_ca_path(),
        static_cast<unsigned int>(tls.reload_seconds));
  }
  tls_api::TlsServerCredentialsOptions client(client_provider);
  client.watch_identity_key_cert_pairs();
  if (client_certificates) {
    client.watch_root_certs();
    client.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    client.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  if (revocations && client_certificates) {
    client.set_certificate_verifier(MakeRevocationVerifier(*client_revocations, false));
  }
  credentials.client_server = grpc::experimental::TlsServerCredentials(client);
  // The dialer checks the acceptor's certificate against the CA and the peer's name (the host of
  // its address, or tls.server_name through the target name override).
  tls_api::TlsChannelCredentialsOptions dialer;
  dialer.set_certificate_provider(provider);
  dialer.watch_root_certs();
  dialer.watch_identity_key_cert_pairs();
  dialer.set_verify_server_certs(true);
  dialer.set_certificate_verifier(
      revocations ? MakeRevocationVerifier(*peer_revocations, /*check_host=*/true)
                  : std::make_shared<tls_api::HostNameCertificateVerifier>());
  credentials.peer_dialer = grpc::experimental::TlsCredentials(dialer);
  return credentials;
}

// On the protocol thread.
NodeSnapshot TakeSnapshot(const Node& node) {
  NodeSnapshot snapshot;
  snapshot.pending_calls = node.pending_calls();
  snapshot.unordered_requests = node.unordered_requests();
  snapshot.unordered_bytes = node.unordered_bytes();
  snapshot.nsos_attached = node.attached_nsos();
  snapshot.nsos_detached_idle = node.nsos_detached_idle();
  snapshot.nsos_detached = node.nsos_detached();
  snapshot.clients_retired = node.clients_retired();
  snapshot.clients_not_retired = node.clients_not_retired();
  snapshot.outside_unordered = node.outside_unordered();
  snapshot.outside_resent = node.outside_counters().resent;
  snapshot.outside_given_up = node.outside_counters().given_up;
  snapshot.standby_takeovers = node.outside_counters().standby_takeovers;
  snapshot.fifo_held = node.outside_counters().fifo_held;
  snapshot.fifo_gave_up = node.outside_counters().fifo_gave_up;
  snapshot.fifo_asked = node.outside_counters().fifo_asked;
  snapshot.fifo_refused = node.outside_counters().fifo_refused;
  snapshot.servants_cut_off = node.servants_cut_off();
  snapshot.managers_silent = node.outside_counters().managers_silent;
  const Node::RemovedGroupTotals& removed = node.removed_group_totals();
  snapshot.removed_groups.counters = removed.counters;
  snapshot.removed_groups.has_order_counters = true;
  snapshot.removed_groups.order = removed.order;
  snapshot.removed_groups.times_behind = removed.times_behind;
  for (const Group* group : node.groups()) {
    GroupSnapshot g;
    g.name = group->name();
    g.ordering = std::string(ToString(group->config().ordering));
    g.durable = group->config().durable;
    g.resuming = group->durable_claim();
    g.view_id = group->view_id();
    g.is_member = group->is_member();
    g.configured_members = static_cast<uint32_t>(group->config().members.size());
    g.trusted = group->trusted_count();
    g.flow_held = group->held_count();
    g.flow_holding = group->flow_holding();
    g.servants_behind = group->servants_behind();
    g.times_behind = group->times_behind();
    std::tie(g.reply_cache_calls, g.reply_cache_bytes) = node.reply_cache_size(group->name());
    absl::StatusOr<GroupInfo> info = node.GroupDetails(group->name());
    if (info.ok()) {
      for (const GroupInfo::MemberInfo& m : info->members) {
        g.members.push_back({m.name, m.node, m.suspected});
      }
    }
    g.counters = group->counters();
    if (std::optional<consensus::OrderCounters> order = group->order_counters()) {
      g.has_order_counters = true;
      g.order = *order;
    }
    snapshot.groups.push_back(std::move(g));
  }
  return snapshot;
}

}  // namespace

Daemon::Daemon(Config config)
    : config_owner_(std::make_shared<const Config>(std::move(config))), config_(*config_owner_) {
  absl::MutexLock lock(&peers_mu_);
  peers_ = config_.peers;
}

Daemon::~Daemon() { Shutdown(); }

absl::Status Daemon::Start() {
  started_ms_ = MonotonicNowMs();
  if (config_.tls.enabled) {
    tls_files_ = std::make_unique<TlsFiles>(config_.tls.ca_file, config_.tls.cert_file,
                                            config_.tls.key_file, config_.client_ca_file,
                                            config_.tls.crl_dir);
  }
  absl::StatusOr<Credentials> credentials =
      MakeCredentials(config_.tls, config_.client_certificates, tls_files_.get(), &published_tls_,
                      &peer_revocations_, &client_revocations_);
  if (!credentials.ok()) return credentials.status();
  if (!config_.tls.enabled) {
    // The loader refuses a config without a tls section: plaintext only with insecure: true.
    Log("daemon")->warn(
        "running without TLS: tls.insecure is true; peer and client traffic is plaintext and "
        "unauthenticated between daemons (production configs set tls.ca_file, tls.cert_file, "
        "tls.key_file)");
  }
  policy_.Update(config_);
  if (config_.client_certificates) {
    Log("daemon")->info("auth.client_certificates: applications are named by their TLS client "
                        "certificates{}", config_.tokens.empty() ? "" : " or bearer tokens");
  } else if (config_.tokens.empty()) {
    Log("daemon")->info("no auth.tokens: application calls are not authenticated");
  }
  loop_ = std::make_unique<EventLoop>(kTickMs, kLoopQueueMax,
                                      [this](uint64_t now_ms) { node_->Tick(now_ms); });
  GrpcTransport* grpc_transport = nullptr;
  std::function<void()> transport_flush;
  if (config_.peer_transport == "tcp") {
    // Raw TCP on the protocol thread: envelopes arrive on it, no hand-off (issue 7).
    TcpTransportOptions options;
    options.self = config_.node_id;
    options.cluster = config_.cluster;
    options.listen = config_.listen_peer;
    for (const PeerConfig& peer : config_.peers) {
      if (peer.id != config_.node_id) options.peer_addresses[peer.id] = peer.address;
    }
    options.tls = credentials->peer_tls;  // mutual TLS on the same thread, when configured
    options.tls_server_name = config_.tls.server_name;
    auto tcp = std::make_unique<TcpTransport>(options, loop_.get());
    if (absl::Status listening = tcp->Listen(); !listening.ok()) return listening;
    TcpTransport* raw = tcp.get();
    tcp_transport_ = raw;
    transport_flush = [raw] { raw->Flush(); };
    tcp->SetReceiver(
        [this](NodeId from, wire::Envelope&& envelope) { node_->Receive(from, envelope); });
    tcp->SetLinkWatcher([this](NodeId peer, bool up) { node_->LinkChanged(peer, up); });
    transport_ = std::move(tcp);
  } else {
    GrpcTransportOptions options;
    options.self = config_.node_id;
    options.cluster = config_.cluster;
    for (const PeerConfig& peer : config_.peers) {
      if (peer.id != config_.node_id) options.peer_addresses[peer.id] = peer.address;
    }
    options.credentials = credentials->peer_dialer;
    options.ssl_target_name = config_.tls.server_name;
    options.frame_bytes_max =
        std::min<size_t>(kFrameBytesTarget, static_cast<size_t>(MaxMessageBytes(config_)) / 2);
    auto grpc = std::make_unique<GrpcTransport>(options, loop_.get());
    // The writes of a batch of protocol work start on the protocol thread, as it ends (issue 7).
    GrpcTransport* raw = grpc.get();
    grpc_transport_ = raw;
    transport_flush = [raw] { raw->Flush(); };
    grpc->SetReceiver(
        [this](NodeId from, wire::Envelope&& envelope) { node_->Receive(from, envelope); });
    grpc->SetLinkWatcher([this](NodeId peer, bool up) { node_->LinkChanged(peer, up); });
    grpc_transport = grpc.get();
    transport_ = std::move(grpc);
  }
  uint64_t incarnation = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  uint64_t previous = 0;
  if (config_.incarnation_file.empty()) {
    Log("daemon")->info(
        "no incarnation_file: a restart of this daemon passes for a first start to a member that "
        "never heard its earlier process (production configs set one, README)");
  } else {
    absl::StatusOr<Incarnations> kept = NextIncarnation(config_.incarnation_file, incarnation);
    if (!kept.ok()) return kept.status();
    incarnation = kept->current;
    previous = kept->previous;
  }
  // --replacing with no last start known: an earlier process of unknown incarnation (every real
  // one, the wall clock in microseconds, is greater than 1).
  const bool unknown_previous = replacing_ && previous == 0;
  if (unknown_previous) previous = 1;
  incarnation_ = incarnation;
  previous_incarnation_ = previous;
  node_ = std::make_unique<Node>(config_owner_, transport_.get(), incarnation, MonotonicNowMs());
  if (previous != 0) {
    node_->RestartedFrom(previous);
    if (unknown_previous) {
      Log("daemon")->info("restarted: this start is incarnation {}, the last is unknown "
                          "(--replacing: a node whose incarnation_file was lost)",
                          incarnation);
    } else {
      Log("daemon")->info("restarted: this start is incarnation {}, the last was {} ({})",
                          incarnation, previous, config_.incarnation_file);
    }
  }
  api_ = std::make_unique<ApiService>(node_.get(), loop_.get(), &policy_);
  api_->set_metrics(&invocation_metrics_);
  const int max_message_bytes = MaxMessageBytes(config_);
  if (config_.listen_local != "off") {
    LocalApiOptions local;
    local.listen = config_.listen_local;
    local.node_name = config_.node;
    local.frame_bytes_max = static_cast<size_t>(max_message_bytes);
    local_api_ = std::make_unique<LocalApi>(local, node_.get(), loop_.get(), &policy_,
                                            &invocation_metrics_);
    if (absl::Status listening = local_api_->Listen(); !listening.ok()) return listening;
    LocalApi* raw = local_api_.get();
    loop_->AddFlush([raw] { raw->Flush(); });
    api_->set_local_api(local_api_->address(), local_api_->key());
  }
  // The peer write goes after the local one: a servant's delivery and a caller's reply are on the
  // call's critical path, and a loopback TCP write runs the receiver's softirq (~12 us) on this
  // thread. An A/B of 5 run pairs gave lower p50 in 23 of 26 rows (BENCHMARKS.md, session 19).
  loop_->AddFlush(transport_flush);
  admin_ = std::make_unique<AdminService>(
      [this] { return Snapshot(); },
      [this](api::StatusReply* reply) {
        reply->set_node_name(config_.node);
        reply->set_node(config_.node_id);
        reply->set_cluster(config_.cluster);
        reply->set_serving(serving_);
        reply->set_queue_depth(loop_->QueueDepth());
        reply->set_uptime_ms(MonotonicNowMs() - started_ms_);
        reply->set_incarnation(incarnation_);
        reply->set_previous_incarnation(previous_incarnation_);
        reply->set_heap_allocations(HeapAllocations().value_or(0));
        reply->set_listen_peer(config_.listen_peer);
        reply->set_listen_client(config_.listen_client);
        reply->set_metrics_listen(config_.metrics_listen);
        for (const PeerConfig& peer : peers()) {
          if (peer.id == config_.node_id) continue;
          api::PeerState* state = reply->add_peers();
          state->set_name(peer.name);
          state->set_node(peer.id);
          state->set_address(peer.address);
          state->set_connected(transport_->Connected(peer.id));
        }
      },
      [this](uint64_t timeout_ms) { Drain(timeout_ms); }, &policy_);
  // The standard grpc.health.v1.Health service and server reflection (grpcurl list/describe).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const char* hint = config_.tls.enabled ? " (address in use, or a bad tls key/certificate?)"
                                          : " (address in use?)";
  if (grpc_transport != nullptr) {
    peer_server_ = StartServer(config_.listen_peer, credentials->peer_server, {grpc_transport},
                               static_cast<int>(kPeerFrameBytesMax));
    if (!peer_server_) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on listen.peer ", config_.listen_peer, hint));
    }
  }
  client_server_ = StartServer(config_.listen_client, credentials->client_server,
                               {api_.get(), admin_.get()}, max_message_bytes);
  if (!client_server_) {
    if (peer_server_) peer_server_->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on listen.client ", config_.listen_client, hint));
  }
  if (!config_.metrics_listen.empty()) {
    http_ = std::make_unique<HttpServer>([this](const std::string& path) -> HttpResponse {
      if (path == "/metrics") {
        return {200, "text/plain; version=0.0.4; charset=utf-8", RenderMetrics()};
      }
      if (path == "/healthz") {
        return serving_ ? HttpResponse{200, "text/plain; charset=utf-8", "SERVING\n"}
                        : HttpResponse{503, "text/plain; charset=utf-8", "NOT_SERVING\n"};
      }
      return {404, "text/plain; charset=utf-8", "not found: try /metrics or /healthz\n"};
    });
    absl::Status http_started = http_->Start(config_.metrics_listen);
    if (!http_started.ok()) {
      http_.reset();
      client_server_->Shutdown();
      if (peer_server_) peer_server_->Shutdown();
      return http_started;
    }
  }
  if (grpc::HealthCheckServiceInterface* health = client_server_->GetHealthCheckService()) {
    health->SetServingStatus(kLivenessService, true);
  }
  loop_->Start();
  transport_->Start();
  if (local_api_) local_api_->Start();
  monitor_ = std::thread([this] { MonitorLoop(); });
  Log("daemon")->info("node {} (id {}) serving peers on {} and clients on {}{}{}{}", config_.node,
                      config_.node_id, config_.listen_peer, config_.listen_client,
                      local_api_ ? absl::StrCat(" (local fast path ", local_api_->address(), ")")
                                 : std::string(),
                      config_.tls.enabled ? " (TLS, mutual TLS between peers)"
                      : config_.peer_transport == "tcp" ? " (plaintext, raw TCP between peers)"
                                                        : " (plaintext)",
                      config_.metrics_listen.empty()
                          ? std::string()
                          : absl::StrCat(", metrics on http://", config_.metrics_listen,
                                         "/metrics"));
  return absl::OkStatus();
}

absl::StatusOr<NodeSnapshot> Daemon::Snapshot(absl::Duration timeout) {
  auto promise = std::make_shared<std::promise<NodeSnapshot>>();
  std::future<NodeSnapshot> future = promise->get_future();
  Node* node = node_.get();
  if (node == nullptr || !loop_->Post([node, promise] { promise->set_value(TakeSnapshot(*node)); })) {
    return absl::UnavailableError("daemon overloaded or shutting down");
  }
  if (future.wait_for(absl::ToChronoMilliseconds(timeout)) != std::future_status::ready) {
    return absl::UnavailableError("the protocol thread did not answer in time");
  }
  return future.get();
}

void Daemon::SetServing(bool serving, const std::string& why) {
  if (health_known_ && serving == serving_) return;
  health_known_ = true;
  serving_ = serving;
  if (grpc::HealthCheckServiceInterface* health = client_server_->GetHealthCheckService()) {
    // Not SetServingStatus(bool): that would also set kLivenessService.
    health->SetServingStatus("", serving);
    health->SetServingStatus(kApiService, serving);
    health->SetServingStatus(kAdminService, serving);
  }
  if (serving) {
    Log("daemon")->info("health: SERVING");
  } else {
    Log("daemon")->warn("health: NOT_SERVING ({})", why);
  }
}

void Daemon::ReloadTlsFiles() {
  if (!tls_files_) return;
  const uint64_t now_ms = MonotonicNowMs();
  if (now_ms < tls_checked_ms_ + static_cast<uint64_t>(config_.tls.reload_seconds) * 1000) return;
  tls_checked_ms_ = now_ms;
  auto reloaded = tls_files_->Reload();
  if (!reloaded) return;
  if (!reloaded->ok()) {
    Log("daemon")->warn("TLS files changed but not usable, still using the previous ones: {}",
                        std::string(reloaded->status().message()));
    return;
  }
  if (absl::Status published =
          published_tls_.Publish(tls_files_->ca_pem(), tls_files_->cert_pem(),
                                 tls_files_->key_pem(), tls_files_->client_ca_pem());
      !published.ok()) {
    Log("daemon")->warn("TLS files changed but could not be handed to gRPC: {}",
                        std::string(published.message()));
  }
  if (peer_revocations_ != nullptr) {
    std::shared_ptr<const RevocationStore> peers, applications;
    if (absl::Status made = MakeRevocationStores(*tls_files_, &peers, &applications); made.ok()) {
      peer_revocations_->Set(std::move(peers));
      client_revocations_->Set(std::move(applications));
    } else {
      Log("daemon")->warn("TLS files changed but the gRPC ports keep their CRLs: {}",
                          std::string(made.message()));
    }
  }
  if (TcpTransport* tcp = tcp_transport_) {
    loop_->Post([tcp, tls = **std::move(reloaded)]() mutable { tcp->SetTls(std::move(tls)); });
  }
  Log("daemon")->info("TLS files changed: new connections use them (gRPC within {} s)",
                      config_.tls.reload_seconds);
}

void Daemon::MonitorLoop() {
  while (!stop_monitor_.WaitForNotificationWithTimeout(kHealthPeriod)) {
    ReloadTlsFiles();
    absl::StatusOr<std::vector<std::string>> minority = MinorityGroups();
    if (!minority.ok()) continue;  // overloaded: keep the last verdict
    // Five named, the rest counted: one line, also with 2,000 groups in a minority.
    SetServing(minority->empty(),
               absl::StrCat("no majority in group ",
                            NamedAndMore(*minority, minority->size(), ", group ", " groups")));
  }
}

absl::StatusOr<std::vector<std::string>> Daemon::MinorityGroups() {
  // Only what the health check needs, from the groups alone, on the protocol thread: a full
  // snapshot every 100 ms (Snapshot) made a few dozen strings and vectors per group (issue 7).
  auto promise = std::make_shared<std::promise<std::vector<std::string>>>();
  std::future<std::vector<std::string>> future = promise->get_future();
  Node* node = node_.get();
  auto find = [node, promise] {
    std::vector<std::string> minority;
    node->ForEachGroup([&minority](const Group& group) {
      const uint32_t configured = static_cast<uint32_t>(group.config().members.size());
      const uint32_t trusted = static_cast<uint32_t>(group.trusted_count());
      // As GroupSnapshot::HasMajority. The daemons' own group only matters to CreateGroup,
      // which says so itself.
      if (group.is_member() && trusted < configured / 2 + 1 && !IsDaemonsOwnGroup(group.name())) {
        minority.push_back(absl::StrCat(group.name(), " trusts ", trusted, " of ", configured));
      }
    });
    promise->set_value(std::move(minority));
  };
  if (node == nullptr || !loop_->Post(std::move(find))) {
    return absl::UnavailableError("daemon overloaded or shutting down");
  }
  if (future.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
    return absl::UnavailableError("the protocol thread did not answer in time");
  }
  return future.get();
}

std::string Daemon::RenderMetrics() {
  PromWriter out;
  out.Family("cohort_up", "gauge", "1 while the daemon runs.");
  out.Sample("cohort_up", {{"node", config_.node}, {"cluster", config_.cluster}}, 1);
  out.Family("cohort_serving", "gauge",
             "1 when every hosted group has a trusted majority (the gRPC health status).");
  out.Sample("cohort_serving", {}, serving_ ? 1 : 0);
  out.Family("cohort_uptime_seconds", "gauge", "Seconds since the daemon started.");
  out.Sample("cohort_uptime_seconds", {}, (MonotonicNowMs() - started_ms_) / 1000.0);
  out.Family("cohort_config_reloads_total", "counter",
             "Configuration reloads (SIGHUP, --watch-config): applied, or refused (the file did "
             "not parse or named another node; the running configuration was kept).");
  out.Sample("cohort_config_reloads_total", {{"result", "applied"}},
             static_cast<double>(reloads_applied_.load()));
  out.Sample("cohort_config_reloads_total", {{"result", "refused"}},
             static_cast<double>(reloads_refused_.load()));
  out.Family("cohort_config_last_reload_ok", "gauge",
             "0 while the last reload was refused (alert: the file on disk is not what runs).");
  out.Sample("cohort_config_last_reload_ok", {}, last_reload_ok_ ? 1 : 0);
  out.Family("cohort_config_restart_pending", "gauge",
             "1 when the last applied reload had changes that wait for a restart (logged).");
  out.Sample("cohort_config_restart_pending", {}, restart_pending_ ? 1 : 0);
  if (std::optional<uint64_t> allocations = HeapAllocations()) {
    out.Family("cohort_heap_allocations_total", "counter",
               "C++ heap allocations (operator new) since the daemon started; per call, the hot "
               "path's count (BENCHMARKS.md).");
    out.Sample("cohort_heap_allocations_total", {}, static_cast<double>(*allocations));
  }
  out.Family("cohort_event_loop_queue_depth", "gauge",
             "Tasks waiting for the protocol thread.");
  out.Sample("cohort_event_loop_queue_depth", {}, static_cast<double>(loop_->QueueDepth()));
  invocation_metrics_.Render(&out);
  const TransportCounters& t = transport_->counters();
  out.Family("cohort_peer_frames_sent_total", "counter", "Frames sent to peer daemons.");
  out.Sample("cohort_peer_frames_sent_total", {}, static_cast<double>(t.frames_sent.load()));
  out.Family("cohort_peer_envelopes_sent_total", "counter", "Envelopes sent to peer daemons.");
  out.Sample("cohort_peer_envelopes_sent_total", {}, static_cast<double>(t.envelopes_sent.load()));
  out.Family("cohort_peer_envelopes_received_total", "counter",
             "Envelopes received from peer daemons.");
  out.Sample("cohort_peer_envelopes_received_total", {},
             static_cast<double>(t.envelopes_received.load()));
  out.Family("cohort_peer_envelopes_rejected_total", "counter",
             "Envelopes refused (wrong cluster, version or sender).");
  out.Sample("cohort_peer_envelopes_rejected_total", {},
             static_cast<double>(t.envelopes_rejected.load()));
  out.Family("cohort_peer_bytes_sent_total", "counter", "Bytes sent to peer daemons.");
  out.Sample("cohort_peer_bytes_sent_total", {}, static_cast<double>(t.bytes_sent.load()));
  out.Family("cohort_peer_connected", "gauge", "1 while the stream to the peer is up.");
  for (const PeerConfig& peer : peers()) {
    if (peer.id == config_.node_id) continue;
    out.Sample("cohort_peer_connected", {{"peer", peer.name}},
               transport_->Connected(peer.id) ? 1 : 0);
  }
  absl::StatusOr<NodeSnapshot> snapshot = Snapshot();
  out.Family("cohort_snapshot_ok", "gauge",
             "1 when the protocol thread answered the scrape in time (group families follow).");
  out.Sample("cohort_snapshot_ok", {}, snapshot.ok() ? 1 : 0);
  if (snapshot.ok()) RenderSnapshot(*snapshot, &out, config_.metrics_per_group);
  return out.text();
}

void Daemon::Drain(uint64_t timeout_ms) {
  if (!loop_ || stopped_) return;
  auto still_member = [this]() {
    auto promise = std::make_shared<std::promise<bool>>();
    std::future<bool> result = promise->get_future();
    bool posted = loop_->Post([this, promise] {
      bool member = false;
      for (const Group* group : node_->groups()) member = member || group->is_member();
      promise->set_value(member);
    });
    return posted && result.get();
  };
  auto leave_all = [this] {
    loop_->Post([this] {
      for (const Group* group : node_->groups()) {
        if (!group->is_member()) continue;
        absl::Status left = node_->LeaveGroup(group->name());
        Log("daemon")->info("drain: leaving group {}: {}", group->name(), left.ToString());
      }
    });
  };
  leave_all();
  uint64_t deadline_ms = MonotonicNowMs() + timeout_ms;
  uint64_t again_ms = MonotonicNowMs() + 250;
  while (MonotonicNowMs() < deadline_ms && still_member()) {
    // A leave proposed without a majority in sight (members still suspected at start-up) is
    // refused; ask again until it goes through.
    if (MonotonicNowMs() >= again_ms) {
      leave_all();
      again_ms = MonotonicNowMs() + 250;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Config Daemon::GroupDefinitionContext() const {
  Config context;
  context.node = config_.node;
  context.node_id = config_.node_id;
  context.peers = peers();
  context.failure_detector = config_.failure_detector;
  return context;
}

void Daemon::SetGroupCatalog(GroupCatalog* catalog) {
  if (api_) api_->set_group_catalog(catalog);
}

absl::Status Daemon::CreateGroup(const api::CreateGroupRequest& request) {
  if (!api_) return absl::UnavailableError("daemon not started");
  return api_->CreateGroupInProcess(request);
}

absl::Status Daemon::DeleteGroup(const std::string& group) {
  if (!api_) return absl::UnavailableError("daemon not started");
  return api_->DeleteGroupInProcess(group);
}

void Daemon::Shutdown() {
  if (stopped_ || !loop_) return;
  SetGroupCatalog(nullptr);
  parts_.clear();  // before the node they use
  stopped_ = true;
  Log("daemon")->info("node {} shutting down", config_.node);
  stop_monitor_.Notify();
  if (monitor_.joinable()) monitor_.join();
  if (client_server_) {
    if (grpc::HealthCheckServiceInterface* health = client_server_->GetHealthCheckService()) {
      health->Shutdown();  // every service NOT_SERVING: load balancers drain us first
    }
  }
  if (http_) http_->Stop();
  auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  // The protocol thread finishes its queue and stops; then the Node answers the calls still in
  // flight with CANCELLED, so the servers below have no handler left waiting for it.
  loop_->Stop();
  node_.reset();
  if (local_api_) local_api_->Shutdown();  // clients see the socket close: their calls fail
  if (client_server_) client_server_->Shutdown(deadline);
  transport_->Shutdown();
  if (peer_server_) peer_server_->Shutdown(deadline);
}

}  // namespace cohort::nso
