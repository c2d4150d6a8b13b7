// A replicated key-value store served over the Cohort Servant API (invocation/servant.h). Every
// replica executes the same requests in the same total order, so the maps stay identical; a
// joining replica receives the map through GetState/SetState.
//
// Methods and payloads (all text; keys are 1..256 bytes without spaces, '=' or control bytes;
// values are any bytes up to the daemon's payload limit):
//
//   put  "KEY=VALUE"              sets KEY (VALUE may be empty or contain '=' and spaces);
//                                 answers "ok"
//   get  "KEY"                    answers the value; NOT_FOUND if KEY is not set
//   cas  "KEY EXPECTED NEW"       compare-and-set: if KEY's value is EXPECTED, sets it to NEW and
//                                 answers "ok"; otherwise FAILED_PRECONDITION "cas KEY: expected
//                                 EXPECTED, found CURRENT" (CURRENT is "-" when KEY is not set).
//                                 EXPECTED is one token (no spaces); "-" means "KEY is not set".
//                                 NEW is the rest of the payload after the second space.
//
// A malformed payload (no '=', an invalid key, too few cas fields) is answered INVALID_ARGUMENT
// and changes nothing. Answers depend only on the map, so every replica answers the same.
//
// State (GetState/SetState): the map serialised as repeated "<key length>:<key><value length>:
// <value>" in key order; a malformed state is refused (INVALID_ARGUMENT) and the map kept.
#ifndef COHORT_TOOLS_KV_STORE_H_
#define COHORT_TOOLS_KV_STORE_H_

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "invocation/servant.h"

namespace cohort::kv {

inline constexpr size_t kMaxKeyBytes = 256;

inline absl::Status CheckKey(std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("empty key");
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("key longer than ", kMaxKeyBytes, " bytes"));
  }
  for (char c : key) {
    if (c == ' ' || c == '=' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("key contains a space, '=' or a control byte");
    }
  }
  return absl::OkStatus();
}

class KvStore {
 public:
  absl::StatusOr<std::string> Put(const std::string& payload) {
    size_t eq = payload.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError("put: payload must be KEY=VALUE");
    }
    std::string key = payload.substr(0, eq);
    if (absl::Status status = CheckKey(key); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("put: ", status.message()));
    }
    absl::MutexLock lock(&mu_);
    map_[std::move(key)] = payload.substr(eq + 1);
    return std::string("ok");
  }

  absl::StatusOr<std::string> Get(const std::string& payload) {
    if (absl::Status status = CheckKey(payload); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("get: ", status.message()));
    }
    absl::MutexLock lock(&mu_);
    auto it = map_.find(payload);
    if (it == map_.end()) return absl::NotFoundError(absl::StrCat("get ", payload, ": not set"));
    return it->second;
  }

  absl::StatusOr<std::string> Cas(const std::string& payload) {
    size_t first = payload.find(' ');
    size_t second = first == std::string::npos ? std::string::npos : payload.find(' ', first + 1);
    if (second == std::string::npos) {
      return absl::InvalidArgumentError("cas: payload must be KEY EXPECTED NEW");
    }
    std::string key = payload.substr(0, first);
    std::string expected = payload.substr(first + 1, second - first - 1);
    if (absl::Status status = CheckKey(key); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cas: ", status.message()));
    }
    if (expected.empty()) return absl::InvalidArgumentError("cas: empty EXPECTED (use - for unset)");
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    const bool matches = expected == "-" ? it == map_.end()
                                         : it != map_.end() && it->second == expected;
    if (!matches) {
      return absl::FailedPreconditionError(absl::StrCat("cas ", key, ": expected ", expected,
                                                        ", found ",
                                                        it == map_.end() ? "-" : it->second));
    }
    map_[key] = payload.substr(second + 1);
    return std::string("ok");
  }

  std::string GetState() const {
    absl::MutexLock lock(&mu_);
    std::string out;
    for (const auto& [key, value] : map_) {
      absl::StrAppend(&out, key.size(), ":", key, value.size(), ":", value);
    }
    return out;
  }

  absl::Status SetState(const std::string& state) {
    std::map<std::string, std::string> parsed;
    size_t at = 0;
    auto field = [&](std::string* out) -> bool {
      size_t colon = state.find(':', at);
      if (colon == std::string::npos || colon == at || colon - at > 20) return false;
      uint64_t length = 0;
      if (!absl::SimpleAtoi(absl::string_view(state).substr(at, colon - at), &length)) return false;
      if (length > state.size() - colon - 1) return false;
      *out = state.substr(colon + 1, length);
      at = colon + 1 + length;
      return true;
    };
    while (at < state.size()) {
      std::string key, value;
      if (!field(&key) || !field(&value) || !CheckKey(key).ok()) {
        return absl::InvalidArgumentError(absl::StrCat("kv state: malformed at byte ", at));
      }
      parsed[std::move(key)] = std::move(value);
    }
    absl::MutexLock lock(&mu_);
    map_ = std::move(parsed);
    return absl::OkStatus();
  }

  std::map<std::string, std::string> Snapshot() const {
    absl::MutexLock lock(&mu_);
    return map_;
  }

  // Serves put/get/cas and the state transfer on `servant` (before servant->Start()).
  // `views_to` (optional): each view the servant gets is appended there as a line
  // "VIEW_ID POSITION MEMBERS" (Servant::OnViewChange; kv-nemesis compares them across replicas).
  void RegisterWith(Servant* servant, const std::string& views_to = "") {
    servant->Serve("put", [this](const std::string& payload) { return Put(payload); });
    servant->Serve("get", [this](const std::string& payload) { return Get(payload); });
    servant->Serve("cas", [this](const std::string& payload) { return Cas(payload); });
    servant->OnGetState([this]() -> absl::StatusOr<std::string> { return GetState(); });
    servant->OnSetState([this](const std::string& state) { return SetState(state); });
    if (views_to.empty()) return;
    servant->OnViewChange([views_to](const GroupView& view) {
      std::string line = absl::StrCat(view.view_id, " ", view.position, " ");
      for (const ViewMember& member : view.members) absl::StrAppend(&line, member.name, ",");
      line += "\n";
      if (std::FILE* out = std::fopen(views_to.c_str(), "a")) {
        std::fputs(line.c_str(), out);
        std::fclose(out);
      }
    });
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort::kv

#endif  // COHORT_TOOLS_KV_STORE_H_
