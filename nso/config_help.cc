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
peers:                        # required, non-empty: every daemon of the cluster, this one included
  - {name: n1, id: 1, address: 127.0.0.1:7101}
                              # name: [A-Za-z0-9_.-]{1,64}, unique
                              # id: 1..65535, unique
                              # address: host:port, that peer's listen.peer, unique
log_level: info               # [info] trace|debug|info|warn|error|off
log_format: text              # [text] text|json
failure_detector:
  suspect_timeout_ms: 50      # [50] aggressive timeout: consensus moves on (004 section 5)
  exclude_timeout_ms: 10000   # [10000] conservative timeout: member removed from the view;
                              #   must be greater than suspect_timeout_ms
  heartbeat_interval_ms: 10   # [10] must be less than suspect_timeout_ms
consensus:
  optimisation_1: true        # [true] 004 section 4.1
  optimisation_2: true        # [true] 004 section 4.2
  optimisation_3: true        # [true] 004 section 4.3
  round_delay_ms: 20          # [20] the delay d of optimisation 1 (0 allowed)
  batch_max_messages: 1024    # [1024] most messages ordered by one consensus instance
limits:
  max_payload_bytes: 4194304  # [4194304 = 4 MiB] largest request or reply payload
  default_deadline_ms: 5000   # [5000] deadline of a call that sets none
  max_nsos: 1000000           # [1000000] most NSOs (client sessions) this daemon holds
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
metrics:                      # [absent = off] Prometheus text metrics over HTTP
  listen: 127.0.0.1:9101      # required in the section: host:port serving GET /metrics and /healthz

Durations (*_ms) are whole milliseconds in 1..86400000 unless noted; counts are in 1..2147483647.
Every error names the file, the line and the key, e.g.
  config.yaml:12: groups[1].ordering: must be "consensus" or "sequencer", got "paxos"
)";
}

}  // namespace cohort::nso
