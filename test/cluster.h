// Test helper: a cluster of real cohortd processes on loopback, with ports picked by the kernel,
// a YAML file per daemon in the test's temporary directory, and no process left behind (each
// child dies with the test via PR_SET_PDEATHSIG, and the destructor kills and reaps them).
#ifndef COHORT_TEST_CLUSTER_H_
#define COHORT_TEST_CLUSTER_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "tools/subprocess.h"

namespace cohort::test {

using subprocess::FreePort;  // a free TCP port on 127.0.0.1

// The path of a data dependency (a binary built by Bazel) from the test's runfiles.
std::string Runfile(const std::string& path);

struct ClusterOptions {
  int size = 3;
  std::string groups_yaml;  // the `groups:` section, members named n1..nN
  std::string extra_yaml;   // more top-level keys (failure_detector:, consensus:, limits:, tls:;
                            // without tls: the configs get tls: {insecure: true}); "{node}" is
                            // replaced by the daemon's name, "{dir}" by the cluster's directory
  std::string log_level = "warn";
  bool metrics = false;     // each daemon serves Prometheus metrics on a port of its own
  bool metrics_per_group = true;  // metrics.per_group
  std::string listen_local;  // listen.local of every daemon ("": the default, auto)
  std::vector<std::string> daemon_args;  // more command-line arguments of every cohortd
  // A command every cohortd runs under, which execs it in place (e.g. {"prlimit",
  // "--nofile=64:128"}): the daemon keeps the process id.
  std::vector<std::string> launcher;
  // Each daemon keeps an incarnation_file in the cluster's directory, as in production, unless
  // extra_yaml names its own or this is false.
  bool incarnation_files = true;
};

class Cluster {
 public:
  explicit Cluster(ClusterOptions options);
  ~Cluster();

  // Starts every daemon and waits until each answers on its client port.
  bool Start();
  // Index from 1; `extra_args`: more command-line arguments of this start only.
  bool StartNode(int index, const std::vector<std::string>& extra_args = {});
  void Kill(int index);         // SIGKILL
  void Stop(int index);         // SIGTERM and wait
  void Pause(int index);        // SIGSTOP
  void Resume(int index);       // SIGCONT
  void Signal(int index, int signal_number);
  bool Running(int index) const;

  std::string ClientAddress(int index) const;
  std::string PeerAddress(int index) const;
  std::string LogPath(int index) const;
  // The last `lines` lines of every daemon's log, each headed by its name: for a failing check's
  // message (the logs live in the test's temporary directory, which bazel removes).
  std::string LogTails(int lines) const;
  std::string ConfigPath(int index) const;
  const std::string& dir() const { return dir_; }  // the cluster's directory (its YAML, logs)
  int MetricsPort(int index) const { return metrics_ports_[index - 1]; }
  pid_t Pid(int index) const { return pids_[index - 1]; }  // 0: not running
  int size() const { return options_.size; }

 private:
  ClusterOptions options_;
  std::vector<int> peer_ports_;
  std::vector<int> client_ports_;
  std::vector<int> metrics_ports_;
  std::vector<pid_t> pids_;
  std::string dir_;
};

// Runs `argv` and returns its exit code; its stderr goes to *stderr_text.
int RunProcess(const std::vector<std::string>& argv, std::string* stderr_text);

}  // namespace cohort::test

#endif  // COHORT_TEST_CLUSTER_H_
