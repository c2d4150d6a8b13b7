// The daemon's configuration: the YAML file cohortd reads at start-up, loaded into plain structs.
//
// Every field below has the default the schema documents (ConfigHelp()), so a value-initialised
// Config is the configuration of a file that sets only the required keys (tests may build one in
// code). Loading checks types, ranges and cross-references; every error names the file, the line
// and the key path, e.g.
//   config.yaml:12: groups[1].ordering: must be "consensus" or "sequencer", got "paxos"
#ifndef COHORT_NSO_CONFIG_H_
#define COHORT_NSO_CONFIG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cohort::nso {

// One daemon of the cluster (peers[]).
struct PeerConfig {
  std::string name;     // unique, [A-Za-z0-9_.-]{1,64}
  uint32_t id = 0;      // unique, 1..65535
  std::string address;  // host:port, that peer's listen.peer
};

// The peer of `peers` named `name` / with id `id`; nullptr when there is none.
const PeerConfig* FindPeerIn(const std::vector<PeerConfig>& peers, std::string_view name);
const PeerConfig* FindPeerByIdIn(const std::vector<PeerConfig>& peers, uint32_t id);

// groups[].acl: which applications (auth.tokens[].name, or "*" for anyone) may do what with a
// group. A group without an acl allows everything to every authenticated caller; inside an acl a
// right that is not listed is denied to everyone.
struct AclConfig {
  bool present = false;
  std::vector<std::string> join;    // JoinGroup, LeaveGroup, Serve (host a replica)
  std::vector<std::string> invoke;  // Invoke, Multicast, GroupDetails
  std::vector<std::string> admin;   // Admin.Drain (needs admin on every group this daemon hosts)
};

// One object group the cluster hosts (groups[]).
struct GroupConfig {
  // How the group orders requests (003, 004).
  enum class Ordering { kConsensus, kSequencer };
  // lively: members keep exchanging messages; event: only when requests arrive (003 section 3).
  enum class Liveness { kLively, kEvent };
  // open: non-members may call the group; closed: only through a member.
  enum class Style { kOpen, kClosed };
  // How many replies a client call waits for unless the call says otherwise.
  enum class DefaultMode { kOneWay, kFirst, kMajority, kAll };

  std::string name;                  // unique, [A-Za-z0-9_.-]{1,64}
  std::vector<std::string> members;  // non-empty, distinct peer names
  Ordering ordering = Ordering::kConsensus;
  Liveness liveness = Liveness::kLively;
  int64_t silence_ms = 10;  // time-silence period (003 section 3), < suspect_timeout_ms;
                            // defaults to failure_detector.heartbeat_interval_ms
  Style style = Style::kClosed;
  DefaultMode default_mode = DefaultMode::kAll;
  // Per-group failure detector timeouts; the loader fills in failure_detector's values when the
  // file does not override them. suspect_timeout_ms < exclude_timeout_ms.
  int64_t suspect_timeout_ms = 50;
  int64_t exclude_timeout_ms = 10000;
  // null: no acl section (shared, not copied: most groups have none, memory, issue 7).
  std::shared_ptr<const AclConfig> acl;
  // 0 for a group of the YAML; for a group made by CreateGroup, its definition's number in the
  // group directory (nso/group_directory.h), so a name deleted and created again is a new group
  // (wire.proto, Envelope.group_incarnation).
  uint64_t incarnation = 0;
  // The servants keep their state on disk (Servant::KeepStateIn), and a restart of every member
  // resumes from the most advanced state they kept instead of starting afresh (nso/node_durable.cc;
  // needs the daemon's incarnation_file, which tells such a restart).
  bool durable = false;
};

// Two timeouts: an aggressive one on which consensus moves on, a conservative one on which the
// member is removed from the view (004 section 5).
struct FailureDetectorConfig {
  int64_t suspect_timeout_ms = 50;     // > heartbeat_interval_ms, < exclude_timeout_ms
  int64_t exclude_timeout_ms = 10000;  // > suspect_timeout_ms
  int64_t heartbeat_interval_ms = 10;  // > 0
  // A call that the suspected members make unmeetable is refused (UNAVAILABLE) only once they
  // have been silent this long (at least the group's suspect_timeout_ms); before that it is
  // submitted and waits, so a member late under load for a moment refuses nothing. 0: refuse
  // as soon as they are suspected.
  int64_t fail_fast_after_ms = 1000;  // >= 0
  // A member whose peer connection closes (its process died: the kernel sends a FIN or a reset)
  // is suspected at once rather than after suspect_timeout_ms of silence (FailureDetector::
  // LinkDown). Off: only silence counts (a proxy between daemons that drops idle connections).
  bool suspect_on_disconnect = true;
};

struct ConsensusConfig {
  bool optimisation_1 = true;  // 004 section 4.1
  bool optimisation_2 = true;  // 004 section 4.2
  bool optimisation_3 = true;  // 004 section 4.3
  int64_t round_delay_ms = 20;  // the delay d of optimisation 1, >= 0
  int64_t batch_max_messages = 1024;  // >= 1
  int64_t batch_max_bytes = 1 << 20;  // >= 1: payload bytes per consensus (a larger one alone)
};

inline constexpr int64_t kMaxPayloadBytes = 64 << 20;

struct LimitsConfig {
  // 1..kMaxPayloadBytes: a request crosses the daemons in one peer frame, and an open group's
  // wait-for-all replies in one (nso/framing.h, kPeerFrameBytesMax: 256 MiB).
  int64_t max_payload_bytes = 4 * 1024 * 1024;
  int64_t default_deadline_ms = 5000;           // > 0
  int64_t max_nsos = 1000000;                   // >= 1
  // An NSO attached over the API (a Client) that has not been used for this long, and has no
  // servant and no request not yet ordered, is detached (0: never). Without it, every Attach of a
  // client that went away stayed for the daemon's lifetime, and after max_nsos of them the daemon
  // refused every new client. A Client that comes back later attaches again by itself (the
  // daemon answers "unknown NSO").
  int64_t nso_idle_ms = 600000;                 // >= 0
  // Requests (calls, one-way sends, multicasts) of one client NSO not yet known ordered; beyond
  // it a new one is refused RESOURCE_EXHAUSTED (backpressure: a flood faster than the group
  // orders must not grow the daemon's memory without bound).
  int64_t max_unordered_requests = 65536;  // >= 1
  int64_t max_unordered_bytes = 64 << 20;   // >= 1; their payload bytes (one request always passes)
  // Flow control from the slowest servant (nso/group_flow.h): a member whose servants have this
  // many bytes of deliveries unread makes the group's new requests wait until they are down to
  // half (0: off; a servant slower than its group is then cut off at servant_cutoff_bytes).
  int64_t servant_backlog_bytes = 8 << 20;  // >= 0
  // A servant that reads nothing for this long with deliveries unread is stuck: the group no
  // longer waits for it (it is cut off at servant_cutoff_bytes unread).
  int64_t servant_stall_ms = 2000;          // >= 1
  // A servant with this many bytes of deliveries unread (on any path: the local fast path, a gRPC
  // stream, an embedded node's queue) that has read nothing for servant_stall_ms (with flow
  // control off: at once) is cut off: its stream ends UNAVAILABLE, what waited for it is dropped,
  // and its daemon leaves the group (a servant registering again rejoins with the state). The bound on what a daemon queues for a servant that does not read; one that
  // reads is bounded by flow control (a burst, the requests held for it, may pass this).
  int64_t servant_cutoff_bytes = 64 << 20;  // >= 1

  // A reload applies them at once but for those fixed at start (Daemon::ReloadLimits).
  bool operator==(const LimitsConfig& other) const {
    return max_payload_bytes == other.max_payload_bytes &&
           default_deadline_ms == other.default_deadline_ms && max_nsos == other.max_nsos &&
           nso_idle_ms == other.nso_idle_ms &&
           max_unordered_requests == other.max_unordered_requests &&
           max_unordered_bytes == other.max_unordered_bytes &&
           servant_backlog_bytes == other.servant_backlog_bytes &&
           servant_stall_ms == other.servant_stall_ms &&
           servant_cutoff_bytes == other.servant_cutoff_bytes;
  }
  bool operator!=(const LimitsConfig& other) const { return !(*this == other); }
};

// tls: gRPC SSL credentials for both ports. Peers use mutual TLS (each side presents cert_file and
// verifies the other against ca_file); applications verify the daemon against ca_file.
enum class CertificateNameField { kCommonName, kDns, kUri };

struct TlsConfig {
  bool enabled = false;           // false: insecure: true (warned at start); the section is required
  bool explicit_insecure = false;  // insecure: true was written
  std::string ca_file;    // PEM CA bundle: verifies peers (both ways)
  std::string cert_file;  // PEM certificate chain of this daemon (server and peer client)
  std::string key_file;   // PEM private key of cert_file
  std::string server_name;  // optional: the name peers' certificates are checked against
                            // instead of the host of peers[].address
  // The files are read again this often; changed, new connections use them (a rotated
  // certificate needs no restart). 1..86400.
  int64_t reload_seconds = 60;
  // Optional: a directory of certificate revocation lists (PEM), named as OpenSSL's hashed
  // directories are (`openssl rehash DIR`). A certificate its issuer's CRL lists is refused in
  // every handshake (peers, applications); an issuer without a CRL there is not checked. The raw
  // TCP transport reads it again with the files; gRPC's ports keep a CRL they loaded (a restart).
  std::string crl_dir;
};

// auth.tokens[]: an application's bearer token (metadata "authorization: Bearer <token>").
struct TokenConfig {
  std::string name;   // [A-Za-z0-9_.-]{1,64}, unique; used in groups[].acl
  std::string token;  // the secret (read from token_file when given)
  std::string token_file;
};

struct Config {
  std::string node;          // this daemon's name, one of peers[].name
  uint32_t node_id = 0;      // resolved: the id of peers[] entry named `node`
  std::string cluster = "cohort";  // peers with another cluster name are refused
  std::string listen_peer;    // host:port for daemon-to-daemon traffic
  std::string listen_client;  // host:port for the application gRPC API
  // listen.local: the local fast path for clients and servants on this host (nso/local_api.h):
  // "auto" (an abstract Unix socket named after the daemon), "off", or a socket file path.
  std::string listen_local = "auto";
  std::vector<PeerConfig> peers;  // every daemon of the cluster, this one included
  std::string log_level = "info";  // trace|debug|info|warn|error|off (for ConfigureLogging)
  std::string log_format = "text";  // text|json
  // peer_transport: how daemons talk to each other. grpc: one gRPC stream per pair (portable);
  // tcp: raw TCP served on the protocol thread (epoll, length-prefixed frames, no thread
  // hand-off, issue 7). Both do mutual TLS with a tls section. The YAML's auto (default) is
  // resolved by the loader: tcp with numeric IPv4 peer addresses, else grpc (tcp resolves
  // addresses on the protocol thread, where a DNS look-up would stall it).
  std::string peer_transport = "auto";
  FailureDetectorConfig failure_detector;
  ConsensusConfig consensus;
  LimitsConfig limits;
  std::vector<GroupConfig> groups;
  // metrics.listen: host:port of the Prometheus HTTP endpoint (GET /metrics); empty = off.
  std::string metrics_listen;
  // metrics.per_group: one series per group of each group family (default); false: those
  // families summed over the groups (a daemon hosting thousands of groups: 33 series a group).
  bool metrics_per_group = true;
  TlsConfig tls;
  // auth.tokens: empty = no authentication by token.
  std::vector<TokenConfig> tokens;
  // auth.client_certificates: every application call must come with a TLS client certificate
  // from tls.ca_file; its subject's common name is the application's name in groups[].acl (a
  // bearer token sent as well must name the same application). Needs the tls files.
  bool client_certificates = false;
  // auth.client_ca_file: the CA of applications' certificates, when not tls.ca_file (with
  // client_certificates; read and reloaded with the tls files).
  std::string client_ca_file;
  // auth.certificate_name: which name of a client certificate names the application: its
  // subject's common name (the default), or its first DNS or URI subject alternative name (for
  // certificates without a common name, such as cert-manager's or SPIFFE's). Applied at start.
  CertificateNameField certificate_name = CertificateNameField::kCommonName;
  // dynamic_groups: CreateGroup at run time (003 section 3: clients create groups). The daemons
  // order definitions in the system group kSystemGroup of every peer; `create` names who may
  // create (application names or "*").
  bool dynamic_groups = false;
  std::vector<std::string> dynamic_group_creators;
  // dynamic_groups.state_file: where this daemon keeps the created groups, so that they survive a
  // restart of every daemon ("": they live as long as some daemon runs).
  std::string dynamic_groups_state_file;
  // incarnation_file: where this daemon keeps its last start's incarnation, so that a restart
  // knows it restarted (nso/incarnation_file.h; "": not kept, a restart passes for a first start
  // to a member that never heard the earlier process). Applied at start.
  std::string incarnation_file;

  // nullptr when there is no such peer / group.
  const PeerConfig* FindPeer(std::string_view name) const;
  const PeerConfig* FindPeerById(uint32_t id) const;
  const GroupConfig* FindGroup(std::string_view name) const;
};

// The daemons' own group (dynamic_groups): every peer, consensus order, event-driven (no traffic
// while no group is being created). Applications may not use it.
inline constexpr char kSystemGroup[] = "cohort.system";
// Names starting with "cohort." are the daemons' own: no YAML group or CreateGroup may take one.
inline bool IsDaemonsOwnGroup(std::string_view name) { return name.rfind("cohort.", 0) == 0; }

// One group's definition for CreateGroup: the keys of a groups[] entry as a YAML map (built by
// GroupDefinitionYaml), checked as the loader checks groups[] against the running
// configuration's peers and failure detector, except that acl names are not checked against
// auth.tokens (every daemon must take or refuse a definition alike, whatever its tokens). Errors
// are InvalidArgument naming the key.
absl::StatusOr<GroupConfig> ParseGroupDefinition(const std::string& yaml, const Config& running);
// name and members, then the optional keys that are non-empty (durable: when true).
std::string GroupDefinitionYaml(const std::string& name, const std::vector<std::string>& members,
                                const std::string& ordering, const std::string& liveness,
                                const std::string& style, const std::string& default_mode,
                                const AclConfig* acl = nullptr, bool durable = false);

// Reads and checks the file at `path`. NotFoundError if it does not exist; otherwise every problem
// is an InvalidArgumentError "<path>:<line>: <key path>: <what is wrong>".
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

// Parses and checks YAML text; `file_name_for_errors` starts every error message.
absl::StatusOr<Config> ParseConfig(const std::string& yaml_text,
                                   const std::string& file_name_for_errors);

// The documented schema: every key, its meaning and its default (printed by cohortd --help).
std::string ConfigHelp();

// The YAML spelling of each enum value ("consensus", "one_way", ...).
std::string_view ToString(GroupConfig::Ordering ordering);
std::string_view ToString(GroupConfig::Liveness liveness);
std::string_view ToString(GroupConfig::Style style);
std::string_view ToString(GroupConfig::DefaultMode mode);

}  // namespace cohort::nso

#endif  // COHORT_NSO_CONFIG_H_
