#include "invocation/kept_call_log.h"

#include "invocation/kept_state.h"

namespace cohort::invocation {

void KeptCallLog::Add(const std::string& call, const absl::StatusOr<std::string>& result) {
  if (call.empty()) return;
  api::KeptCall kept;
  kept.set_call(call);
  kept.set_status_code(static_cast<int>(result.status().code()));
  if (result.ok()) {
    kept.set_payload(*result);
  } else {
    kept.set_error(std::string(result.status().message()));
  }
  Push(kept);
}

void KeptCallLog::Replace(const api::KeptCalls& calls) {
  Clear();
  for (const api::KeptCall& call : calls.calls()) Push(call);
}

absl::Status KeptCallLog::ReplaceFrom(const std::string& bytes) {
  api::KeptCalls calls;
  if (!calls.ParseFromString(bytes)) {
    return absl::DataLossError("the calls kept with the state are damaged");
  }
  Replace(calls);
  return absl::OkStatus();
}

void KeptCallLog::Clear() {
  records_.clear();
  bytes_ = 0;
}

std::string KeptCallLog::Bytes() const {
  std::string out;
  out.reserve(bytes_);
  for (const std::string& record : records_) out += record;
  return out;
}

void KeptCallLog::Push(const api::KeptCall& call) {
  // The field as api::KeptCalls serializes it: tag (field 1, length-delimited), length, bytes.
  std::string body = call.SerializeAsString();
  std::string record(1, '\x0a');
  for (size_t n = body.size(); ; n >>= 7) {
    if (n < 0x80) {
      record.push_back(static_cast<char>(n));
      break;
    }
    record.push_back(static_cast<char>((n & 0x7f) | 0x80));
  }
  record += body;
  bytes_ += record.size();
  records_.push_back(std::move(record));
  while (records_.size() > kKeptCallsMax || (bytes_ > kKeptCallsMaxBytes && records_.size() > 1)) {
    bytes_ -= records_.front().size();
    records_.pop_front();
  }
}

}  // namespace cohort::invocation
