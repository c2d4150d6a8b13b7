#include "invocation/local_calls.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "nso/scratch_arena.h"

namespace cohort::internal {
namespace {

// The helper reads at most this long at a time, so that a turn it no longer has ends.
constexpr absl::Duration kReadSlice = absl::Milliseconds(100);

// Writes call `number` of `request` on `link`. The frame's objects are on the stack and the
// request is borrowed while it is serialised: no allocation or copy of them per call (issue 7).
absl::Status WriteCall(LocalLink* link, uint64_t number, const api::InvokeRequest& request) {
  char block[256];
  google::protobuf::Arena arena(nso::ArenaOn(block, sizeof(block)));
  auto* frame = google::protobuf::Arena::CreateMessage<api::LocalFrame>(&arena);
  api::PipelinedCall* call = frame->mutable_call();
  call->set_call(number);
  call->unsafe_arena_set_allocated_invoke(const_cast<api::InvokeRequest*>(&request));
  absl::Status written = link->Write(*frame);
  call->unsafe_arena_release_invoke();  // given back before the arena goes
  return written;
}

// A call's result as its caller takes it: the replies (moved out of `got`, or swapped into
// `into`, when given: then an empty GroupReplies, which allocates nothing), or the error.
absl::StatusOr<GroupReplies> ResultFor(api::PipelinedResult* got, GroupReplies* into) {
  if (got->status_code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(got->status_code()), got->error());
  }
  if (into == nullptr) return ToGroupReplies(got->mutable_reply());
  SwapIntoGroupReplies(got->mutable_reply(), into);
  return GroupReplies();
}

absl::Status TimedOut() {
  return absl::DeadlineExceededError("no result from the daemon in time: its local link is reset");
}
absl::Status Reset() {
  return absl::UnavailableError(
      "the local link to the daemon broke: reset after a call got no result in time");
}

}  // namespace

LocalCalls::LocalCalls(LocalEndpoint endpoint, std::unique_ptr<LocalLink> first) {
  {
    absl::MutexLock open_lock(&open_mu_);
    endpoint_ = std::move(endpoint);
  }
  absl::MutexLock lock(&mu_);
  connection_ = Adopt(std::move(first));
}

LocalCalls::~LocalCalls() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (opening_ != nullptr) opening_->Shutdown();  // a reopen gives up at once
  }
  {
    absl::MutexLock start(&reopener_mu_);
    if (reopener_.joinable()) reopener_.join();
  }
  std::shared_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    connection = std::move(connection_);
    if (connection == nullptr) return;
    // Its helper leaves; asynchronous calls still pending fail.
    if (!connection->turn.broken) {
      Broken(connection.get(), absl::CancelledError("the client is closing"));
    }
  }
  if (connection->helper.joinable()) connection->helper.join();
}

ReadCounts LocalCalls::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

std::shared_ptr<LocalCalls::Connection> LocalCalls::Adopt(std::unique_ptr<LocalLink> link) {
  auto connection = std::make_shared<Connection>();
  connection->link = std::move(link);
  Connection* raw = connection.get();
  connection->helper = std::thread([this, raw] { HelperLoop(raw); });
  return connection;
}

absl::StatusOr<std::shared_ptr<LocalCalls::Connection>> LocalCalls::Current() {
  {
    absl::MutexLock lock(&mu_);
    if (connection_ != nullptr && !connection_->turn.broken) return connection_;
  }
  absl::MutexLock open_lock(&open_mu_);
  std::shared_ptr<Connection> old;
  {
    absl::MutexLock lock(&mu_);
    if (connection_ != nullptr && !connection_->turn.broken) return connection_;  // reopened meanwhile
    old = std::move(connection_);
  }
  // Broken: its calls have failed and its helper leaves at once (callers still on it hold it).
  if (old != nullptr && old->helper.joinable()) old->helper.join();
  absl::StatusOr<std::unique_ptr<LocalLink>> link = LocalLink::Connect(endpoint_);
  absl::Status hello = link.status();
  if (link.ok()) {
    {
      absl::MutexLock lock(&mu_);
      // The destructor shuts a link still waiting for a frozen daemon's hello (it would wait 5 s).
      if (closing_) return absl::CancelledError("the client is closing");
      opening_ = link->get();
    }
    hello = (*link)->Hello(endpoint_, absl::Seconds(5));
    absl::MutexLock lock(&mu_);
    opening_ = nullptr;
    if (closing_) return absl::CancelledError("the client is closing");
  }
  if (!hello.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the daemon's local fast path: ", hello.message()));
  }
  absl::MutexLock lock(&mu_);
  connection_ = Adopt(*std::move(link));
  return connection_;
}

void LocalCalls::SetEndpoint(LocalEndpoint endpoint) {
  absl::MutexLock open_lock(&open_mu_);
  endpoint_ = std::move(endpoint);
}

std::shared_ptr<LocalCalls::Connection> LocalCalls::CurrentOrReopenLater() {
  {
    absl::MutexLock lock(&mu_);  // the hot path: one lock, as Current()
    if (connection_ != nullptr && !connection_->turn.broken) return connection_;
    if (reopening_ || closing_) return nullptr;
  }
  absl::MutexLock start(&reopener_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (connection_ != nullptr && !connection_->turn.broken) return connection_;
    if (reopening_ || closing_) return nullptr;
    reopening_ = true;
  }
  if (reopener_.joinable()) reopener_.join();  // the last one, done (it cleared reopening_)
  reopener_ = std::thread([this] {
    (void)Current();  // failed: the next asynchronous call without a link tries again
    absl::MutexLock lock(&mu_);
    reopening_ = false;
  });
  return nullptr;
}

void LocalCalls::Broken(Connection* connection, const absl::Status& status) {
  connection->turn.broken = true;  // from now on no call is registered on it
  connection->turn.reading = false;
  connection->link->Shutdown();
  pending_.FailAll(connection, status);
  connection->turn.helper_wake.Signal();  // it leaves
}

bool LocalCalls::ReadOne(Connection* connection, Pending* self, SteadyTime deadline) {
  api::LocalFrame& frame = connection->frame;  // the reader's: reused, as are its strings
  LocalLink::Outcome outcome = connection->link->ReadUntil(&frame, deadline);
  // The result read, made for its caller once known (under mu_: the frame is this reader's until
  // its turn stops; InvokeInto's caller gets the strings swapped into its own memory).
  api::PipelinedResult* got = nullptr;
  if (outcome == LocalLink::Outcome::kFrame && frame.has_result()) got = frame.mutable_result();
  absl::StatusOr<GroupReplies> result;  // (UNKNOWN, no message: no allocation) until a result
  Pending* taken = nullptr;
  AsyncInto* async_into = nullptr;  // or an asynchronous call into its caller's memory
  bool more = true;
  {
    absl::MutexLock lock(&mu_);
    if (connection->turn.broken) return false;  // failed meanwhile (a write, a deadline, the destructor)
    if (self == nullptr && pending_.FailExpired(SteadyNow(), &TimedOut)) {
      Broken(connection, Reset());  // a result is missing: the link is stuck
      return false;
    }
    switch (outcome) {
      case LocalLink::Outcome::kEnded:
        Broken(connection,
               absl::UnavailableError("the local link to the daemon broke: closed by the daemon"));
        return false;
      case LocalLink::Outcome::kTimeout:
        if (self != nullptr && !self->done && SteadyNow() >= deadline) {
          // The daemon answers every call by its deadline: it is stuck, and the link is reset.
          Calls::Finish(pending_.Take(self->call), TimedOut());
          Broken(connection, Reset());
          return false;
        }
        break;  // woke early: read on
      case LocalLink::Outcome::kFrame:
        if (frame.has_error()) {
          Broken(connection, absl::UnavailableError(absl::StrCat(
                                 "the local link to the daemon broke: ", frame.error())));
          return false;
        }
        if (got != nullptr) {
          taken = pending_.Take(got->call());
          ++(self != nullptr ? reads_.by_callers : reads_.by_helper);
          if (taken != nullptr) result = ResultFor(got, taken->into);
          if (taken != nullptr && taken->async_into != nullptr) {
            // Its replies are in the caller's memory already; its Pending is kept for the next.
            async_into = pending_.Recycle(taken);
            taken = nullptr;
          }
        }
        break;
    }
    // A caller reads until its own result has come, then what is buffered already (results that
    // arrived together reach their callers without another reader); the helper while the turn
    // says so (reader_turn.h).
    more = self != nullptr ? !self->done || connection->link->FrameBuffered()
                           : connection->turn.HelperReadsOn(
                                 taken != nullptr, outcome == LocalLink::Outcome::kTimeout);
    if (!more) connection->turn.Stop(/*caller=*/self != nullptr);
  }
  // Its caller is woken without mu_ held, so that it and the callers starting calls do not wait
  // for the reader's system call (64 callers: 15-40% of the calls/s).
  if (taken != nullptr) Calls::Finish(taken, std::move(result));
  if (async_into != nullptr) async_into->Finish(result.status());
  return more;
}

void LocalCalls::HelperLoop(Connection* connection) {
  mu_.Lock();
  while (connection->turn.AwaitHelperTurn(&mu_)) {
    mu_.Unlock();
    // Its reads time out after a slice only to end a lingering turn; a caller whose deadline
    // passes breaks the link, which ends the read.
    while (ReadOne(connection, nullptr, SteadyAfter(kReadSlice))) {
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

std::optional<absl::StatusOr<GroupReplies>> LocalCalls::Invoke(const api::InvokeRequest& request,
                                                               absl::Duration wait) {
  return Call(request, wait, /*may_reopen=*/true, /*into=*/nullptr);
}

std::optional<absl::Status> LocalCalls::InvokeInto(const api::InvokeRequest& request,
                                                   absl::Duration wait, GroupReplies* into) {
  std::optional<absl::StatusOr<GroupReplies>> result =
      Call(request, wait, /*may_reopen=*/true, into);
  if (!result.has_value()) return std::nullopt;
  if (!result->ok()) into->replies.clear();
  return result->status();
}

bool LocalCalls::InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done* done) {
  return StartAsync(
      request,
      [&](Connection* connection) {
        auto* pending = new Pending;  // freed by Finish
        pending->connection = connection;
        pending->on_done = std::move(*done);
        pending->deadline = SteadyAfter(wait);
        return pending;
      },
      [&](const absl::Status& status) { (*done)(status); },
      [&](Pending* pending) {
        *done = std::move(pending->on_done);
        delete pending;
      });
}

bool LocalCalls::InvokeAsyncInto(const api::InvokeRequest& request, absl::Duration wait,
                                 AsyncInto* call) {
  return StartAsync(
      request,
      [&](Connection* connection) {
        return pending_.NewAsyncInto(connection, call, SteadyAfter(wait));
      },
      [&](const absl::Status& status) { call->Finish(status); },
      [&](Pending* pending) { pending_.Recycle(pending); });
}

template <typename MakeFn, typename FailFn, typename UnmakeFn>
bool LocalCalls::StartAsync(const api::InvokeRequest& request, MakeFn make, FailFn fail,
                            UnmakeFn unmake) {
  std::shared_ptr<Connection> connection = CurrentOrReopenLater();
  if (connection == nullptr) return false;
  bool idle = false;  // nobody reads the link: this caller looks at it before the call leaves
  uint64_t number = 0;
  {
    absl::MutexLock lock(&mu_);
    if (connection->turn.broken) {
      fail(absl::UnavailableError("the local link broke: try again"));
      return true;
    }
    number = pending_.Add(make(connection.get()));
    if (!connection->turn.reading) {
      if (connection->turn.pending == 1 && !connection->turn.helper_asked) {
        connection->turn.reading = idle = true;  // for the look below; then the helper's
      } else {
        connection->turn.AskHelper();
      }
    }
  }
  if (idle && connection->link->PeerClosed()) {
    // As in Call: the daemon closed this idle link; the call has not left and goes over gRPC
    // while a new link opens in the background.
    {
      absl::MutexLock lock(&mu_);
      Pending* pending = pending_.Take(number);
      if (!connection->turn.broken) {
        Broken(connection.get(),
               absl::UnavailableError("the local link to the daemon broke: closed by the daemon"));
      }
      if (pending == nullptr) return true;  // failed meanwhile (the destructor): it has ended
      unmake(pending);  // (under mu_: the caller's to send again)
    }
    (void)CurrentOrReopenLater();  // this call goes over gRPC; the next ones on a new link
    return false;
  }
  absl::Status written = WriteCall(connection->link.get(), number, request);
  absl::MutexLock lock(&mu_);
  if (!written.ok()) {
    // The link is shut (LocalLink::Write): this call and the others on it fail.
    if (!connection->turn.broken) Broken(connection.get(), written);
  } else if (idle && !connection->turn.broken) {
    connection->turn.Stop(/*caller=*/true);  // the helper reads the result
  }
  return true;
}

std::optional<absl::StatusOr<GroupReplies>> LocalCalls::Call(const api::InvokeRequest& request,
                                                             absl::Duration wait, bool may_reopen,
                                                             GroupReplies* into) {
  absl::StatusOr<std::shared_ptr<Connection>> current = Current();
  if (!current.ok()) return std::nullopt;
  std::shared_ptr<Connection> connection = *std::move(current);
  Pending pending;
  pending.connection = connection.get();
  pending.into = into;
  bool read_own = false;  // alone on the link: this caller reads its result itself
  {
    absl::MutexLock lock(&mu_);
    if (connection->turn.broken) {
      return absl::StatusOr<GroupReplies>(absl::UnavailableError("the local link broke: try again"));
    }
    pending_.Add(&pending);  // numbers the call (pending.call)
    if (!connection->turn.reading) {
      if (connection->turn.pending == 1) {
        connection->turn.reading = read_own = true;  // claimed before the call leaves: no one else reads
      } else {
        connection->turn.AskHelper();
      }
    }
  }
  if (read_own && connection->link->PeerClosed()) {
    // Nobody read this idle link since its last call, so nobody saw the daemon close it (a
    // restart, an exit). This call has not left: it goes on a new link, or over gRPC if the fast
    // path is gone; calls that came meanwhile were waiting on the dead link and fail.
    {
      absl::MutexLock lock(&mu_);
      pending_.Take(pending.call);
      if (!connection->turn.broken) {
        Broken(connection.get(),
               absl::UnavailableError("the local link to the daemon broke: closed by the daemon"));
      }
    }
    if (may_reopen) return Call(request, wait, /*may_reopen=*/false, into);
    return absl::StatusOr<GroupReplies>(absl::UnavailableError("the local link broke: try again"));
  }
  absl::Status written = WriteCall(connection->link.get(), pending.call, request);
  const SteadyTime deadline = SteadyAfter(wait);
  if (!written.ok()) {
    // The link is shut (LocalLink::Write): this call and the others on it fail, and the next
    // call opens a new one.
    absl::MutexLock lock(&mu_);
    if (!connection->turn.broken) Broken(connection.get(), written);
  } else if (read_own) {
    while (ReadOne(connection.get(), &pending, deadline)) {
    }
  }
  if (!pending.noted.WaitForNotificationUntil(deadline)) {
    absl::MutexLock lock(&mu_);
    if (!pending.done) {
      Calls::Finish(pending_.Take(pending.call), TimedOut());
      Broken(connection.get(), Reset());  // a reader (if any) finds it broken when it is back
    }
  }
  pending.noted.WaitForNotification();
  return std::move(pending.result);  // NOLINT: into the optional
}

}  // namespace cohort::internal
