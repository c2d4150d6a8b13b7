// kv-nemesis's command line (tools/kv_nemesis.cc has the usage).
#ifndef COHORT_TOOLS_KV_NEMESIS_OPTIONS_H_
#define COHORT_TOOLS_KV_NEMESIS_OPTIONS_H_

#include <cstdint>
#include <string>

namespace cohort::kv_nemesis {

struct Options {
  int nodes = 3;
  int seconds = 10;
  int clients = 4;
  int keys = 4;
  int deadline_ms = 1000;
  uint64_t seed = 0;
  std::string dir;
  std::string cohortd;
  std::string log_level = "warn";
  std::string ordering = "consensus";  // the kv group's total order: consensus or sequencer
  // Clients 0..K-1 attach to one more daemon, n(N+1), which hosts no member of the group (never
  // faulted): their calls go from outside, alternately open (through a request manager) and
  // closed (to every member, one orders it).
  int outside_clients = 0;
  // "async": each operation goes through Client::InvokeAsync (InvokeFuture), its result taken by
  // the stub's helper thread and handed over by the callbacks thread, not by the caller;
  // "async-into": through Client::InvokeAsyncInto, into an AsyncCall each client thread keeps.
  std::string calls = "sync";
  std::string netlab;      // non-empty: run on netlab hosts (see the top of tools/kv_nemesis.cc)
  std::string kv_servant;  // netlab: the kv-servant binary
  // "grpc": clients and (loopback) servants talk to their daemons over gRPC (InvokeStream, Serve)
  // instead of the local fast path, as clients and servants in other languages or on other hosts.
  std::string api = "local";
  // The daemons' peer_transport: tcp (raw TCP on the protocol thread) or grpc (the one TLS uses).
  std::string peer_transport = "tcp";
  // Non-empty: a directory made by tools/make-test-ca; the daemons use TLS (mutual between
  // them), checked against the name "cohort" (a SAN of its certificates, on loopback and netlab).
  std::string tls_ca;
  // "rejoin": each servant is made with Servant::RejoinAfterDaemonRestart and outlives its
  // daemon's kill -9 (an application process that stays up while its daemon restarts): the same
  // servant registers again, its store reset and given the group's state, no new servant. With
  // --netlab the kill then ends the daemon only, not the host's kv-servant process.
  std::string servants = "fresh";
  // "on": the kv group is durable (README "Durable groups"): each servant keeps its store on disk
  // (Servant::KeepStateIn), and the nemesis also cuts the power: every daemon and servant killed
  // -9 at once, all started again (loopback only).
  std::string durable = "off";
};

// Fills `o` from the command line (the seed from the clock, cohortd and kv-servant beside argv[0]
// unless given). False when it is bad: the error or the usage has been printed (exit 2).
bool ParseOptions(int argc, char** argv, Options* o);

}  // namespace cohort::kv_nemesis

#endif  // COHORT_TOOLS_KV_NEMESIS_OPTIONS_H_
