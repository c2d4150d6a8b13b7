#include "invocation/local_calls.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "invocation/client.h"

namespace cohort::internal {

// A caller waiting for its result; lives on the caller's stack.
struct LocalCalls::Pending {
  const Connection* connection = nullptr;
  absl::Notification done;
  absl::StatusOr<GroupReplies> result;
};

LocalCalls::LocalCalls(LocalEndpoint endpoint, std::unique_ptr<LocalLink> first)
    : endpoint_(std::move(endpoint)) {
  absl::MutexLock lock(&mu_);
  connection_ = Adopt(std::move(first));
}

LocalCalls::~LocalCalls() {
  std::shared_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    connection = std::move(connection_);
  }
  if (connection == nullptr) return;
  connection->link->Shutdown();
  if (connection->reader.joinable()) connection->reader.join();
}

std::shared_ptr<LocalCalls::Connection> LocalCalls::Adopt(std::unique_ptr<LocalLink> link) {
  auto connection = std::make_shared<Connection>();
  connection->link = std::move(link);
  Connection* raw = connection.get();
  connection->reader = std::thread([this, raw] { ReadResults(raw); });
  return connection;
}

absl::StatusOr<std::shared_ptr<LocalCalls::Connection>> LocalCalls::Current() {
  absl::MutexLock lock(&mu_);
  if (connection_ != nullptr && !connection_->broken) return connection_;
  if (connection_ != nullptr) {
    // Broken: its reader has failed its calls and needs no lock of ours to finish.
    if (connection_->reader.joinable()) connection_->reader.join();
    connection_.reset();
  }
  absl::StatusOr<std::unique_ptr<LocalLink>> link = LocalLink::Open(endpoint_, absl::Seconds(5));
  if (!link.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the daemon's local fast path: ", link.status().message()));
  }
  connection_ = Adopt(*std::move(link));
  return connection_;
}

void LocalCalls::ReadResults(Connection* connection) {
  api::LocalFrame frame;
  std::string why = "closed by the daemon";
  while (connection->link->Read(&frame)) {
    if (frame.has_result()) {
      api::PipelinedResult* result = frame.mutable_result();
      if (result->status_code() == 0) {
        Complete(result->call(), ToGroupReplies(result->reply()));
      } else {
        Complete(result->call(), absl::Status(static_cast<absl::StatusCode>(result->status_code()),
                                              result->error()));
      }
    } else if (frame.has_error()) {
      why = frame.error();
      break;
    }
  }
  connection->link->Shutdown();
  std::vector<Pending*> orphans;
  {
    absl::MutexLock lock(&mu_);
    connection->broken = true;  // from now on no call is registered on it
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second->connection == connection) {
        orphans.push_back(it->second);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  absl::Status status =
      absl::UnavailableError(absl::StrCat("the local link to the daemon broke: ", why));
  for (Pending* pending : orphans) {
    pending->result = status;
    pending->done.Notify();
  }
}

bool LocalCalls::Complete(uint64_t call, absl::StatusOr<GroupReplies> result) {
  Pending* pending = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(call);
    if (it == pending_.end()) return false;
    pending = it->second;
    pending_.erase(it);
  }
  pending->result = std::move(result);
  pending->done.Notify();  // the caller may return at once: `pending` is not touched after this
  return true;
}

std::optional<absl::StatusOr<GroupReplies>> LocalCalls::Invoke(const api::InvokeRequest& request,
                                                               absl::Duration wait) {
  absl::StatusOr<std::shared_ptr<Connection>> current = Current();
  if (!current.ok()) return std::nullopt;
  std::shared_ptr<Connection> connection = *std::move(current);
  Pending pending;
  pending.connection = connection.get();
  api::LocalFrame frame;
  api::PipelinedCall* call = frame.mutable_call();
  {
    absl::MutexLock lock(&mu_);
    if (connection->broken) {
      return absl::StatusOr<GroupReplies>(absl::UnavailableError("the local link broke: try again"));
    }
    call->set_call(next_call_++);
    pending_[call->call()] = &pending;
  }
  const uint64_t id = call->call();
  *call->mutable_invoke() = request;
  if (absl::Status written = connection->link->Write(frame); !written.ok()) {
    Complete(id, written);  // the reader sees the link end and fails the others
  }
  if (!pending.done.WaitForNotificationWithTimeout(wait) &&
      Complete(id, absl::DeadlineExceededError(
                       "no result from the daemon in time: its local link is reset"))) {
    connection->link->Shutdown();  // the daemon answers every call by its deadline: it is stuck
  }
  pending.done.WaitForNotification();
  return std::move(pending.result);  // NOLINT: into the optional
}

}  // namespace cohort::internal
