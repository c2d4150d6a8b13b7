// kv-nemesis: the daemons and their servants (tools/kv_nemesis_run.h): configs and ports,
// starting and restarting daemons, attaching servants (in this process, or kv-servant processes
// on netlab hosts), kill -9, SIGSTOP / SIGCONT, and stopping everything.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"
#include "tools/kv_store.h"
#include "tools/subprocess.h"
#include "tools/test_ca.h"

namespace cohort::kv_nemesis {

using cohort::subprocess::CanConnect;
using cohort::subprocess::FreePort;
using cohort::subprocess::Spawn;

Run::Run(Options options) : o_(std::move(options)), rng_(o_.seed) {
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

Run::~Run() {
  Shutdown();
  TearDownLab();
}

void Run::WriteConfigs() {
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
        << (o_.durable == "on" ? "    durable: true\n" : "")
        << (o_.tls_ca.empty() ? std::string("tls: {insecure: true}\n")
                              : cohort::TestCaTlsYaml(o_.tls_ca, "cohort"))
        << "peer_transport: " << o_.peer_transport << "\n"
        // As deploy/ does: a restarted daemon knows it is one.
        << "incarnation_file: " << o_.dir << "/n" << i + 1 << ".incarnation\n";
  }
}

void Run::NewPorts() {
  for (Node& node : nodes_) {
    node.peer_port = FreePort();
    node.client_port = FreePort();
  }
  WriteConfigs();
}

bool Run::RestartNode(int i) {
  for (int attempt = 1; attempt <= 3; ++attempt) {
    if (StartNode(i)) return true;
    Note(absl::StrCat("restart of ", Name(i), " failed (attempt ", attempt, "; see ", Log(i), ")"));
    SleepMs(300);
  }
  return false;
}

cohort::ConnectOptions Run::Connecting(std::string name, absl::Duration timeout) const {
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

bool Run::StartNode(int i) {
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

bool Run::AttachServant(int i) {
  auto store = std::make_unique<cohort::kv::KvStore>();
  std::unique_ptr<cohort::Servant> servant;
  for (int attempt = 0; attempt < 20 && servant == nullptr; ++attempt) {
    auto created =
        cohort::Servant::Create(Address(i), "kv", Connecting(absl::StrCat("kv-", Name(i))));
    if (created.ok()) {
      store->RegisterWith(created->get(), ViewsPath(i));
      if (rejoining()) (*created)->RejoinAfterDaemonRestart();
      if (o_.durable == "on") (*created)->KeepStateIn(KeptPath(i));
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

bool Run::StartServantProcess(int i) {
  std::string log = absl::StrCat(o_.dir, "/kv-", Name(i), ".log");
  for (int attempt = 0; attempt < 20; ++attempt) {
    size_t offset = FileSize(log);
    std::vector<std::string> argv = {IpCommand(), "netns", "exec", Namespace(i), o_.kv_servant,
                                     "--daemon", Address(i), "--name",
                                     absl::StrCat("kv-", Name(i))};
    if (!o_.tls_ca.empty()) {
      argv.insert(argv.end(), {"--ca-file", o_.tls_ca + "/ca.pem", "--server-name", "cohort"});
    }
    if (rejoining()) argv.insert(argv.end(), {"--rejoin", "yes"});
    if (o_.durable == "on") argv.insert(argv.end(), {"--keep-state", KeptPath(i)});
    argv.insert(argv.end(), {"--views-to", ViewsPath(i)});
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

void Run::Kill(int i) {
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

void Run::CrashServant(int i) {
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

void Run::Freeze(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_[i].state = State::kStopped;
  if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGSTOP);
}

void Run::Thaw(int i) {
  std::lock_guard<std::mutex> lock(mu_);
  if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGCONT);
  nodes_[i].state = State::kUp;
}

std::vector<int> Run::UpNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> up;
  for (int i = 0; i < o_.nodes; ++i) {
    if (nodes_[i].state == State::kUp && nodes_[i].pid > 0) up.push_back(i);
  }
  return up;
}

void Run::Shutdown() {
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

}  // namespace cohort::kv_nemesis
