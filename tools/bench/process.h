// Child processes of cohort-bench: every child is registered, dies with the bench
// (PR_SET_PDEATHSIG) and is killed and reaped at exit, on SIGINT/SIGTERM and on error paths.
#ifndef COHORT_TOOLS_BENCH_PROCESS_H_
#define COHORT_TOOLS_BENCH_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace cohort::bench {

// Installs SIGINT/SIGTERM/SIGHUP handlers and an atexit hook that kill every registered child.
void InstallChildCleanup();

// Starts `argv` with stdout and stderr appended to `log_path` ("" = inherit). Call it from the
// main thread only: PR_SET_PDEATHSIG fires when the *thread* that forked exits.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path);

// Sends `signal` to a registered child. SIGKILL also reaps and unregisters it.
void SignalChild(pid_t pid, int signal);
void KillChild(pid_t pid);
void KillAllChildren();
// Waits for a registered child to exit and returns its exit code; after `timeout` it is killed
// and -1 is returned (-1 also for a death by signal).
int WaitChild(pid_t pid, absl::Duration timeout);

// A free TCP port on 127.0.0.1 (bound once, then released).
int FreePort();
// True once something accepts connections on 127.0.0.1:port, false after `timeout`.
bool WaitForPort(int port, absl::Duration timeout);
// The same for ipv4:port (a netlab host).
bool WaitForAddress(const std::string& ipv4, int port, absl::Duration timeout);

// This executable (for re-executing itself in a server role).
std::string SelfExe();
// The cohortd binary: `flag` if given, else the runfiles copy next to this binary, else
// bazel-bin/tools/cohortd relative to it. "" if none is executable.
std::string FindCohortd(const std::string& flag);
// The same for another file of //tools (tools/NAME): `flag` if given, else beside the bench.
std::string FindTool(const std::string& name, const std::string& flag = "");

// A fresh directory under $TMPDIR (or /tmp), removed by RemoveTree.
std::string MakeTempDir();
void RemoveTree(const std::string& dir);

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_PROCESS_H_
