// cohortd: the Cohort replica daemon.  cohortd --config FILE.yaml
#include <malloc.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "invocation/steady_time.h"
#include "nso/config.h"
#include "nso/daemon.h"
#include "nso/group_directory.h"
#include "nso/logging.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_reload = 0;

void OnSignal(int) { g_stop = 1; }  // async-signal-safe: the main thread polls the flags
void OnHangup(int) { g_reload = 1; }

// The file's text ("" if it cannot be read): --watch-config compares it.
std::string FileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr char kUsage[] =
    "usage: cohortd --config FILE.yaml [--watch-config[=SECONDS]] [--replacing]\n"
    "       cohortd --check FILE.yaml   (validate the file and exit)\n"
    "       cohortd --help\n\n"
    "The Cohort replica daemon: hosts NewTop service objects for attached clients and the groups\n"
    "of the configuration file. Exit codes: 0 clean shutdown (SIGINT/SIGTERM), 1 runtime error,\n"
    "2 bad command line or configuration. SIGHUP re-reads the file and applies auth tokens,\n"
    "group ACLs, timeouts, added and removed groups and the peers (a file with errors is logged\n"
    "and ignored; what waits for a restart is logged). --watch-config looks at the file\n"
    "every SECONDS (2) and reloads it, as SIGHUP does, once two looks in a row read the same\n"
    "changed text (a Kubernetes ConfigMap mounted as a volume changes without a signal).\n"
    "--replacing: this node ran before on a machine now gone, with its incarnation_file: with\n"
    "no file here, the start is a restart of an unknown earlier process, not a first start\n"
    "(members that never heard that process then re-add this one with the state).\n\n"
    "Configuration file keys:\n\n";

// Each client takes a descriptor or two (its local fast path, its gRPC connection), each peer
// one: the usual soft limit of 1,024 open files would refuse clients long before memory runs out
// (100,000 attached NSOs fit in ~12 MB). Up to the hard limit, as servers do at start.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t was = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = was;
  }
  if (limit.rlim_cur < 4096) {
    cohort::nso::Log("daemon")->warn(
        "open files limited to {} (hard limit {}): each client takes one or two, each peer one; "
        "raise the hard limit (ulimit -Hn, systemd LimitNOFILE=) for more clients",
        static_cast<uint64_t>(limit.rlim_cur), static_cast<uint64_t>(limit.rlim_max));
  } else if (limit.rlim_cur != was) {
    cohort::nso::Log("daemon")->info("open files: soft limit raised from {} to {}",
                                     static_cast<uint64_t>(was),
                                     static_cast<uint64_t>(limit.rlim_cur));
  }
}

// SIGHUP, --watch-config: the file at `path` read again and applied, or refused naming why.
void ReloadFrom(const std::string& path, const std::string& node, cohort::nso::Daemon* daemon) {
  absl::StatusOr<cohort::nso::Config> fresh = cohort::nso::LoadConfigFile(path);
  if (!fresh.ok()) {
    cohort::nso::Log("daemon")->error("SIGHUP: reload failed, keeping the running config: {}",
                                      std::string(fresh.status().message()));
    daemon->ReloadRefused();
  } else if (fresh->node != node) {
    cohort::nso::Log("daemon")->error(
        "SIGHUP: reload failed, keeping the running config: node changed from {} to {}", node,
        fresh->node);
    daemon->ReloadRefused();
  } else {
    daemon->Reload(*fresh);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The runtime's locks are checked by clang's thread-safety analysis at build time; abseil's
  // run-time deadlock detector (on in Debian's build) costs a graph look-up per lock on the hot
  // path (seen in perf, issue 7).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string config_path;
  bool check_only = false;
  double watch_seconds = 0;  // --watch-config: 0 = off
  bool replacing = false;    // --replacing
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s%s", kUsage, cohort::nso::ConfigHelp().c_str());
      return 0;
    } else if ((arg == "--config" || arg == "--check") && i + 1 < argc) {
      check_only = arg == "--check";
      config_path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      config_path = arg.substr(strlen("--config="));
    } else if (arg == "--watch-config") {
      watch_seconds = 2;
    } else if (arg == "--replacing") {
      replacing = true;
    } else if (arg.rfind("--watch-config=", 0) == 0) {
      if (!absl::SimpleAtod(arg.substr(strlen("--watch-config=")), &watch_seconds) ||
          !(watch_seconds >= 0.1 && watch_seconds <= 3600)) {
        std::fprintf(stderr, "cohortd: --watch-config=SECONDS needs 0.1..3600, got \"%s\"\n",
                     arg.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "cohortd: unknown argument \"%s\"\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  if (config_path.empty()) {
    std::fprintf(stderr, "cohortd: --config FILE.yaml is required\n%s", kUsage);
    return 2;
  }
  // Parsed on a thread of its own, and copied here: glibc gives that thread a malloc arena of
  // its own, so the YAML parse tree (several KiB per group) and the parsed copy interleaved with
  // it are freed there, instead of leaving holes in the main heap over which the groups made
  // next would be scattered (exact fits in freed chunks), pinning pages that malloc_trim cannot
  // give back (10,000 groups: 4 MB more, session 53). The copy made here is compact.
  absl::StatusOr<cohort::nso::Config> parsed = absl::UnknownError("not parsed");
  std::thread([&parsed, &config_path] { parsed = cohort::nso::LoadConfigFile(config_path); }).join();
  absl::StatusOr<cohort::nso::Config> config = parsed;
  parsed = absl::UnknownError("copied");
  if (!config.ok()) {
    std::fprintf(stderr, "cohortd: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (check_only) {
    std::printf("%s: OK\n", config_path.c_str());
    return 0;
  }
  cohort::nso::ConfigureLogging(config->log_level, config->log_format, config->node);
  RaiseDescriptorLimit();
  std::signal(SIGHUP, OnHangup);  // before Start: an early SIGHUP must not kill the daemon
  // The daemon keeps the only copy of the configuration (one copy of every group's config).
  const std::string node = config->node;
  const std::string listen_peer = config->listen_peer;
  const std::string listen_client = config->listen_client;
  const bool json_log = config->log_format == "json";
  cohort::nso::Daemon daemon(*std::move(config));
  if (replacing) daemon.SetReplacing();
  absl::Status started = daemon.Start();
  if (started.ok()) started = cohort::nso::StartGroupDirectoryIfConfigured(&daemon);
  if (!started.ok()) {
    cohort::nso::Log("daemon")->error("{}", std::string(started.message()));
    return 1;
  }
  // The configuration's parse tree (yaml-cpp nodes, several KiB per group) is freed by now, but
  // glibc keeps freed heap pages: give them back to the system, so a daemon with many groups does
  // not hold its start-up garbage for its whole life.
  malloc_trim(0);
  // One line on stdout whatever the log level, for scripts and tests waiting for readiness; a
  // JSON object like the log's lines with log_format json (one stream of JSON lines when a
  // supervisor joins stdout and stderr).
  const std::string ready = absl::StrCat("cohortd ", node, " ready: peers on ", listen_peer,
                                         ", clients on ", listen_client);
  if (json_log) {
    std::fputs(cohort::nso::FormatLogLine("daemon", spdlog::level::info, ready).c_str(), stdout);
  } else {
    std::printf("%s\n", ready.c_str());
  }
  std::fflush(stdout);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  // --watch-config: a changed text is reloaded once two looks in a row read it, so a file an
  // editor is still writing in place (a valid YAML cut short would stop the groups it lost) is
  // not taken half-written.
  std::string watched = watch_seconds > 0 ? FileText(config_path) : "";
  std::string seen = watched;
  // (Looks timed on the monotonic clock: a step of the wall clock neither delays nor hurries them.)
  auto next_look = cohort::internal::SteadyAfter(absl::Seconds(watch_seconds));
  while (!g_stop) {
    absl::SleepFor(absl::Milliseconds(50));
    if (watch_seconds > 0 && cohort::internal::SteadyNow() >= next_look) {
      next_look = cohort::internal::SteadyAfter(absl::Seconds(watch_seconds));
      std::string text = FileText(config_path);
      if (!text.empty() && text != watched && text == seen) {
        watched = text;
        cohort::nso::Log("daemon")->info("--watch-config: {} changed: reloading", config_path);
        g_reload = 1;
      }
      seen = std::move(text);
    }
    if (!g_reload) continue;
    g_reload = 0;
    ReloadFrom(config_path, node, &daemon);
    // As after the start: the file's parse tree and copy are freed by now; give their pages back
    // (a reload of 2,000 groups otherwise left the daemon 10 MB larger for good).
    malloc_trim(0);
  }
  // Graceful: leave the groups (the others install a view without this daemon at once, instead
  // of waiting for the exclusion timeout), then stop.
  cohort::nso::Log("daemon")->info("signal received: draining");
  daemon.Drain(3000);
  daemon.Shutdown();
  cohort::nso::Log("daemon")->info("stopped");
  return 0;
}
