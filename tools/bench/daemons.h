// A cohortd cluster on loopback for the bench: `total` daemons n1..nN on kernel-chosen ports, a
// YAML file and a log per daemon in a temporary directory; every daemon dies with the bench.
#ifndef COHORT_TOOLS_BENCH_DAEMONS_H_
#define COHORT_TOOLS_BENCH_DAEMONS_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort::bench {

// With --netlab: node I runs in netlab host hI (address NET.I, fixed ports), started with
// `netlab exec hI ...` (which execs, so the pid is the daemon's). The bench itself then runs in
// another host of the same lab.
struct NetlabPlacement {
  std::string netlab;  // the netlab script
  std::string net;     // NETLAB_NET, e.g. 10.79.0
};

// The tls section of the daemons' YAML from now on (default: tls: {insecure: true}).
void SetDaemonTlsYaml(std::string yaml);

class Daemons {
 public:
  // `groups_yaml` is the `groups:` section (members named n1..nN); `dir` must exist.
  // Without `placement` every node is on 127.0.0.1 with kernel-chosen ports.
  Daemons(std::string cohortd, std::string dir, int total, std::string groups_yaml,
          const NetlabPlacement* placement = nullptr);
  ~Daemons();  // kills every daemon still running
  Daemons(const Daemons&) = delete;
  Daemons& operator=(const Daemons&) = delete;

  // Starts every daemon (from the main thread) and waits until each answers on its client port.
  // `in_process` (1..total): that node is not spawned; the bench runs it embedded from
  // ConfigPath(in_process).
  bool Start(std::string* error, int in_process = 0);
  // The same with other programs: `command(i)` is node i's argv (its YAML is ConfigPath(i)); the
  // nodes in `in_process` are not spawned.
  using Command = std::function<std::vector<std::string>(int index)>;
  bool StartWith(std::string* error, const std::set<int>& in_process, const Command& command);
  void Signal(int index, int signal);  // index from 1; SIGKILL reaps it
  void KillAll();

  std::string ClientAddress(int index) const;
  // Starts `argv` next to node `index` (in its netlab host, or here); registered like a daemon.
  pid_t SpawnBeside(int index, const std::vector<std::string>& argv, const std::string& log);
  std::string LogPath(int index) const;
  std::string ConfigPath(int index) const;
  pid_t Pid(int index) const { return pids_[index - 1]; }  // 0 when not running
  int total() const { return total_; }

 private:

  std::string Host(int index) const;  // the node's IPv4 address

  std::string cohortd_;
  std::string dir_;
  std::optional<NetlabPlacement> placement_;
  int total_;
  std::vector<int> peer_ports_;
  std::vector<int> client_ports_;
  std::vector<pid_t> pids_;
};

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_DAEMONS_H_
