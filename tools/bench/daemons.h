// A cohortd cluster on loopback for the bench: `total` daemons n1..nN on kernel-chosen ports, a
// YAML file and a log per daemon in a temporary directory; every daemon dies with the bench.
#ifndef COHORT_TOOLS_BENCH_DAEMONS_H_
#define COHORT_TOOLS_BENCH_DAEMONS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace cohort::bench {

class Daemons {
 public:
  // `groups_yaml` is the `groups:` section (members named n1..nN); `dir` must exist.
  Daemons(std::string cohortd, std::string dir, int total, std::string groups_yaml);
  ~Daemons();  // kills every daemon still running
  Daemons(const Daemons&) = delete;
  Daemons& operator=(const Daemons&) = delete;

  // Starts every daemon (from the main thread) and waits until each answers on its client port.
  // `in_process` (1..total): that node is not spawned; the bench runs it embedded from
  // ConfigPath(in_process).
  bool Start(std::string* error, int in_process = 0);
  void Signal(int index, int signal);  // index from 1; SIGKILL reaps it
  void KillAll();

  std::string ClientAddress(int index) const;
  std::string LogPath(int index) const;
  std::string ConfigPath(int index) const;
  pid_t Pid(int index) const { return pids_[index - 1]; }  // 0 when not running
  int total() const { return total_; }

 private:

  std::string cohortd_;
  std::string dir_;
  int total_;
  std::vector<int> peer_ports_;
  std::vector<int> client_ports_;
  std::vector<pid_t> pids_;
};

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_DAEMONS_H_
