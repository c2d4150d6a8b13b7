// kv-nemesis's checks (tools/kv_nemesis_run.h): whether the group is healthy (servants that
// ended unasked replaced meanwhile), whether an acknowledged write was lost, and a diagnosis of
// the daemons when the group does not recover.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"
#include "tools/subprocess.h"

namespace cohort::kv_nemesis {

using cohort::subprocess::CanConnect;

std::string Run::ViewsDiffer(int* views) const {
  std::map<std::string, std::pair<std::string, std::string>> seen;  // view id -> (node, rest)
  for (int i = 0; i < o_.nodes; ++i) {
    const std::string text = ReadFrom(ViewsPath(i), 0);
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) break;
      const std::string line = text.substr(at, end - at);
      at = end + 1;
      const size_t space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string id = line.substr(0, space), rest = line.substr(space + 1);
      auto [known, added] = seen.emplace(id, std::make_pair(Name(i), rest));
      if (added) continue;
      if (known->second.second != rest) {
        return absl::StrCat("view ", id, ": ", known->second.first, " got \"", known->second.second,
                            "\", ", Name(i), " got \"", rest, "\" (position, members)");
      }
    }
  }
  *views = static_cast<int>(seen.size());
  return "";
}

bool Run::Healthy() {
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

void Run::ReviveServants() {
  for (int i = 0; i < o_.nodes; ++i) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      Node& node = nodes_[i];
      if (node.state != State::kUp || node.pid <= 0) continue;
      absl::Status status;
      if (node.servant && node.servant->Ended(&status)) {
        why = status.ToString();
      } else if (node.servant_pid > 0 &&
                 waitpid(node.servant_pid, nullptr, WNOHANG) == node.servant_pid) {
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

bool Run::WaitHealthy(int limit_ms) {
  int64_t until = NowMs() + limit_ms;
  while (NowMs() < until) {
    ReviveServants();
    if (Healthy()) return true;
    SleepMs(100);
  }
  return false;
}

int Run::LostWrites() {
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

void Run::Diagnose() {
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

}  // namespace cohort::kv_nemesis
