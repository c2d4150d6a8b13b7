#include "invocation/remote_watch.h"

#include <optional>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/doubling_pause.h"
#include "invocation/steady_time.h"
#include "nso/status.h"
#include "proto/api.grpc.pb.h"

namespace cohort::internal {
namespace {

// What the watch's thread uses: shared with the GroupWatch, so that a watch destroyed from its
// own callback can leave its thread to finish.
struct WatchState {
  WatchState(std::shared_ptr<grpc::Channel> channel, std::string token, api::GroupRequest request,
             ClientBackend::WatchHandlers handlers)
      : stub(api::Cohort::NewStub(std::move(channel))),
        token(std::move(token)),
        request(std::move(request)),
        handlers(std::move(handlers)) {}

  // One WatchGroup stream. Cancelled by ~RemoteWatch through `context` (under mu).
  struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<api::GroupDetailsReply>> reader;
  };

  // A new stream, unless the watch is stopping (then nullopt).
  std::optional<Stream> Open() ABSL_LOCKS_EXCLUDED(mu) {
    Stream stream;
    stream.context = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) stream.context->AddMetadata("authorization", "Bearer " + token);
    {
      absl::MutexLock lock(&mu);
      if (stopping) return std::nullopt;
      context = stream.context.get();
    }
    stream.reader = stub->WatchGroup(stream.context.get(), request);
    return stream;
  }

  // The stream's end status, or nullopt when the watch is stopping (its owner cancelled it).
  std::optional<grpc::Status> Finish(Stream& stream) ABSL_LOCKS_EXCLUDED(mu) {
    grpc::Status status = stream.reader->Finish();
    absl::MutexLock lock(&mu);
    context = nullptr;
    if (stopping) return std::nullopt;
    return status;
  }

  // Gives `reply` to on_change unless it is the last one given (a new stream after a loss starts
  // with the view now, which may be the one seen before).
  void Give(const api::GroupDetailsReply& reply) {
    std::string text = reply.SerializeAsString();
    if (text == last_given) return;
    last_given = std::move(text);
    handlers.on_change(reply);
  }

  // Sleeps `pause`, or less if the watch stops; false when it stops.
  bool Pause(absl::Duration pause) ABSL_LOCKS_EXCLUDED(mu) {
    return !stopped.WaitForNotificationWithTimeout(pause);
  }

  void Stop() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    stopping = true;
    if (context != nullptr) context->TryCancel();
    stopped.Notify();
  }

  // The watch's thread, once the first stream gave its first reply.
  void Follow(Stream stream) {
    for (;;) {
      api::GroupDetailsReply reply;
      while (stream.reader->Read(&reply)) Give(reply);
      std::optional<grpc::Status> status = Finish(stream);
      if (!status) return;
      // A daemon that goes or shuts down ends its streams with UNAVAILABLE (or cancels them).
      if (status->error_code() != grpc::StatusCode::UNAVAILABLE &&
          status->error_code() != grpc::StatusCode::CANCELLED) {
        if (handlers.on_end) handlers.on_end(nso::FromGrpcStatus(*status));
        return;
      }
      if (handlers.on_lost) handlers.on_lost(nso::FromGrpcStatus(*status));
      invocation::DoublingPause pauses(absl::Milliseconds(50), absl::Seconds(1));
      for (;;) {
        if (!Pause(pauses.Next())) return;
        std::optional<Stream> next = Open();
        if (!next) return;
        if (next->reader->Read(&reply)) {
          Give(reply);
          stream = std::move(*next);
          break;
        }
        status = Finish(*next);
        if (!status) return;
        if (status->error_code() != grpc::StatusCode::UNAVAILABLE &&
            status->error_code() != grpc::StatusCode::CANCELLED) {
          if (handlers.on_end) handlers.on_end(nso::FromGrpcStatus(*status));
          return;
        }
      }
    }
  }

  const std::unique_ptr<api::Cohort::Stub> stub;
  const std::string token;
  const api::GroupRequest request;
  const ClientBackend::WatchHandlers handlers;
  std::string last_given;  // the watch's thread (and Start, before it)

  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  SteadyNotification stopped;  // notified with `stopping`
  grpc::ClientContext* context ABSL_GUARDED_BY(mu) = nullptr;  // the open stream's
};

class RemoteWatch final : public GroupWatch {
 public:
  explicit RemoteWatch(std::shared_ptr<WatchState> state) : state_(std::move(state)) {}
  ~RemoteWatch() override {
    state_->Stop();
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // from its own callback: the thread ends after it, holding state_
    } else {
      thread_.join();
    }
  }
  void Run(WatchState::Stream stream) {
    thread_ = std::thread([state = state_, stream = std::move(stream)]() mutable {
      state->Follow(std::move(stream));
    });
  }

 private:
  std::shared_ptr<WatchState> state_;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GroupWatch>> StartRemoteWatch(
    std::shared_ptr<grpc::Channel> channel, std::string token, api::GroupRequest request,
    ClientBackend::WatchHandlers handlers) {
  auto state = std::make_shared<WatchState>(std::move(channel), std::move(token),
                                            std::move(request), std::move(handlers));
  std::optional<WatchState::Stream> stream = state->Open();
  api::GroupDetailsReply reply;
  if (!stream->reader->Read(&reply)) {
    grpc::Status status = stream->reader->Finish();
    return nso::FromGrpcStatus(status);
  }
  state->Give(reply);
  auto watch = std::make_unique<RemoteWatch>(state);
  watch->Run(std::move(*stream));
  return watch;
}

}  // namespace cohort::internal
