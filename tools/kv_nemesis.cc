// kv-nemesis: records a history of the replicated key-value servant (tools/kv_store.h) under
// faults, for the linearizability checker tools/lincheck (Porcupine).
//
//   kv-nemesis --nodes 3 --seconds 10 --dir /tmp/run1 [--clients 4] [--keys 4] [--seed S]
//              [--deadline-ms 1000] [--cohortd PATH] [--log-level warn]
//              [--netlab ../shared/netlab/netlab [--kv-servant PATH]]
//
// It starts N cohortd daemons on loopback (ports picked by the kernel, one YAML per daemon in
// DIR, exclusion timeout 1000 ms), attaches one KvStore servant in this process to each daemon
// (group `kv`, consensus), and runs:
//   * client threads doing put / get / cas through the stub library (cohort::Client) with
//     wait-for-majority and a short deadline, each call against a random daemon that is up;
//   * a nemesis thread that, whenever the group is healthy (a wait-for-all get answered by all N
//     replicas), picks 1..(N-1)/2 daemons (fewer than half at once) and for each one: kill -9 then
//     restart after a while (the servant is re-attached; the daemon rejoins by a view change with
//     state transfer), or SIGSTOP past the exclusion timeout then SIGCONT (a host cut off: excluded,
//     then re-added with state transfer), or a short SIGSTOP (its messages delayed, suspected but
//     not excluded), or kills its servant only (the daemon stays up; a new servant attaches later
//     and gets the state); or it pauses.
//
// With --netlab PATH (root; PATH is ../shared/netlab/netlab) the daemons run on fake hosts made by
// netlab instead of loopback: host hK holds daemon nK and a kv-servant process attached to it
// (the servant beside its daemon, as in a deployment); host h(N+1) holds this driver's clients
// (the driver moves itself into that host's network namespace before it starts any thread). The
// nemesis then also cuts hosts off, partitions the daemons' hosts (a minority from a majority; the
// clients' host keeps its links) and adds delay, jitter and loss to hosts' links, and heals every
// fault before the next; kill -9 ends a host's daemon and servant together (a crashed machine).
// The lab (NETLAB_PREFIX, default kvnl<pid>; state in DIR/netlab) is removed at the end.
//
// Files in DIR: history.jsonl (one JSON line per client operation, format in tools/lincheck/
// main.go), schedule.log (every fault with its time in ms since the start), nK.yaml and nK.log.
// At the end it heals everything, waits for a healthy group, reads every key with wait-for-all
// (recorded in the history, so a lost acknowledged write makes it non-linearizable), checks that
// every replica holds the same map, and stops every daemon (children also die with this process:
// PR_SET_PDEATHSIG). Exit 0 when the run completed and the replicas agree, 1 otherwise, 2 for a
// bad command line.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>

#include "tools/kv_nemesis_options.h"
#include "tools/kv_nemesis_run.h"

int main(int argc, char** argv) {
  cohort::kv_nemesis::Options o;
  if (!cohort::kv_nemesis::ParseOptions(argc, argv, &o)) return 2;
  mkdir(o.dir.c_str(), 0755);
  signal(SIGPIPE, SIG_IGN);
  std::printf("kv-nemesis: seed %llu, ordering %s, dir %s\n",
              static_cast<unsigned long long>(o.seed), o.ordering.c_str(), o.dir.c_str());
  std::fflush(stdout);
  cohort::kv_nemesis::Run run(o);
  return run.Go();
}
