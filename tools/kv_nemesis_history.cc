// kv-nemesis: the clients' operations (put / get / cas against a random daemon that is up), each
// recorded as one JSON line in history.jsonl, and the faults' schedule in schedule.log
// (tools/kv_nemesis_run.h).
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "tools/json_string.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"

namespace cohort::kv_nemesis {

using ::cohort::tools::JsonString;

void Run::Note(const std::string& text) {
  std::lock_guard<std::mutex> lock(file_mu_);
  schedule_ << "t_ms=" << NowMs() << " " << text << "\n";
  schedule_.flush();
}

void Run::Record(int client, const std::string& op, const std::string& key,
                 const std::string& value, const std::string& expected,
                 const std::string& outcome, bool found, const std::string& result,
                 int64_t call_ns, int64_t return_ns, const std::string& error) {
  std::lock_guard<std::mutex> lock(file_mu_);
  history_ << "{\"client\":" << client << ",\"op\":\"" << op << "\",\"key\":" << JsonString(key)
           << ",\"value\":" << JsonString(value) << ",\"expected\":" << JsonString(expected)
           << ",\"outcome\":\"" << outcome
           << "\",\"ok\":" << (outcome == "unknown" ? "false" : "true")
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

namespace {

// --calls async-into: the operation goes through Client::InvokeAsyncInto into an AsyncCall this
// thread keeps for all its operations; its on_done (on the callbacks thread) says it ended.
absl::StatusOr<cohort::GroupReplies> InvokeIntoKept(cohort::Client* client, const std::string& op,
                                                    const std::string& payload, cohort::Mode mode,
                                                    absl::Duration deadline, cohort::Style style) {
  struct Kept {
    absl::Mutex mu;
    bool ended = false;
    cohort::AsyncCall call{[this](cohort::AsyncCall&) {
      absl::MutexLock lock(&mu);
      ended = true;
    }};
  };
  thread_local Kept kept;
  {
    absl::MutexLock lock(&kept.mu);
    kept.ended = false;
  }
  client->InvokeAsyncInto("kv", op, payload, mode, &kept.call, deadline, style);
  absl::MutexLock lock(&kept.mu);
  kept.mu.Await(absl::Condition(&kept.ended));  // every call ends, by its deadline at the latest
  if (!kept.call.status().ok()) return kept.call.status();
  return kept.call.replies();  // (a copy: the history keeps it)
}

}  // namespace

bool Run::Operate(int id, cohort::Client* client, std::mt19937_64& rng,
                  std::map<std::string, std::string>& seen, int* seq, cohort::Mode mode,
                  cohort::Style style) {
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
      : o_.calls == "async-into"
          ? InvokeIntoKept(client, op, payload, mode, absl::Milliseconds(o_.deadline_ms), style)
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
      Record(id, op, key, value, expected, "unknown", false, "", call, ret,
             first.status.ToString());
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
      Record(id, op, key, value, expected, "unknown", false, "", call, ret,
             first.status.ToString());
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
      Record(id, op, key, value, expected, "unknown", false, "", call, ret,
             first.status.ToString());
    }
  }
  return true;
}

bool Run::NoServant(const cohort::Reply& reply) {
  return reply.status.code() == absl::StatusCode::kUnavailable &&
         (reply.status.message().find("no servant attached") != absl::string_view::npos ||
          reply.status.message().find("servant detached before answering") !=
              absl::string_view::npos);
}

void Run::ClientLoop(int id) {
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
          Address(i),
          Connecting(absl::StrCat("kv-client-", id), absl::Milliseconds(o_.deadline_ms)));
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

}  // namespace cohort::kv_nemesis
