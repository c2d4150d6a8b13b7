// kv-nemesis's run (tools/kv_nemesis.cc says what it does): one class, its members defined by job
// in kv_nemesis_cluster.cc (the daemons and their servants), kv_nemesis_netlab.cc (the lab's
// hosts), kv_nemesis_history.cc (the clients' operations, history.jsonl and schedule.log),
// kv_nemesis_nemesis.cc (the faults), kv_nemesis_checks.cc (health, lost writes, diagnosis) and
// kv_nemesis_run.cc (the run from start to summary).
#ifndef COHORT_TOOLS_KV_NEMESIS_RUN_H_
#define COHORT_TOOLS_KV_NEMESIS_RUN_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "tools/kv_nemesis_options.h"
#include "tools/kv_nemesis_util.h"
#include "tools/kv_store.h"

namespace cohort::kv_nemesis {

// ---- the cluster ----

enum class State { kUp, kKilled, kStopped };

struct Node {
  int peer_port = 0, client_port = 0;
  pid_t pid = 0;
  State state = State::kUp;
  int incarnation = 0;  // bumped at each restart: clients reconnect
  std::unique_ptr<cohort::kv::KvStore> store;
  std::unique_ptr<cohort::Servant> servant;
  pid_t servant_pid = 0;  // netlab: the kv-servant process beside the daemon
};

class Run {
 public:
  // ---- kv_nemesis_cluster.cc: the daemons and their servants ----

  explicit Run(Options options);
  ~Run();

  void WriteConfigs();
  // Loopback: new ports for every daemon (one was taken by another process before it bound it).
  void NewPorts();
  // A restart can find its port taken meanwhile by another process (it then exits at once,
  // "address in use"): a few more tries.
  bool RestartNode(int i);

  bool netlab() const { return !o_.netlab.empty(); }
  // The members' daemons, and the outside one (index o_.nodes) if any.
  int Daemons() const { return o_.nodes + (o_.outside_clients > 0 ? 1 : 0); }
  // The address of daemon i's host: loopback, or netlab host h(i+1).
  std::string Host(int i) const {
    return netlab() ? absl::StrCat(lab_net_, ".", i + 1) : std::string("127.0.0.1");
  }
  std::string HostName(int i) const { return absl::StrCat("h", i + 1); }
  std::string Namespace(int i) const { return absl::StrCat(lab_prefix_, "-h", i + 1); }

  std::string Config(int i) const { return absl::StrCat(o_.dir, "/n", i + 1, ".yaml"); }
  std::string Log(int i) const { return absl::StrCat(o_.dir, "/n", i + 1, ".log"); }
  std::string Address(int i) const { return absl::StrCat(Host(i), ":", nodes_[i].client_port); }
  // How a client or servant of the driver connects (--api).
  cohort::ConnectOptions Connecting(std::string name,
                                    absl::Duration timeout = absl::Seconds(5)) const;
  std::string Name(int i) const { return absl::StrCat("n", i + 1); }
  // --durable on: where node i's servant keeps the store.
  std::string KeptPath(int i) const { return absl::StrCat(o_.dir, "/kv-", Name(i), ".kept"); }
  // Where node i's servants append the views they get (KvStore::RegisterWith).
  std::string ViewsPath(int i) const { return absl::StrCat(o_.dir, "/kv-", Name(i), ".views"); }
  // Every view the servants got came at the same position with the same members at every
  // replica: "" if so, else what differs. `*views` counts the views compared.
  std::string ViewsDiffer(int* views) const;
  bool rejoining() const { return o_.servants == "rejoin"; }  // --servants rejoin

  // Starts daemon i and waits until it serves; then attaches a fresh servant to it.
  bool StartNode(int i);
  // Loopback: a KvStore servant in this process.
  bool AttachServant(int i);
  // netlab: a kv-servant process on the daemon's host (it exits when its stream ends).
  bool StartServantProcess(int i);
  void Kill(int i);
  // The application crashes, not the daemon: the servant (and its store) is gone.
  void CrashServant(int i);
  void Freeze(int i);
  void Thaw(int i);
  std::vector<int> UpNodes();
  void Shutdown();

  // ---- kv_nemesis_netlab.cc: the lab's hosts ----

  // netlab: makes N+1 hosts and moves this process (its only thread so far) into the clients'
  // host h(N+1); every thread started later (clients, gRPC) is there too.
  bool SetUpLab();
  // One netlab command, logged; its output goes to DIR/netlab.log.
  int Lab(std::vector<std::string> args);
  // After Shutdown(). Not `down --kill`: this process is still in the clients' host (its
  // namespace goes when the process ends); every daemon and servant has been stopped.
  void TearDownLab();

  // ---- kv_nemesis_history.cc: the clients' operations, history.jsonl and schedule.log ----

  void Note(const std::string& text);
  void Record(int client, const std::string& op, const std::string& key, const std::string& value,
              const std::string& expected, const std::string& outcome, bool found,
              const std::string& result, int64_t call_ns, int64_t return_ns,
              const std::string& error);
  // One operation through `client`; records it. Returns false when the client should reconnect.
  bool Operate(int id, cohort::Client* client, std::mt19937_64& rng,
               std::map<std::string, std::string>& seen, int* seq, cohort::Mode mode,
               cohort::Style style = cohort::Style::kGroupDefault);
  // Not an answer of a store: the member's daemon had no servant attached, or its servant went
  // away (crashed) before answering.
  static bool NoServant(const cohort::Reply& reply);
  void ClientLoop(int id);

  // ---- kv_nemesis_nemesis.cc: the faults ----

  int Uniform(int low, int high);
  // `count` distinct daemons, in random order.
  std::vector<int> Pick(int count);
  std::string Hosts(const std::vector<int>& daemons) const;
  void NemesisLoop();
  // netlab: a minority of the daemons' hosts cut off from the majority (the clients' host keeps
  // its links to both sides), past the exclusion timeout or shorter; then every cut is healed.
  void Partition();
  // netlab: delay, jitter and loss on the links of 1..N daemons' hosts (all of them at times),
  // for 1-4 s; then cleared.
  void DelayLinks();

  enum class Failure { kKill, kFreezeLong, kFreezeShort, kCutHost, kServantCrash };

  // 1..(N-1)/2 daemons (fewer than half at once), each: kill -9 then restart; SIGSTOP past the
  // exclusion timeout (a frozen process: excluded, then re-added with state transfer) or a short
  // one (suspected, not excluded); netlab: its host cut off from every other host, then healed.
  void FailDaemons();
  // --durable on: every daemon and servant killed -9 at once, all started again.
  void PowerCut();
  // RestartNode, noted in the schedule (and counted if it failed).
  void RestartAndNote(int i);

  // ---- kv_nemesis_checks.cc: health, lost writes, diagnosis ----

  // A wait-for-all get through some daemon that is up, answered by every replica.
  bool Healthy();
  // A servant whose stream ended although its daemon is up (nothing of the nemesis ended it) is
  // noted with why, and replaced, as a supervisor would.
  void ReviveServants();
  bool WaitHealthy(int limit_ms);
  // "No acknowledged write lost", checked directly (Porcupine checks it too, through the final
  // reads): per key, the final value must come from the last acknowledged write W (latest
  // return) or from a write that may have taken effect after W: one that had not returned when
  // W was called (concurrent, later, or of unknown outcome). A final value written by a write
  // that returned before W was called, or no value at all, means W was lost.
  int LostWrites();
  // The group did not recover: is each daemon reachable, and what are its threads doing?
  // (nK.stacks: every thread's backtrace, when gdb is installed.)
  void Diagnose();

  // ---- kv_nemesis_run.cc: the run ----

  int Go();

 private:
  Options o_;
  std::mt19937_64 rng_;  // nemesis thread (and setup) only
  std::mutex mu_;        // nodes_
  std::vector<Node> nodes_;
  std::mutex file_mu_;
  std::ofstream schedule_, history_;
  std::map<std::string, int> counts_;  // under file_mu_
  struct Write {
    std::string value;
    int64_t call_ns = 0;
    int64_t return_ns = 0;  // INT64_MAX: outcome unknown
    bool acknowledged = false;
  };
  std::map<std::string, std::vector<Write>> writes_;      // by key, under file_mu_
  std::map<std::string, std::string> final_value_;        // by key ("" = not set), under file_mu_
  std::map<std::string, int> faults_;  // nemesis thread
  std::atomic<bool> stop_clients_{false};
  bool Over() const { return NowMs() >= end_ms_; }
  std::atomic<int> divergent_{0};
  std::atomic<int> no_servant_replies_{0};
  int servants_revived_ = 0;  // servant streams that ended with their daemon up
  int failed_restarts_ = 0;
  int64_t last_healthy_ms_ = 0;
  int64_t end_ms_ = 0;
  std::string last_unhealthy_;  // why the last Healthy() was false
  std::string lab_prefix_, lab_net_;  // netlab: namespaces PREFIX-hK, addresses NET.K
  bool lab_up_ = false;
};

}  // namespace cohort::kv_nemesis

#endif  // COHORT_TOOLS_KV_NEMESIS_RUN_H_
