// The documented configuration schema, printed by `cohortd --help`. Keep in step with config.h
// and the defaults there (config_test checks that a minimal file gets exactly these defaults).
#include <string>

#include "nso/config.h"

namespace cohort::nso {

std::string ConfigHelp() {
  return R"(Configuration file (YAML). Defaults in [brackets]; unknown keys are errors.

node: n1                      # required: this daemon's name, one of peers[].name
cluster: cohort               # [cohort] cluster name; peers with another cluster name are refused
listen:                       # required
  peer: 127.0.0.1:7101        # required: host:port for daemon-to-daemon traffic
  client: 127.0.0.1:7201      # required: host:port for the application gRPC API
  local: auto                 # [auto] the local fast path for clients on this host: auto (an
                              # abstract Unix socket), off, or an absolute socket file path
peers:                        # required, non-empty: every daemon of the cluster, this one included
  - {name: n1, id: 1, address: 127.0.0.1:7101}
                              # name: [A-Za-z0-9_.-]{1,64}, unique
                              # id: 1..65535, unique
                              # address: host:port, that peer's listen.peer, unique
                              # a reload (SIGHUP, --watch-config) adds, moves and removes peers
incarnation_file: /var/lib/cohort/n1.incarnation
                              # [none] this daemon's last start, kept on disk (fsync'd at each
                              #   start): a restart then says it is one, and a member that never
                              #   heard the earlier process re-adds it with the state instead of
                              #   taking it for that process (RELIABILITY.md). Set it in production
log_level: info               # [info] trace|debug|info|warn|error|off
log_format: text              # [text] text|json
peer_transport: auto          # [auto] auto|grpc|tcp: daemon-to-daemon traffic over raw TCP on the
                              #   protocol thread (fastest) or gRPC streams; both mutual TLS with
                              #   a tls section; auto = tcp with IPv4 peer addresses, else grpc
failure_detector:
  suspect_timeout_ms: 50      # [50] aggressive timeout: consensus moves on (004 section 5)
  exclude_timeout_ms: 10000   # [10000] conservative timeout: member removed from the view;
                              #   must be greater than suspect_timeout_ms
  heartbeat_interval_ms: 10   # [10] must be less than suspect_timeout_ms
  fail_fast_after_ms: 1000    # [1000] a call the suspected members make unmeetable is refused
                              #   (UNAVAILABLE) once they are silent this long, at least the
                              #   suspect timeout; sooner, it waits (0: refuse on suspicion)
  suspect_on_disconnect: true # [true] a member whose peer connection closes (its process died)
                              #   is suspected at once, not after suspect_timeout_ms; off where
                              #   something between daemons drops connections that are alive
consensus:
  optimisation_1: true        # [true] 004 section 4.1
  optimisation_2: true        # [true] 004 section 4.2
  optimisation_3: true        # [true] 004 section 4.3 (n <= 3: decide on accepting; the
                              #   sequencer ordering's members commit on accepting too)
  round_delay_ms: 20          # [20] the delay d of optimisation 1 (0 allowed)
  batch_max_messages: 1024    # [1024] most messages ordered by one consensus instance
  batch_max_bytes: 1048576    # [1048576 = 1 MiB] most payload bytes ordered by one instance (or
                              #   sent in one sequencer message); a larger message goes alone
limits:                       # SIGHUP applies them at once, but servant_backlog_bytes,
                              #   default_deadline_ms and max_payload_bytes above its start value
  max_payload_bytes: 4194304  # [4194304 = 4 MiB] largest request or reply payload (at most
                              #   67108864 = 64 MiB)
  default_deadline_ms: 5000   # [5000] deadline of a call that sets none
  max_nsos: 1000000           # [1000000] most NSOs (client sessions) this daemon holds
  max_unordered_requests: 65536  # [65536] requests of one client not yet ordered; more are
                              #   refused RESOURCE_EXHAUSTED until the group catches up (the
                              #   C++ and Python clients wait for room: backpressure_wait)
  max_unordered_bytes: 67108864  # [67108864 = 64 MiB] their payload bytes (likewise; a
                              #   client's only request in flight always passes)
  servant_backlog_bytes: 8388608  # [8388608 = 8 MiB] flow control: a member whose servants have
                              #   this many bytes of deliveries unread makes the group's new
                              #   requests wait (their callers get backpressure) until they are
                              #   down to half; 0: off (a servant slower than its group is then
                              #   cut off at servant_cutoff_bytes)
  servant_stall_ms: 2000      # [2000] a servant that reads nothing for this long with deliveries
                              #   unread is stuck: the group no longer waits for it
  servant_cutoff_bytes: 67108864  # [67108864 = 64 MiB] a stuck servant (above) with this many
                              #   bytes of deliveries unread is cut off (with flow control off,
                              #   any servant): its stream ends UNAVAILABLE; with no other
                              #   servant its daemon leaves the group and a servant registering
                              #   again rejoins with the state; > servant_backlog_bytes
groups:                       # [] groups this cluster hosts
  - name: counter             # required: [A-Za-z0-9_.-]{1,64}, unique
    members: [n1, n2, n3]     # required, non-empty: distinct peer names
    ordering: consensus       # [consensus] consensus|sequencer
    liveness: lively          # [lively] lively|event
    silence_ms: 10            # [heartbeat_interval_ms] time-silence period (003 section 3):
                              #   "I am alive" after this long without sending; < suspect_timeout_ms
    style: closed             # [closed] open|closed: may non-members call the group directly
    default_mode: all         # [all] one_way|first|majority|all: replies a call waits for
    suspect_timeout_ms: 50    # [failure_detector.suspect_timeout_ms] per-group override
    exclude_timeout_ms: 10000 # [failure_detector.exclude_timeout_ms] per-group override
    durable: false            # [false] the servants keep their state on disk
                              #   (Servant::KeepStateIn); when every member restarted, the group
                              #   resumes from the most advanced state kept (needs
                              #   incarnation_file; README "Durable groups")
    acl:                      # [absent = every right to every caller] who may do what, by
                              #   auth.tokens[].name, a client certificate's common name
                              #   (auth.client_certificates) or "*" (anyone); not listed: nobody
      join: [ops]             # JoinGroup, LeaveGroup, Serve (host a replica of the group)
      invoke: ["*"]           # Invoke, Multicast, GroupDetails
      admin: [ops]            # Admin.Drain (needs admin on every group this daemon hosts)
metrics:                      # [absent = off] Prometheus text metrics over HTTP
  listen: 127.0.0.1:9101      # required in the section: host:port serving GET /metrics and /healthz
  per_group: true             # false: each group family summed over the groups (no group label)
tls:                          # required: the TLS files, or {insecure: true}; a file without a
                              #   tls section is refused (exit code 2)
  ca_file: /etc/cohort/ca.pem       # required: CA that signs every daemon's certificate
  cert_file: /etc/cohort/node.pem   # required: this daemon's certificate (server and peer client)
  key_file: /etc/cohort/node.key    # required: its private key
  server_name: cohort               # [host of the address] name peer certificates are checked for
  reload_seconds: 60                # [60] the files are read again this often; new connections
                                    #   use changed ones (rotation without restart; 1..86400)
  crl_dir: /etc/cohort/crl          # [none] revocation lists (PEM) as an OpenSSL hashed
                                    #   directory (openssl rehash): a certificate they list is
                                    #   refused, a daemon's or an application's
  # insecure: true                  # instead of the files: plaintext on purpose, logged as a
                                    #   warning at start (tests, demos, a trusted loopback)
                              # peers use mutual TLS: a daemon without a certificate from ca_file
                              #   cannot connect; applications verify the daemon with ca_file
auth:                         # [absent = no authentication] how applications prove who they are
  tokens:                     # each call carries metadata "authorization: Bearer <token>"
    - {name: app1, token_file: /etc/cohort/app1.token}   # or token: "..." inline
                              # name: [A-Za-z0-9_.-]{1,64}, unique; tokens unique
                              # [required unless client_certificates: true]
  client_certificates: false  # true: every API call needs a TLS client certificate from
                              #   tls.ca_file; its common name names the application in acls (a
                              #   token sent too must name the same one); needs the tls files;
                              #   applied at start only
  client_ca_file: /etc/cohort/apps-ca.pem  # [tls.ca_file] the CA of those certificates, if
                              #   not the daemons' (reloaded with the tls files)
  certificate_name: common_name  # [common_name] which name of a client certificate names the
                              #   application: common_name, dns or uri (its first DNS or URI
                              #   subject alternative name, e.g. spiffe://cluster/ns/app);
                              #   applied at start only
dynamic_groups:               # [absent = off] CreateGroup / DeleteGroup at run time: the
                              #   daemons order each in their own group cohort.system (every
                              #   peer) and all start (stop) the group as if it were in groups[]
                              #   (names "cohort.*" are the daemons' own)
  create: ["*"]               # [["*"]] who may create and delete: application names or "*"
                              #   (deleting also needs the group's acl.admin, if it has one)
  state_file: /var/lib/cohort/groups  # [none] keeps the created groups on disk (written and
                              #   fsync'd at each creation and deletion): after a restart of
                              #   every daemon they come back from a majority's files

SIGHUP re-reads the file and applies auth.tokens, groups[].acl and timeouts, starts groups added
to it and stops groups removed from it; a broken file is logged and ignored.

Durations (*_ms) are whole milliseconds in 1..86400000 unless noted; counts are in 1..2147483647.
Every error names the file, the line and the key, e.g.
  config.yaml:12: groups[1].ordering: must be "consensus" or "sequencer", got "paxos"
)";
}

}  // namespace cohort::nso
