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
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "tools/kv_store.h"
#include "tools/subprocess.h"
#include "tools/test_ca.h"

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point g_start = Clock::now();

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - g_start).count();
}
int64_t NowMs() { return NowNs() / 1000000; }
void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

using cohort::subprocess::CanConnect;
using cohort::subprocess::FreePort;
using cohort::subprocess::Spawn;


std::string ReadFrom(const std::string& path, size_t offset) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  return offset < all.size() ? all.substr(offset) : "";
}

size_t FileSize(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

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
  // the stub's helper thread and handed over by the callbacks thread, not by the caller.
  std::string calls = "sync";
  std::string netlab;      // non-empty: run on netlab hosts (see the top of this file)
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
};

// A command run to its end (netlab), its output appended to `log_path`; returns its exit code.
int RunCommand(const std::vector<std::string>& argv, const std::string& log_path) {
  pid_t pid = Spawn(argv, log_path);
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string IpCommand() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "ip";
}

class Run {
 public:
  explicit Run(Options options) : o_(std::move(options)), rng_(o_.seed) {
    if (netlab()) {
      const char* prefix = std::getenv("NETLAB_PREFIX");
      const char* net = std::getenv("NETLAB_NET");
      lab_prefix_ = prefix && *prefix ? prefix : absl::StrCat("kvnl", getpid() % 100000);
      lab_net_ = net && *net ? net : absl::StrCat("10.81.", getpid() % 200 + 20);
    }
    nodes_.resize(Daemons());
    for (int i = 0; i < Daemons(); ++i) {
      nodes_[i].peer_port = netlab() ? 7101 : FreePort();
      nodes_[i].client_port = netlab() ? 7201 : FreePort();
    }
    WriteConfigs();
    schedule_.open(o_.dir + "/schedule.log");
    history_.open(o_.dir + "/history.jsonl");
  }

  void WriteConfigs() {
    std::ostringstream peers;
    peers << "peers:\n";
    for (int i = 0; i < Daemons(); ++i) {
      peers << "  - {name: n" << i + 1 << ", id: " << i + 1 << ", address: " << Host(i) << ":"
            << nodes_[i].peer_port << "}\n";
    }
    std::vector<std::string> members;
    for (int i = 1; i <= o_.nodes; ++i) members.push_back(absl::StrCat("n", i));
    for (int i = 0; i < Daemons(); ++i) {
      std::ofstream out(Config(i));
      out << "node: n" << i + 1 << "\nlog_level: " << o_.log_level << "\n"
          << "listen:\n  peer: " << Host(i) << ":" << nodes_[i].peer_port
          << "\n  client: " << Host(i) << ":" << nodes_[i].client_port << "\n"
          << peers.str()
          << "failure_detector:\n  suspect_timeout_ms: 50\n  exclude_timeout_ms: 1000\n"
          << "groups:\n  - name: kv\n    members: [" << absl::StrJoin(members, ", ") << "]\n"
          << "    ordering: " << o_.ordering << "\n"
          << (o_.tls_ca.empty() ? std::string("tls: {insecure: true}\n")
                                : cohort::TestCaTlsYaml(o_.tls_ca, "cohort"))
          << "peer_transport: " << o_.peer_transport << "\n";
    }
  }

  // Loopback: new ports for every daemon (one was taken by another process before it bound it).
  void NewPorts() {
    for (Node& node : nodes_) {
      node.peer_port = FreePort();
      node.client_port = FreePort();
    }
    WriteConfigs();
  }

  // A restart can find its port taken meanwhile by another process (it then exits at once,
  // "address in use"): a few more tries.
  bool RestartNode(int i) {
    for (int attempt = 1; attempt <= 3; ++attempt) {
      if (StartNode(i)) return true;
      Note(absl::StrCat("restart of ", Name(i), " failed (attempt ", attempt, "; see ", Log(i), ")"));
      SleepMs(300);
    }
    return false;
  }

  bool netlab() const { return !o_.netlab.empty(); }
  // The members' daemons, and the outside one (index o_.nodes) if any.
  int Daemons() const { return o_.nodes + (o_.outside_clients > 0 ? 1 : 0); }
  // The address of daemon i's host: loopback, or netlab host h(i+1).
  std::string Host(int i) const {
    return netlab() ? absl::StrCat(lab_net_, ".", i + 1) : std::string("127.0.0.1");
  }
  std::string HostName(int i) const { return absl::StrCat("h", i + 1); }
  std::string Namespace(int i) const { return absl::StrCat(lab_prefix_, "-h", i + 1); }

  // netlab: makes N+1 hosts and moves this process (its only thread so far) into the clients'
  // host h(N+1); every thread started later (clients, gRPC) is there too.
  bool SetUpLab() {
    setenv("NETLAB_PREFIX", lab_prefix_.c_str(), 1);
    setenv("NETLAB_NET", lab_net_.c_str(), 1);
    setenv("NETLAB_STATE", (o_.dir + "/netlab").c_str(), 0);  // unless given
    lab_up_ = true;
    if (Lab({"up", std::to_string(o_.nodes + 1)}) != 0) return false;
    std::string clients_ns = absl::StrCat("/run/netns/", lab_prefix_, "-h", o_.nodes + 1);
    int fd = open(clients_ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
      std::fprintf(stderr, "kv-nemesis: cannot enter %s: %s\n", clients_ns.c_str(), strerror(errno));
      if (fd >= 0) close(fd);
      return false;
    }
    close(fd);
    return true;
  }

  // One netlab command, logged; its output goes to DIR/netlab.log.
  int Lab(std::vector<std::string> args) {
    args.insert(args.begin(), o_.netlab);
    int rc = RunCommand(args, o_.dir + "/netlab.log");
    if (rc != 0) Note(absl::StrCat("netlab ", absl::StrJoin(args.begin() + 1, args.end(), " "),
                                   " FAILED (exit ", rc, ")"));
    return rc;
  }

  // After Shutdown(). Not `down --kill`: this process is still in the clients' host (its
  // namespace goes when the process ends); every daemon and servant has been stopped.
  void TearDownLab() {
    if (!lab_up_) return;
    lab_up_ = false;
    Lab({"down"});
  }

  ~Run() {
    Shutdown();
    TearDownLab();
  }

  std::string Config(int i) const { return absl::StrCat(o_.dir, "/n", i + 1, ".yaml"); }
  std::string Log(int i) const { return absl::StrCat(o_.dir, "/n", i + 1, ".log"); }
  std::string Address(int i) const { return absl::StrCat(Host(i), ":", nodes_[i].client_port); }
  // How a client or servant of the driver connects (--api).
  cohort::ConnectOptions Connecting(std::string name,
                                    absl::Duration timeout = absl::Seconds(5)) const {
    cohort::ConnectOptions options;
    options.client_name = std::move(name);
    options.timeout = timeout;
    options.local = o_.api == "local";
    if (!o_.tls_ca.empty()) {
      options.ca_file = o_.tls_ca + "/ca.pem";
      options.server_name = "cohort";
    }
    return options;
  }
  std::string Name(int i) const { return absl::StrCat("n", i + 1); }
  bool rejoining() const { return o_.servants == "rejoin"; }  // --servants rejoin

  void Note(const std::string& text) {
    std::lock_guard<std::mutex> lock(file_mu_);
    schedule_ << "t_ms=" << NowMs() << " " << text << "\n";
    schedule_.flush();
  }

  // Starts daemon i and waits until it serves; then attaches a fresh servant to it.
  bool StartNode(int i) {
    size_t offset = FileSize(Log(i));
    std::vector<std::string> argv = {o_.cohortd, "--config", Config(i)};
    if (netlab()) argv.insert(argv.begin(), {IpCommand(), "netns", "exec", Namespace(i)});
    pid_t pid = Spawn(argv, Log(i));  // `ip netns exec` execs the daemon: same pid
    {
      std::lock_guard<std::mutex> lock(mu_);
      nodes_[i].pid = pid;
    }
    bool ready = false;
    for (int attempt = 0; attempt < 400 && !ready; ++attempt) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        std::lock_guard<std::mutex> lock(mu_);
        nodes_[i].pid = 0;
        return false;
      }
      ready = ReadFrom(Log(i), offset).find(" ready: peers on ") != std::string::npos &&
              (netlab() ? CanConnect(Host(i), nodes_[i].client_port)
                        : CanConnect(nodes_[i].client_port));
      if (!ready) SleepMs(25);
    }
    if (!ready) return false;
    if (i >= o_.nodes) return true;  // the outside daemon: no member, no servant
    {
      std::lock_guard<std::mutex> lock(mu_);
      // --servants rejoin: it registers again by itself.
      if (nodes_[i].servant != nullptr ||
          (nodes_[i].servant_pid > 0 && waitpid(nodes_[i].servant_pid, nullptr, WNOHANG) == 0)) {
        nodes_[i].state = State::kUp;
        nodes_[i].incarnation++;
        return true;
      }
    }
    return netlab() ? StartServantProcess(i) : AttachServant(i);
  }

  // Loopback: a KvStore servant in this process.
  bool AttachServant(int i) {
    auto store = std::make_unique<cohort::kv::KvStore>();
    std::unique_ptr<cohort::Servant> servant;
    for (int attempt = 0; attempt < 20 && servant == nullptr; ++attempt) {
      auto created = cohort::Servant::Create(Address(i), "kv", Connecting(absl::StrCat("kv-", Name(i))));
      if (created.ok()) {
        store->RegisterWith(created->get());
        if (rejoining()) (*created)->RejoinAfterDaemonRestart();
        absl::Status started = (*created)->Start();
        if (started.ok()) {
          servant = std::move(*created);
          break;
        }
        Note(absl::StrCat("servant on ", Name(i), ": ", started.ToString()));
      } else {
        Note(absl::StrCat("servant on ", Name(i), ": ", created.status().ToString()));
      }
      SleepMs(100);
    }
    if (servant == nullptr) return false;
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[i].store = std::move(store);
    nodes_[i].servant = std::move(servant);
    nodes_[i].state = State::kUp;
    nodes_[i].incarnation++;
    return true;
  }

  // netlab: a kv-servant process on the daemon's host (it exits when its stream ends).
  bool StartServantProcess(int i) {
    std::string log = absl::StrCat(o_.dir, "/kv-", Name(i), ".log");
    for (int attempt = 0; attempt < 20; ++attempt) {
      size_t offset = FileSize(log);
      std::vector<std::string> argv = {IpCommand(), "netns", "exec", Namespace(i), o_.kv_servant,
                                       "--daemon", Address(i), "--name", absl::StrCat("kv-", Name(i))};
      if (!o_.tls_ca.empty()) {
        argv.insert(argv.end(), {"--ca-file", o_.tls_ca + "/ca.pem", "--server-name", "cohort"});
      }
      if (rejoining()) argv.insert(argv.end(), {"--rejoin", "yes"});
      pid_t pid = Spawn(argv, log);
      bool serving = false, ended = false;
      for (int wait = 0; wait < 200 && !serving && !ended; ++wait) {
        ended = waitpid(pid, nullptr, WNOHANG) == pid;
        serving = ReadFrom(log, offset).find(" serving group ") != std::string::npos;
        if (!serving && !ended) SleepMs(25);
      }
      if (serving) {
        std::lock_guard<std::mutex> lock(mu_);
        nodes_[i].servant_pid = pid;
        nodes_[i].state = State::kUp;
        nodes_[i].incarnation++;
        return true;
      }
      if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      Note(absl::StrCat("servant on ", Name(i), " did not start: ", ReadFrom(log, offset)));
      SleepMs(100);
    }
    return false;
  }

  void Kill(int i) {
    pid_t pid;
    pid_t servant_pid;
    std::unique_ptr<cohort::Servant> servant;
    {
      std::lock_guard<std::mutex> lock(mu_);
      nodes_[i].state = State::kKilled;
      pid = nodes_[i].pid;
      nodes_[i].pid = 0;
      // --servants rejoin: the daemon only; its servant (and store, or its kv-servant process)
      // stays and registers again.
      if (!rejoining()) {
        servant_pid = nodes_[i].servant_pid;
        nodes_[i].servant_pid = 0;
        servant = std::move(nodes_[i].servant);
      } else {
        servant_pid = 0;
      }
    }
    for (pid_t victim : {pid, servant_pid}) {  // a crashed machine: daemon and servant
      if (victim <= 0) continue;
      kill(victim, SIGKILL);
      waitpid(victim, nullptr, 0);
    }
    if (rejoining()) return;
    if (servant) servant->Stop();  // cancels the stream only
    servant.reset();                // joins its delivery thread, which uses the store
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[i].store.reset();  // no stable storage: the restarted replica starts empty
  }

  // The application crashes, not the daemon: the servant (and its store) is gone.
  void CrashServant(int i) {
    pid_t servant_pid;
    std::unique_ptr<cohort::Servant> servant;
    {
      std::lock_guard<std::mutex> lock(mu_);
      servant_pid = nodes_[i].servant_pid;
      nodes_[i].servant_pid = 0;
      servant = std::move(nodes_[i].servant);
    }
    if (servant_pid > 0) {
      kill(servant_pid, SIGKILL);
      waitpid(servant_pid, nullptr, 0);
    }
    if (servant) servant->Stop();
    servant.reset();
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[i].store.reset();
  }

  void Freeze(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[i].state = State::kStopped;
    if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGSTOP);
  }

  void Thaw(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGCONT);
    nodes_[i].state = State::kUp;
  }

  // A wait-for-all get through some daemon that is up, answered by every replica.
  bool Healthy() {
    std::vector<int> up = UpNodes();
    if (static_cast<int>(up.size()) < o_.nodes) return false;
    int i = up[std::uniform_int_distribution<int>(0, up.size() - 1)(rng_)];
    auto client = cohort::Client::Connect(Address(i), Connecting("nemesis-probe", absl::Seconds(1)));
    if (!client.ok()) {
      last_unhealthy_ = absl::StrCat("connect to ", Name(i), ": ", client.status().ToString());
      return false;
    }
    auto result = (*client)->Invoke("kv", "get", "health", cohort::Mode::kAll, absl::Seconds(2));
    if (!result.ok()) {
      last_unhealthy_ = absl::StrCat("get at ", Name(i), ": ", result.status().ToString());
      return false;
    }
    if (static_cast<int>(result->replies.size()) != o_.nodes) {
      last_unhealthy_ = absl::StrCat("get at ", Name(i), ": ", result->replies.size(), " replies");
      return false;
    }
    return true;
  }

  // A servant whose stream ended although its daemon is up (nothing of the nemesis ended it) is
  // noted with why, and replaced, as a supervisor would.
  void ReviveServants() {
    for (int i = 0; i < o_.nodes; ++i) {
      std::string why;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Node& node = nodes_[i];
        if (node.state != State::kUp || node.pid <= 0) continue;
        absl::Status status;
        if (node.servant && node.servant->Ended(&status)) {
          why = status.ToString();
        } else if (node.servant_pid > 0 && waitpid(node.servant_pid, nullptr, WNOHANG) == node.servant_pid) {
          node.servant_pid = 0;
          why = "kv-servant exited (see kv-" + Name(i) + ".log)";
        }
      }
      if (why.empty()) continue;
      Note(absl::StrCat("SERVANT STREAM ENDED on ", Name(i), " with its daemon up: ", why,
                        "; starting a new servant"));
      servants_revived_++;
      CrashServant(i);
      bool ok = netlab() ? StartServantProcess(i) : AttachServant(i);
      Note(absl::StrCat("new servant on ", Name(i), ok ? " attached" : " FAILED"));
    }
  }

  bool WaitHealthy(int limit_ms) {
    int64_t until = NowMs() + limit_ms;
    while (NowMs() < until) {
      ReviveServants();
      if (Healthy()) return true;
      SleepMs(100);
    }
    return false;
  }

  std::vector<int> UpNodes() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int> up;
    for (int i = 0; i < o_.nodes; ++i) {
      if (nodes_[i].state == State::kUp && nodes_[i].pid > 0) up.push_back(i);
    }
    return up;
  }

  void Record(int client, const std::string& op, const std::string& key, const std::string& value,
              const std::string& expected, const std::string& outcome, bool found,
              const std::string& result, int64_t call_ns, int64_t return_ns,
              const std::string& error) {
    std::lock_guard<std::mutex> lock(file_mu_);
    history_ << "{\"client\":" << client << ",\"op\":\"" << op << "\",\"key\":" << JsonString(key)
             << ",\"value\":" << JsonString(value) << ",\"expected\":" << JsonString(expected)
             << ",\"outcome\":\"" << outcome << "\",\"ok\":" << (outcome == "unknown" ? "false" : "true")
             << ",\"found\":" << (found ? "true" : "false") << ",\"result\":" << JsonString(result)
             << ",\"call_ns\":" << call_ns << ",\"return_ns\":" << return_ns;
    if (!error.empty()) history_ << ",\"error\":" << JsonString(error);
    history_ << "}\n";
    counts_[op + " " + outcome]++;
    if (client == o_.clients) {
      final_value_[key] = found ? result : "";  // the final wait-for-all read
    } else if ((op == "put" || op == "cas") && outcome != "fail") {
      writes_[key].push_back({value, call_ns, outcome == "ok" ? return_ns : INT64_MAX,
                              outcome == "ok"});
    }
  }

  // "No acknowledged write lost", checked directly (Porcupine checks it too, through the final
  // reads): per key, the final value must come from the last acknowledged write W (latest
  // return) or from a write that may have taken effect after W: one that had not returned when
  // W was called (concurrent, later, or of unknown outcome). A final value written by a write
  // that returned before W was called, or no value at all, means W was lost.
  int LostWrites() {
    std::lock_guard<std::mutex> lock(file_mu_);
    int lost = 0;
    for (const auto& [key, writes] : writes_) {
      const Write* last = nullptr;
      for (const Write& write : writes) {
        if (write.acknowledged && (last == nullptr || write.return_ns > last->return_ns)) {
          last = &write;
        }
      }
      if (last == nullptr) continue;
      const std::string& final_value = final_value_[key];
      bool explained = final_value == last->value;
      for (const Write& write : writes) {
        if (write.value == final_value && write.return_ns >= last->call_ns) explained = true;
      }
      if (!explained) {
        lost++;
        schedule_ << "t_ms=" << NowMs() << " LOST WRITE: key " << key << " acknowledged "
                  << last->value << " (returned at " << last->return_ns / 1000000
                  << " ms) but the final value is \"" << final_value << "\"\n";
      }
    }
    schedule_.flush();
    return lost;
  }

  // One operation through `client`; records it. Returns false when the client should reconnect.
  bool Operate(int id, cohort::Client* client, std::mt19937_64& rng,
               std::map<std::string, std::string>& seen, int* seq, cohort::Mode mode,
               cohort::Style style = cohort::Style::kGroupDefault) {
    std::string key = absl::StrCat("k", std::uniform_int_distribution<int>(0, o_.keys - 1)(rng));
    int dice = std::uniform_int_distribution<int>(0, 99)(rng);
    std::string op = dice < 35 ? "put" : dice < 75 ? "get" : "cas";
    std::string value = op == "get" ? "" : absl::StrCat("c", id, ".", (*seq)++);
    std::string expected;
    if (op == "cas") expected = seen.count(key) ? seen[key] : "-";
    std::string payload = op == "put" ? absl::StrCat(key, "=", value)
                          : op == "get" ? key
                                        : absl::StrCat(key, " ", expected, " ", value);
    int64_t call = NowNs();
    auto result =
        o_.calls == "async"
            ? client->InvokeFuture("kv", op, payload, mode, absl::Milliseconds(o_.deadline_ms),
                                   style).get()
            : client->Invoke("kv", op, payload, mode, absl::Milliseconds(o_.deadline_ms), style);
    int64_t ret = NowNs();
    if (!result.ok() || result->replies.empty() || result->replies.size() < result->wanted) {
      std::string error = result.ok() ? "too few replies" : result.status().ToString();
      Record(id, op, key, value, expected, "unknown", false, "", call, ret, error);
      return false;
    }
    // A member whose daemon has no servant attached (a restarted daemon, before its servant
    // re-attaches) answers UNAVAILABLE "no servant attached", and one whose servant crashed
    // answers the calls it had handed to it "servant detached before answering": not answers of
    // the store.
    std::vector<const cohort::Reply*> answers;
    for (const cohort::Reply& reply : result->replies) {
      if (NoServant(reply)) {
        no_servant_replies_++;
        Note(absl::StrCat("reply without servant to ", op, " ", payload, " from ", reply.member,
                          " (counted in the ", result->wanted, " wanted of view ",
                          result->view_id, ": ", result->replies.size(), " replies)"));
      } else {
        answers.push_back(&reply);
      }
    }
    if (answers.empty()) {
      Record(id, op, key, value, expected, "unknown", false, "", call, ret, "no servant answered");
      return false;
    }
    const cohort::Reply& first = *answers.front();
    for (const cohort::Reply* answer : answers) {
      const cohort::Reply& reply = *answer;
      if (reply.status.code() != first.status.code() ||
          reply.status.message() != first.status.message() || reply.payload != first.payload) {
        divergent_++;
        Note(absl::StrCat("DIVERGENT replies to ", op, " ", payload, ": ", first.member, " ",
                          first.status.ToString(), " ", first.payload, " vs ", reply.member, " ",
                          reply.status.ToString(), " ", reply.payload));
      }
    }
    if (op == "put") {
      if (!first.status.ok()) {
        Record(id, op, key, value, expected, "unknown", false, "", call, ret, first.status.ToString());
        return true;
      }
      seen[key] = value;
      Record(id, op, key, value, expected, "ok", false, "", call, ret, "");
    } else if (op == "get") {
      if (first.status.ok()) {
        seen[key] = first.payload;
        Record(id, op, key, value, expected, "ok", true, first.payload, call, ret, "");
      } else if (first.status.code() == absl::StatusCode::kNotFound) {
        seen.erase(key);
        Record(id, op, key, value, expected, "ok", false, "", call, ret, "");
      } else {
        Record(id, op, key, value, expected, "unknown", false, "", call, ret, first.status.ToString());
      }
    } else {
      if (first.status.ok()) {
        seen[key] = value;
        Record(id, op, key, value, expected, "ok", false, "", call, ret, "");
      } else if (first.status.code() == absl::StatusCode::kFailedPrecondition) {
        std::string message(first.status.message());
        size_t at = message.rfind(", found ");
        std::string found = at == std::string::npos ? "?" : message.substr(at + 8);
        if (found == "-") seen.erase(key); else seen[key] = found;
        Record(id, op, key, value, expected, "fail", false, found, call, ret, "");
      } else {
        Record(id, op, key, value, expected, "unknown", false, "", call, ret, first.status.ToString());
      }
    }
    return true;
  }

  // Not an answer of a store: the member's daemon had no servant attached, or its servant went
  // away (crashed) before answering.
  static bool NoServant(const cohort::Reply& reply) {
    return reply.status.code() == absl::StatusCode::kUnavailable &&
           (reply.status.message().find("no servant attached") != absl::string_view::npos ||
            reply.status.message().find("servant detached before answering") !=
                absl::string_view::npos);
  }

  void ClientLoop(int id) {
    std::mt19937_64 rng(o_.seed * 1000 + id + 1);
    std::map<std::string, std::string> seen;  // last value this client saw per key
    std::map<int, std::pair<int, std::unique_ptr<cohort::Client>>> clients;  // node -> (inc, client)
    int seq = 0;
    const bool outside = id < o_.outside_clients;
    int outside_calls = 0;
    while (!stop_clients_) {
      std::vector<int> up = outside ? std::vector<int>{o_.nodes} : UpNodes();
      if (up.empty()) {
        SleepMs(20);
        continue;
      }
      int i = up[std::uniform_int_distribution<int>(0, up.size() - 1)(rng)];
      int incarnation;
      {
        std::lock_guard<std::mutex> lock(mu_);
        incarnation = nodes_[i].incarnation;
      }
      auto& slot = clients[i];
      if (slot.second == nullptr || slot.first != incarnation) {
        slot.second.reset();
        auto connected = cohort::Client::Connect(
            Address(i), Connecting(absl::StrCat("kv-client-", id), absl::Milliseconds(o_.deadline_ms)));
        if (!connected.ok()) {
          SleepMs(20);
          continue;
        }
        slot = {incarnation, std::move(*connected)};
      }
      cohort::Style style = cohort::Style::kGroupDefault;
      if (outside) style = outside_calls++ % 2 == 0 ? cohort::Style::kOpen : cohort::Style::kClosed;
      if (!Operate(id, slot.second.get(), rng, seen, &seq, cohort::Mode::kMajority, style)) {
        slot.second.reset();
        SleepMs(10);
      }
    }
  }

  int Uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  // `count` distinct daemons, in random order.
  std::vector<int> Pick(int count) {
    std::vector<int> order(o_.nodes);
    for (int i = 0; i < o_.nodes; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng_);
    order.resize(count);
    return order;
  }

  std::string Hosts(const std::vector<int>& daemons) const {
    std::vector<std::string> names;
    for (int i : daemons) names.push_back(HostName(i));
    return absl::StrJoin(names, " ");
  }

  void NemesisLoop() {
    while (!Over()) {
      if (!WaitHealthy(2000)) {
        if (Over()) break;
        if (NowMs() - last_healthy_ms_ > 20000) {
          Note("not healthy for 20 s");
          last_healthy_ms_ = NowMs();
        }
        continue;
      }
      last_healthy_ms_ = NowMs();
      if (Over()) break;
      int kind = Uniform(0, 99);
      if (kind < (netlab() ? 10 : 15)) {
        int ms = Uniform(200, 1500);
        Note(absl::StrCat("pause ", ms, " ms"));
        faults_["pause"]++;
        SleepMs(ms);
        continue;
      }
      if (netlab() && kind < 35) {
        Partition();
      } else if (netlab() && kind < 50) {
        DelayLinks();
      } else {
        FailDaemons();
      }
      int64_t t0 = NowMs();
      bool healthy = WaitHealthy(15000);
      Note(healthy ? absl::StrCat("healthy (all ", o_.nodes, " replicas answer) after ",
                                  NowMs() - t0, " ms")
                   : "NOT healthy 15 s after healing: " + last_unhealthy_);
      if (healthy) last_healthy_ms_ = NowMs();
    }
  }

  // netlab: a minority of the daemons' hosts cut off from the majority (the clients' host keeps
  // its links to both sides), past the exclusion timeout or shorter; then every cut is healed.
  void Partition() {
    const int max_down = (o_.nodes - 1) / 2;
    std::vector<int> order = Pick(o_.nodes);
    std::vector<int> minority(order.begin(), order.begin() + Uniform(1, max_down));
    std::vector<int> majority(order.begin() + minority.size(), order.end());
    int ms = Uniform(0, 1) ? Uniform(1200, 3000) : Uniform(150, 900);
    Note(absl::StrCat("partition {", Hosts(minority), "} | {", Hosts(majority), "} for ", ms, " ms"));
    faults_["partition"]++;
    Lab({"partition", Hosts(minority), Hosts(majority)});
    SleepMs(ms);
    Lab({"heal-all"});
    Note("heal-all");
  }

  // netlab: delay, jitter and loss on the links of 1..N daemons' hosts (all of them at times),
  // for 1-4 s; then cleared.
  void DelayLinks() {
    std::vector<int> hosts = Pick(Uniform(1, o_.nodes));
    int ms = Uniform(0, 3) == 0 ? Uniform(60, 200) : Uniform(5, 60);
    int jitter = Uniform(0, ms / 2);
    int loss = Uniform(0, 2) == 0 ? Uniform(1, 10) : 0;
    int hold = Uniform(1000, 4000);
    Note(absl::StrCat("delay {", Hosts(hosts), "} ", ms, "+-", jitter, " ms, loss ", loss,
                      "% each way, for ", hold, " ms"));
    faults_["delay+loss"]++;
    for (int i : hosts) {
      Lab({"delay", HostName(i), std::to_string(ms), std::to_string(jitter), std::to_string(loss)});
    }
    SleepMs(hold);
    for (int i : hosts) Lab({"delay", HostName(i), "0"});
    Note("delays cleared");
  }

  enum class Failure { kKill, kFreezeLong, kFreezeShort, kCutHost, kServantCrash };

  // 1..(N-1)/2 daemons (fewer than half at once), each: kill -9 then restart; SIGSTOP past the
  // exclusion timeout (a frozen process: excluded, then re-added with state transfer) or a short
  // one (suspected, not excluded); netlab: its host cut off from every other host, then healed.
  void FailDaemons() {
    const int count = Uniform(1, (o_.nodes - 1) / 2);
    std::vector<int> order = Pick(count);
    std::vector<Failure> how(count);
    std::vector<int> until(count);
    for (int v = 0; v < count; ++v) {
      int r = Uniform(0, 99);
      if (netlab()) {
        how[v] = r < 30 ? Failure::kKill : r < 45 ? Failure::kFreezeLong
                 : r < 60 ? Failure::kFreezeShort : r < 85 ? Failure::kCutHost
                 : Failure::kServantCrash;
      } else {
        how[v] = r < 40 ? Failure::kKill : r < 70 ? Failure::kFreezeLong
                 : r < 85 ? Failure::kFreezeShort : Failure::kServantCrash;
      }
      until[v] = how[v] == Failure::kKill || how[v] == Failure::kServantCrash ? Uniform(100, 2500)
                 : how[v] == Failure::kFreezeShort ? Uniform(30, 400)
                                                   : Uniform(1200, 3000);
      int i = order[v];
      switch (how[v]) {
        case Failure::kKill:
          Kill(i);
          Note(absl::StrCat("kill -9 ", Name(i), netlab() ? " and its servant" : "",
                            " (restart in ", until[v], " ms)"));
          faults_["kill"]++;
          break;
        case Failure::kFreezeLong:
        case Failure::kFreezeShort:
          Freeze(i);
          Note(absl::StrCat(how[v] == Failure::kFreezeLong ? "freeze (SIGSTOP) " : "stall (SIGSTOP) ",
                            Name(i), " for ", until[v], " ms"));
          faults_[how[v] == Failure::kFreezeLong ? "freeze" : "stall"]++;
          break;
        case Failure::kServantCrash:
          CrashServant(i);
          Note(absl::StrCat("servant crash: kill -9 the servant of ", Name(i),
                            ", its daemon stays up (new servant in ", until[v], " ms)"));
          faults_["servant crash"]++;
          break;
        case Failure::kCutHost:
          Lab({"cut", HostName(i)});
          Note(absl::StrCat("cut host ", HostName(i), " (", Name(i), ") for ", until[v], " ms"));
          faults_["cut host"]++;
          break;
      }
    }
    int64_t began = NowMs();
    std::vector<bool> healed(count, false);
    for (int done = 0; done < count; ++done) {
      int next = -1;
      for (int v = 0; v < count; ++v) {
        if (!healed[v] && (next < 0 || until[v] < until[next])) next = v;
      }
      int64_t wait = began + until[next] - NowMs();
      if (wait > 0) SleepMs(static_cast<int>(wait));
      int i = order[next];
      if (how[next] == Failure::kKill) {
        int64_t t0 = NowMs();
        bool ok = RestartNode(i);
        Note(absl::StrCat("restart ", Name(i), ok ? " ready, servant attached in " : " FAILED after ",
                          NowMs() - t0, " ms"));
        if (!ok) failed_restarts_++;
      } else if (how[next] == Failure::kServantCrash) {
        int64_t t0 = NowMs();
        bool ok = netlab() ? StartServantProcess(i) : AttachServant(i);
        Note(absl::StrCat("new servant on ", Name(i), ok ? " attached in " : " FAILED after ",
                          NowMs() - t0, " ms"));
        if (!ok) failed_restarts_++;
      } else if (how[next] == Failure::kCutHost) {
        Lab({"heal", HostName(i)});
        Note(absl::StrCat("heal host ", HostName(i)));
      } else {
        Thaw(i);
        Note(absl::StrCat("resume (SIGCONT) ", Name(i)));
      }
      healed[next] = true;
    }
  }

  int Go() {
    if (netlab() && !SetUpLab()) {
      std::fprintf(stderr, "kv-nemesis: netlab up failed (see %s/netlab.log)\n", o_.dir.c_str());
      return 1;
    }
    for (int attempt = 1;; ++attempt) {
      int failed = -1;
      for (int i = 0; i < Daemons() && failed < 0; ++i) {
        if (!StartNode(i)) failed = i;
      }
      if (failed < 0) break;
      if (netlab() || attempt == 3) {
        std::fprintf(stderr, "kv-nemesis: could not start %s (see %s)\n", Name(failed).c_str(),
                     Log(failed).c_str());
        return 1;
      }
      // On loopback another process can take a port between FreePort() and the daemon's bind.
      Note(absl::StrCat("start: ", Name(failed), " did not start (port taken?): new ports"));
      Shutdown();
      NewPorts();
    }
    if (!WaitHealthy(20000)) {
      std::fprintf(stderr, "kv-nemesis: the group never became healthy\n");
      return 1;
    }
    Note(absl::StrCat("start: ", o_.nodes, " daemons",
                      netlab() ? absl::StrCat(" on netlab hosts h1..h", o_.nodes, " (clients on h",
                                              o_.nodes + 1, ", lab ", lab_prefix_, ")")
                               : std::string(" on loopback"),
                      ", ", o_.clients, " clients (", o_.outside_clients,
                      " of them through n", o_.nodes + 1, ", outside the group), ", o_.keys,
                      " keys, seed ", o_.seed, ", deadline ", o_.deadline_ms, " ms"));
    last_healthy_ms_ = NowMs();
    std::vector<std::thread> threads;
    for (int c = 0; c < o_.clients; ++c) threads.emplace_back([this, c] { ClientLoop(c); });
    // The nemesis runs on this thread: daemons are forked from it, and PR_SET_PDEATHSIG fires
    // when the forking *thread* ends. It finishes its current fault and heals it.
    end_ms_ = NowMs() + o_.seconds * 1000;
    NemesisLoop();
    Note("nemesis stopped; every daemon running");
    stop_clients_ = true;
    for (std::thread& thread : threads) thread.join();

    // Final reads: wait-for-all, recorded (a lost acknowledged write shows up in the check).
    bool healthy = WaitHealthy(15000);
    Note(healthy ? "final: healthy" : "final: NOT healthy after 15 s: " + last_unhealthy_);
    if (!healthy) Diagnose();
    int final_reads = 0;
    if (healthy) {
      auto client = cohort::Client::Connect(Address(0), Connecting("final-reader", absl::Seconds(2)));
      // A member can be suspected for a moment even in a healthy group (e.g. while it installs
      // a large state): a wait-for-all call then fails fast. Retry each key for a while.
      const int64_t give_up_ms = NowMs() + 15000;
      if (!client.ok()) Note("final reads: connect to " + Name(0) + ": " + client.status().ToString());
      for (int k = 0; client.ok() && k < o_.keys; ++k) {
        std::string key = absl::StrCat("k", k);
        std::string last_error;
        while (NowMs() < give_up_ms) {
          int64_t call = NowNs();
          auto result = (*client)->Invoke("kv", "get", key, cohort::Mode::kAll, absl::Seconds(3));
          int64_t ret = NowNs();
          if (!result.ok() || static_cast<int>(result->replies.size()) < o_.nodes) {
            last_error = result.ok() ? absl::StrCat(result->replies.size(), " replies")
                                     : result.status().ToString();
            SleepMs(100);
            continue;
          }
          last_error.clear();
          bool found = result->replies.front().status.ok();
          std::string value = found ? result->replies.front().payload : "";
          for (const cohort::Reply& reply : result->replies) {
            if (reply.status.ok() != found || (found && reply.payload != value)) divergent_++;
          }
          Record(o_.clients, "get", key, "", "", "ok", found, value, call, ret, "");
          final_reads++;
          break;
        }
        if (!last_error.empty()) Note("final read of " + key + " failed: " + last_error);
      }
    }
    // Every replica holds the same map (a majority acknowledged each call: allow a moment). With
    // netlab the stores are in kv-servant processes: the final wait-for-all reads compared every
    // replica's value of every key (a difference counts as divergent).
    bool agree = netlab() ? final_reads == o_.keys : false;
    for (int attempt = 0; !netlab() && attempt < 100 && !agree; ++attempt) {
      std::lock_guard<std::mutex> lock(mu_);
      agree = true;
      auto first = nodes_[0].store ? nodes_[0].store->Snapshot() : std::map<std::string, std::string>();
      for (int i = 1; i < o_.nodes; ++i) {
        if (!nodes_[i].store || nodes_[i].store->Snapshot() != first) agree = false;
      }
      if (!agree) SleepMs(50);
    }
    Note(agree ? "final: every replica holds the same map" : "final: replicas DIFFER");
    const int lost = final_reads == o_.keys ? LostWrites() : 0;
    std::string counts;
    for (const auto& [k, v] : counts_) absl::StrAppend(&counts, counts.empty() ? "" : ", ", k, " ", v);
    std::string faults;
    for (const auto& [k, v] : faults_) absl::StrAppend(&faults, faults.empty() ? "" : ", ", k, " ", v);
    uint64_t rejoins = 0;  // --servants rejoin: registrations again after a daemon's kill
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int i = 0; i < o_.nodes; ++i) {
        if (nodes_[i].servant) rejoins += nodes_[i].servant->rejoins();
      }
    }
    for (int i = 0; netlab() && i < o_.nodes; ++i) {  // the kv-servant processes say so
      const std::string log = ReadFrom(absl::StrCat(o_.dir, "/kv-", Name(i), ".log"), 0);
      for (size_t at = log.find(" registered again"); at != std::string::npos;
           at = log.find(" registered again", at + 1)) {
        ++rejoins;
      }
    }
    std::printf("kv-nemesis: nodes %d, %d s, ops: %s; faults: %s; final reads %d/%d; divergent "
                "replies %d; replies without servant %d; failed restarts %d; servant streams "
                "ended unasked %d; servant rejoins %llu; replicas agree: %s; acknowledged writes "
                "lost: %d\n",
                o_.nodes, o_.seconds, counts.c_str(), faults.c_str(), final_reads, o_.keys,
                divergent_.load(), no_servant_replies_.load(), failed_restarts_,
                servants_revived_, static_cast<unsigned long long>(rejoins), agree ? "yes" : "NO",
                lost);
    Shutdown();
    return healthy && agree && divergent_ == 0 && final_reads == o_.keys && lost == 0 ? 0 : 1;
  }

  // The group did not recover: is each daemon reachable, and what are its threads doing?
  // (nK.stacks: every thread's backtrace, when gdb is installed.)
  void Diagnose() {
    for (int i = 0; i < o_.nodes; ++i) {
      bool reachable = netlab() ? CanConnect(Host(i), nodes_[i].client_port)
                                : CanConnect(nodes_[i].client_port);
      Note(absl::StrCat("diagnosis: ", Name(i), " accepts TCP connections: ",
                        reachable ? "yes" : "NO"));
      pid_t pid;
      {
        std::lock_guard<std::mutex> lock(mu_);
        pid = nodes_[i].pid;
      }
      if (pid > 0 && access("/usr/bin/gdb", X_OK) == 0) {
        RunCommand({"/usr/bin/gdb", "-q", "-batch", "-p", std::to_string(pid), "-ex",
                    "thread apply all bt 30"},
                   absl::StrCat(o_.dir, "/", Name(i), ".stacks"));
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (nodes_[i].store) {  // loopback: the replica is in this process
        std::map<std::string, std::string> map = nodes_[i].store->Snapshot();
        std::string values;
        for (const auto& [key, value] : map) absl::StrAppend(&values, " ", key, "=", value);
        Note(absl::StrCat("diagnosis: ", Name(i), "'s replica holds", values));
      }
    }
    // Loopback: the servants' delivery threads are in this process.
    if (!netlab() && access("/usr/bin/gdb", X_OK) == 0) {
      RunCommand({"/usr/bin/gdb", "-q", "-batch", "-p", std::to_string(getpid()), "-ex",
                  "thread apply all bt 30"},
                 absl::StrCat(o_.dir, "/driver.stacks"));
    }
  }

  void Shutdown() {
    std::vector<std::unique_ptr<cohort::Servant>> servants;
    std::vector<pid_t> pids;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Node& node : nodes_) {
        if (node.servant) servants.push_back(std::move(node.servant));
        if (node.servant_pid > 0) pids.push_back(node.servant_pid);
        if (node.pid > 0) pids.push_back(node.pid);
        node.pid = 0;
        node.servant_pid = 0;
      }
    }
    for (auto& servant : servants) servant->Stop();
    for (pid_t pid : pids) {
      kill(pid, SIGCONT);
      kill(pid, SIGTERM);
    }
    for (pid_t pid : pids) {
      bool gone = false;
      for (int attempt = 0; attempt < 60 && !gone; ++attempt) {
        gone = waitpid(pid, nullptr, WNOHANG) == pid;
        if (!gone) SleepMs(50);
      }
      if (!gone) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  }

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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::string self = argv[0];
  size_t slash = self.rfind('/');
  const std::string self_dir = slash == std::string::npos ? std::string(".") : self.substr(0, slash);
  o.cohortd = self_dir + "/cohortd";
  o.kv_servant = self_dir + "/kv-servant";
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kv-nemesis: %s needs a value\n", flag.c_str());
      return 2;
    }
    std::string value = argv[i + 1];
    if (flag == "--nodes") o.nodes = std::atoi(value.c_str());
    else if (flag == "--seconds") o.seconds = std::atoi(value.c_str());
    else if (flag == "--clients") o.clients = std::atoi(value.c_str());
    else if (flag == "--keys") o.keys = std::atoi(value.c_str());
    else if (flag == "--deadline-ms") o.deadline_ms = std::atoi(value.c_str());
    else if (flag == "--seed") o.seed = std::strtoull(value.c_str(), nullptr, 10);
    else if (flag == "--dir") o.dir = value;
    else if (flag == "--cohortd") o.cohortd = value;
    else if (flag == "--log-level") o.log_level = value;
    else if (flag == "--ordering") o.ordering = value;
    else if (flag == "--netlab") o.netlab = value;
    else if (flag == "--kv-servant") o.kv_servant = value;
    else if (flag == "--outside-clients") o.outside_clients = std::atoi(value.c_str());
    else if (flag == "--api") o.api = value;
    else if (flag == "--calls") o.calls = value;
    else if (flag == "--peer-transport") o.peer_transport = value;
    else if (flag == "--tls-ca") o.tls_ca = value;
    else if (flag == "--servants") o.servants = value;
    else {
      std::fprintf(stderr, "kv-nemesis: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (o.dir.empty() || o.nodes < 3 || o.clients < 1 || o.keys < 1 || o.seconds < 1 ||
      o.outside_clients < 0 || o.outside_clients > o.clients ||
      (o.ordering != "consensus" && o.ordering != "sequencer") ||
      (o.api != "local" && o.api != "grpc") || (o.calls != "sync" && o.calls != "async") ||
      (o.peer_transport != "tcp" && o.peer_transport != "grpc") ||
      (o.servants != "fresh" && o.servants != "rejoin")) {
    std::fprintf(stderr,
                 "usage: kv-nemesis --dir DIR [--nodes 3] [--seconds 10] [--clients 4] [--keys 4]"
                 " [--seed S] [--deadline-ms 1000] [--cohortd PATH] [--log-level warn]\n"
                 "       [--ordering consensus|sequencer] [--outside-clients K] [--api local|grpc]\n"
                 "       [--calls sync|async] [--servants fresh|rejoin]\n"
                 "       [--peer-transport tcp|grpc] [--tls-ca DIR (tools/make-test-ca)]\n"
                 "       [--netlab PATH/netlab [--kv-servant PATH]]   (root)\n");
    return 2;
  }
  if (!o.netlab.empty() && geteuid() != 0) {
    std::fprintf(stderr, "kv-nemesis: --netlab needs root (network namespaces)\n");
    return 2;
  }
  mkdir(o.dir.c_str(), 0755);
  signal(SIGPIPE, SIG_IGN);
  std::printf("kv-nemesis: seed %llu, ordering %s, dir %s\n",
              static_cast<unsigned long long>(o.seed), o.ordering.c_str(), o.dir.c_str());
  std::fflush(stdout);
  Run run(o);
  return run.Go();
}
