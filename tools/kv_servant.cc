// kv-servant: one replica of the replicated key-value store (tools/kv_store.h documents the
// methods put / get / cas, their payloads, answers and errors, and the state transfer format).
// Attaches to one daemon and serves a group (default `kv`) until SIGINT or SIGTERM, or until the
// daemon ends the stream (exit 1: a supervisor restarts it, and it gets the state again); with
// --rejoin yes it outlives its daemon's restart instead (Servant::RejoinAfterDaemonRestart) and
// prints "registered again" each time. With --keep-state FILE it keeps the store on disk for a
// durable group (Servant::KeepStateIn, README "Durable groups"). With --views-to FILE it appends
// each view it gets to FILE (tools/kv_store.h).
//   kv-servant --daemon 127.0.0.1:7201 [--group kv] [--name kv-1] [--rejoin yes]
//              [--keep-state FILE] [--views-to FILE]
// Then, e.g.:  cohortctl invoke kv put color=blue --mode majority
//              cohortctl invoke kv cas "color blue green" --mode majority
#include <csignal>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"
#include "invocation/servant.h"
#include "tools/kv_store.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  std::string daemon = "127.0.0.1:7201", group = "kv", name = "kv", keep_state, views_to;
  bool rejoin = false;
  cohort::ConnectOptions options;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kv-servant: %s needs a value\n", flag.c_str());
      return 2;
    }
    if (flag == "--daemon") daemon = argv[i + 1];
    else if (flag == "--group") group = argv[i + 1];
    else if (flag == "--name") name = argv[i + 1];
    else if (flag == "--ca-file") options.ca_file = argv[i + 1];
    else if (flag == "--server-name") options.server_name = argv[i + 1];
    else if (flag == "--keep-state") keep_state = argv[i + 1];
    else if (flag == "--views-to") views_to = argv[i + 1];
    else if (flag == "--rejoin" && (std::string(argv[i + 1]) == "yes" ||
                                    std::string(argv[i + 1]) == "no")) {
      rejoin = std::string(argv[i + 1]) == "yes";
    } else {
      std::fprintf(stderr, "kv-servant: unknown flag %s\n"
                   "usage: kv-servant --daemon HOST:PORT [--group kv] [--name NAME]"
                   " [--ca-file CA.pem [--server-name NAME]] [--rejoin yes|no]"
                   " [--keep-state FILE] [--views-to FILE]\n",
                   flag.c_str());
      return 2;
    }
  }
  options.client_name = name;
  auto servant = cohort::Servant::Create(daemon, group, options);
  if (!servant.ok()) {
    std::fprintf(stderr, "kv-servant: %s\n", servant.status().ToString().c_str());
    return 1;
  }
  cohort::kv::KvStore store;
  store.RegisterWith(servant->get(), views_to);
  if (rejoin) (*servant)->RejoinAfterDaemonRestart();
  if (!keep_state.empty()) (*servant)->KeepStateIn(keep_state);
  if (absl::Status status = (*servant)->Start(); !status.ok()) {
    std::fprintf(stderr, "kv-servant: %s\n", status.ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::printf("kv-servant %s serving group %s at %s\n", name.c_str(), group.c_str(), daemon.c_str());
  std::fflush(stdout);
  absl::Status why;
  uint64_t rejoins = 0;
  while (!g_stop && !(*servant)->Ended(&why)) {
    absl::SleepFor(absl::Milliseconds(50));
    for (; rejoins < (*servant)->rejoins(); ++rejoins) {
      std::printf("kv-servant %s registered again (its daemon restarted)\n", name.c_str());
      std::fflush(stdout);
    }
  }
  (*servant)->Stop();
  if (!g_stop) {
    std::fprintf(stderr, "kv-servant %s: the daemon ended the stream: %s\n", name.c_str(),
                 why.ToString().c_str());
    return 1;
  }
  return 0;
}
