#include "invocation/servant.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "invocation/backpressure.h"
#include "invocation/doubling_pause.h"
#include "invocation/client.h"
#include "nso/scratch_arena.h"
#include "nso/status.h"

namespace cohort {

absl::StatusOr<std::unique_ptr<Servant>> Servant::Create(const std::string& address,
                                                         const std::string& group,
                                                         const std::string& name) {
  ConnectOptions options;
  options.client_name = name;
  return Create(address, group, options);
}

namespace {

constexpr absl::Duration kRegisterTimeout = absl::Seconds(10);
// ServeInto's reply memory is kept between calls up to this size (a larger one is let go).
constexpr size_t kKeptReplyBytes = 64 * 1024;

// A servant's registration in a cohortd daemon: the Serve stream.
class RemoteServant final : public internal::ServantBackend {
 public:
  RemoteServant(std::shared_ptr<grpc::Channel> channel, std::string token)
      : channel_(std::move(channel)), stub_(api::Cohort::NewStub(channel_)), token_(std::move(token)) {}

  absl::Status Register(const api::ServantMessage::Register& request) override {
    if (!token_.empty()) context_.AddMetadata("authorization", "Bearer " + token_);
    stream_ = stub_->Serve(&context_);
    api::ServantMessage message;
    *message.mutable_register_() = request;
    api::ServantEvent ack;
    // The stream lives as long as the servant, so it has no deadline; the registration does: a
    // daemon that does not acknowledge it in time (stopped, or stuck) gets the stream cancelled,
    // and Start returns an error the application can retry instead of hanging.
    internal::SteadyNotification answered;
    bool timed_out = false;
    std::thread watchdog([this, &answered, &timed_out] {
      if (!answered.WaitForNotificationWithTimeout(kRegisterTimeout)) {
        timed_out = true;
        context_.TryCancel();
      }
    });
    const bool ok = stream_->Write(message) && stream_->Read(&ack) && ack.registered();
    answered.Notify();
    watchdog.join();
    max_reply_bytes_ = ack.max_reply_bytes();
    if (!ok) {
      grpc::Status status = stream_->Finish();
      if (timed_out) {
        return absl::DeadlineExceededError(absl::StrCat(
            "the daemon did not acknowledge the registration within ",
            absl::FormatDuration(kRegisterTimeout)));
      }
      return status.ok() ? absl::UnavailableError("daemon closed the servant stream")
                         : nso::FromGrpcStatus(status);
    }
    return absl::OkStatus();
  }
  bool Next(api::ServantEvent* event) override { return stream_->Read(event); }
  void Answer(api::ServantMessage::Answer& answer) override {
    api::ServantMessage message;
    *message.mutable_answer() = answer;  // (the gRPC stream: a copy off the answer's arena)
    absl::MutexLock lock(&write_mu_);
    stream_->Write(message);
  }
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                      absl::Duration wait) override {
    return internal::InvokeRpc(stub_.get(), request, wait - absl::Seconds(2), token_);
  }
  void Cancel() override { context_.TryCancel(); }
  const char* via() const override { return "grpc"; }
  absl::Status Finish() override { return nso::FromGrpcStatus(stream_->Finish()); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<api::Cohort::Stub> stub_;
  const std::string token_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<api::ServantMessage, api::ServantEvent>> stream_;
  absl::Mutex write_mu_;  // Answer may come from several threads
};

// A servant's registration over the daemon's local fast path (nso/local_api.h): deliveries and
// answers as LocalFrames on a Unix socket served by the daemon's protocol thread. Group-to-group
// calls from a handler go over gRPC.
class LocalServant final : public internal::ServantBackend {
 public:
  LocalServant(internal::LocalEndpoint endpoint, std::shared_ptr<grpc::Channel> channel,
               std::string token)
      : endpoint_(std::move(endpoint)), channel_(std::move(channel)),
        stub_(api::Cohort::NewStub(channel_)), token_(std::move(token)) {}

  absl::Status Register(const api::ServantMessage::Register& request) override {
    absl::StatusOr<std::unique_ptr<internal::LocalLink>> link =
        internal::LocalLink::Open(endpoint_, kRegisterTimeout);
    if (!link.ok()) return link.status();
    {
      absl::MutexLock lock(&mu_);
      link_ = *std::move(link);
      if (cancelled_) link_->Shutdown();
    }
    api::LocalFrame frame;
    *frame.mutable_servant()->mutable_register_() = request;
    if (absl::Status written = link_->Write(frame); !written.ok()) return written;
    api::LocalFrame ack;
    if (!link_->ReadWithin(&ack, kRegisterTimeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("the daemon did not acknowledge the registration within ",
                       absl::FormatDuration(kRegisterTimeout)));
    }
    if (ack.has_error()) return ErrorFrom(ack.error());
    if (!ack.has_event() || !ack.event().registered()) {
      return absl::UnavailableError("unexpected answer to the registration");
    }
    max_reply_bytes_ = ack.event().max_reply_bytes();
    return absl::OkStatus();
  }
  bool EventBuffered() const override { return link_->FrameBuffered(); }
  bool Next(api::ServantEvent* event) override {
    while (link_->Read(&frame_)) {
      if (frame_.has_event()) {
        // The caller's last event goes into the frame, whose next read reuses its storage.
        event->Swap(frame_.mutable_event());
        return true;
      }
      if (frame_.has_error()) {
        absl::MutexLock lock(&mu_);
        end_ = ErrorFrom(frame_.error());
        break;
      }
    }
    return false;
  }
  void Answer(api::ServantMessage::Answer& answer) override {
    // The frame's objects on the stack, the answer borrowed while it is written: no allocation
    // or copy of them per answer (issue 7).
    char block[256];
    google::protobuf::Arena arena(nso::ArenaOn(block, sizeof(block)));
    api::LocalFrame* frame = google::protobuf::Arena::CreateMessage<api::LocalFrame>(&arena);
    api::ServantMessage* message = frame->mutable_servant();
    message->unsafe_arena_set_allocated_answer(&answer);
    // On the delivery thread (Servant::Handle): answers to events read together leave together.
    absl::Status written = link_->WriteSoon(*frame);
    message->unsafe_arena_release_answer();  // given back before the arena goes
    written.IgnoreError();  // a broken link ends Next: the servant stops
  }
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                      absl::Duration wait) override {
    return internal::InvokeRpc(stub_.get(), request, wait - absl::Seconds(2), token_);
  }
  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (link_) link_->Shutdown();
  }
  const char* via() const override { return "local"; }
  absl::Status Finish() override {
    absl::MutexLock lock(&mu_);
    if (!end_.ok()) return end_;
    return cancelled_ ? absl::CancelledError("servant stopped")
                      : absl::UnavailableError("the daemon closed the servant's local link");
  }

 private:
  // The daemon's error text (its status, e.g. "NOT_FOUND: unknown group ...") as a status.
  static absl::Status ErrorFrom(const std::string& text) {
    for (int code = 1; code <= 16; ++code) {
      std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
      if (text.rfind(name + ": ", 0) == 0) {
        return absl::Status(static_cast<absl::StatusCode>(code), text.substr(name.size() + 2));
      }
    }
    return absl::UnavailableError(text);
  }

  const internal::LocalEndpoint endpoint_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<api::Cohort::Stub> stub_;
  const std::string token_;
  // Set by Register (under mu_, for Cancel) before the delivery thread starts.
  std::unique_ptr<internal::LocalLink> link_;
  api::LocalFrame frame_;  // delivery thread (Next): each frame read, its storage reused
  absl::Mutex mu_;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// An NSO at the daemon and the servant's way to it: the local fast path when the Client reached
// it, else gRPC.
absl::StatusOr<std::pair<std::unique_ptr<internal::ServantBackend>, uint64_t>> ConnectServant(
    const std::string& address, const ConnectOptions& options) {
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(address, options);
  if (!client.ok()) return client.status();
  (*client)->KeepNsoAtDaemon();  // the servant's from now on
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = DaemonChannel(address, options);
  if (!channel.ok()) return channel.status();
  std::unique_ptr<internal::ServantBackend> backend;
  if (!(*client)->local_endpoint().address.empty()) {  // the client reached the fast path
    backend = std::make_unique<LocalServant>((*client)->local_endpoint(), *std::move(channel),
                                             options.token);
  } else {
    backend = std::make_unique<RemoteServant>(*std::move(channel), options.token);
  }
  return std::make_pair(std::move(backend), (*client)->nso());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Servant>> Servant::Create(const std::string& address,
                                                         const std::string& group,
                                                         const ConnectOptions& options) {
  auto connected = ConnectServant(address, options);
  if (!connected.ok()) return connected.status();
  std::unique_ptr<Servant> servant =
      WithBackend(std::move(connected->first), connected->second, group);
  // Attaching waits for the daemon to be ready: each attempt of a rejoin waits at most 1 s, so
  // that Stop (which cannot cancel an attempt) ends a servant still retrying within about 1 s.
  ConnectOptions again = options;
  again.timeout = std::min(options.timeout, absl::Seconds(1));
  servant->reconnect_ = [address, again] { return ConnectServant(address, again); };
  servant->backpressure_wait_ = options.backpressure_wait;
  return servant;
}

std::unique_ptr<Servant> Servant::WithBackend(std::unique_ptr<internal::ServantBackend> backend,
                                              uint64_t nso, std::string group) {
  return std::unique_ptr<Servant>(new Servant(std::move(backend), nso, std::move(group)));
}

Servant::Servant(std::unique_ptr<internal::ServantBackend> backend, uint64_t nso,
                 std::string group)
    : backend_(std::move(backend)), nso_(nso), group_(std::move(group)) {}

Servant::~Servant() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void Servant::Serve(const std::string& method, Handler handler) {
  methods_[method] = Method{std::move(handler), nullptr};
}

void Servant::ServeInto(const std::string& method, ReplyHandler handler) {
  methods_[method] = Method{nullptr, std::move(handler)};
}

void Servant::OnMulticast(MulticastHandler handler) { multicast_handler_ = std::move(handler); }

void Servant::OnGetState(std::function<absl::StatusOr<std::string>()> get_state) {
  get_state_ = std::move(get_state);
}

void Servant::OnSetState(std::function<absl::Status(const std::string&)> set_state) {
  set_state_ = std::move(set_state);
}

void Servant::OnGetStateStream(std::function<absl::Status(const StateWriter&)> get_state) {
  get_state_stream_ = std::move(get_state);
}

void Servant::OnSetStateChunk(
    std::function<absl::Status(uint64_t, const std::string&, bool)> set_state) {
  set_state_chunk_ = std::move(set_state);
}

void Servant::RejoinAfterDaemonRestart(absl::Duration give_up_after) {
  rejoin_ = true;
  give_up_after_ = give_up_after;
}

uint64_t Servant::rejoins() const {
  absl::MutexLock lock(&mu_);
  return rejoins_;
}

const char* Servant::via() const {
  absl::MutexLock lock(&mu_);
  return backend_->via();
}

api::ServantMessage::Register Servant::Registration() const {
  api::ServantMessage::Register request;
  request.set_nso(nso_);
  request.set_group(group_);
  for (const auto& [method, handlers] : methods_) request.add_methods(method);
  if (!kept_path_.empty()) {
    request.set_keeps_state(true);
    request.set_kept_position(kept_ ? kept_->position : 0);
    request.set_kept_view(kept_ ? kept_->view : 0);
  }
  // A durable group's servant keeps the views too (a view change is written with the state).
  if (on_view_ || !kept_path_.empty()) request.set_view_events(true);
  return request;
}

absl::Status Servant::LoadKept() {
  absl::StatusOr<std::optional<invocation::KeptState>> kept =
      invocation::ReadKeptState(kept_path_, group_);
  if (!kept.ok()) return kept.status();
  kept_ = *std::move(kept);
  if (kept_) kept_view_ = std::max(kept_view_, kept_->view);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Servant::ReadState() {
  if (!get_state_stream_) return get_state_ ? get_state_() : std::string();
  std::string state;
  absl::Status read = get_state_stream_([&state](std::string chunk) { state += chunk; });
  if (!read.ok()) return read;
  return state;
}

bool Servant::Keep(uint64_t position) {
  if (kept_path_.empty()) return true;
  absl::StatusOr<std::string> state = ReadState();
  absl::Status written =
      state.ok() ? invocation::WriteKeptState(kept_path_, group_,
                                              {position, *std::move(state), kept_calls_.Bytes(),
                                               kept_view_})
                 : absl::Status(state.status().code(),
                                absl::StrCat("reading the state to keep: ", state.status().message()));
  if (written.ok()) return true;
  // Fail-stop: the replica leaves the group (its daemon sees the servant go) rather than answer
  // from a state it could not keep.
  std::fprintf(stderr, "cohort servant: group %s: %s: stopping\n", group_.c_str(),
               written.ToString().c_str());
  absl::MutexLock lock(&mu_);
  ended_ = absl::Status(written.code(), absl::StrCat("group \"", group_,
                                                     "\": cannot keep the state: ",
                                                     written.message()));
  MarkStopping();
  backend_->Cancel();
  return false;
}

absl::Status Servant::Start() {
  if (!kept_path_.empty()) {
    const char* missing = inline_ ? "not with DispatchInline (it writes a file per delivery)"
                          : !HasStateHooks()
                              ? "needs OnGetState and OnSetState (or their streaming kinds)"
                              : nullptr;
    if (missing != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("serve group \"", group_, "\": KeepStateIn ", missing));
    }
    if (absl::Status read = LoadKept(); !read.ok()) {
      return absl::Status(read.code(), absl::StrCat("serve group \"", group_, "\": ",
                                                    read.message()));
    }
  }
  if (rejoin_ && reconnect_ && HasStateHooks()) {
    // What a new servant would start from: a rejoin resets the object to it (servant.h).
    absl::StatusOr<std::string> state = ReadState();
    if (!state.ok()) {
      return absl::Status(state.status().code(),
                          absl::StrCat("serve group \"", group_, "\": reading the state at Start: ",
                                       state.status().message()));
    }
    initial_state_ = *std::move(state);
  }
  api::ServantMessage::Register request = Registration();
  absl::Status registered =
      inline_ ? backend_->RegisterInline(
                    request, [this](const api::ServantEvent& event) { Handle(event); },
                    [this](const absl::Status& why) {  // replaced by a newer servant
                      absl::MutexLock lock(&mu_);
                      if (done_) return;
                      end_status_ = why;
                      done_ = true;
                    })
              : backend_->Register(request);
  if (!registered.ok()) {
    return absl::Status(registered.code(), absl::StrCat("serve group \"", group_, "\": ",
                                                        registered.message()));
  }
  if (!inline_) thread_ = std::thread([this] { DeliveryLoop(); });
  return absl::OkStatus();
}

void Servant::Stop() {
  if (!inline_) {
    absl::MutexLock lock(&mu_);
    MarkStopping();
    backend_->Cancel();
    if (registering_ != nullptr) registering_->Cancel();
    return;  // the delivery thread records the end
  }
  {
    absl::MutexLock lock(&mu_);
    MarkStopping();
  }
  // Not under mu_: an inline backend's Cancel waits for the protocol thread, which may be in
  // Handle or the end hook waiting for mu_. backend_ is never replaced here (no delivery thread,
  // no rejoin).
  backend_->Cancel();
  absl::Status status = backend_->Finish();
  absl::MutexLock lock(&mu_);
  if (done_) return;
  end_status_ = status;
  done_ = true;
}

absl::StatusOr<GroupReplies> Servant::InvokeGroup(const std::string& group,
                                                  const std::string& method,
                                                  const std::string& payload, Mode mode,
                                                  absl::Duration deadline) {
  if (inline_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "servant of group \"", group_, "\" dispatches inline: a group-to-group call from its "
        "handler would wait for the protocol thread it runs on (use a servant without "
        "DispatchInline)"));
  }
  api::InvokeRequest request;
  request.set_nso(nso_);
  request.set_group(group);
  request.set_method(method);
  request.set_payload(payload);
  request.set_mode(internal::ToApiMode(mode));
  // Through the called group's request manager (open group), as 003 section 4.3 describes.
  request.set_style(api::OPEN);
  request.set_caller_group(group_);
  request.set_caller_seq(current_group_seq_);
  request.set_caller_index(nested_calls_++);  // the same in every attempt: one call
  const internal::SteadyTime start = internal::SteadyNow();
  const bool one_way = mode == Mode::kOneWay;
  const absl::Duration wait = invocation::RoomWait(backpressure_wait_, one_way, deadline);
  return invocation::WhileBacklogged(start, wait, [&]() {
    // A refused attempt was not accepted; the next one has what is left of the deadline.
    const absl::Duration left = invocation::DeadlineLeft(deadline, one_way, start);
    request.set_deadline_ms(internal::DeadlineMs(left));
    return backend_->Invoke(request, left + absl::Seconds(2));
  });
}

absl::Status Servant::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
  return end_status_;
}

bool Servant::Ended(absl::Status* why) {
  absl::MutexLock lock(&mu_);
  if (done_ && why != nullptr) *why = end_status_;
  return done_;
}

bool Servant::ReplyFits(size_t bytes) const {
  const uint64_t max = backend_->max_reply_bytes();
  return max == 0 || bytes <= max;
}

void Servant::BoundReply(absl::StatusOr<std::string>* result) const {
  if (!result->ok() || ReplyFits((*result)->size())) return;
  const uint64_t max = backend_->max_reply_bytes();
  // The error the daemon would make of it (Node::Answer): sent, a reply past the daemon's frame
  // bound would break this servant's stream instead.
  *result = absl::ResourceExhaustedError(
      absl::StrCat("the servant's reply of ", (*result)->size(), " bytes exceeds its daemon's "
                   "limits.max_payload_bytes (", max, "): not sent"));
}

void Servant::Answer(uint64_t delivery, absl::StatusOr<std::string> result, bool more) {
  // On a stack arena: the payload's string object too (a new message allocated one per answer);
  // its characters are the result's, moved.
  char block[512];
  google::protobuf::Arena arena(nso::ArenaOn(block, sizeof(block)));
  auto* answer = google::protobuf::Arena::CreateMessage<api::ServantMessage::Answer>(&arena);
  answer->set_delivery(delivery);
  answer->set_more(more);
  answer->set_status_code(static_cast<int>(result.status().code()));
  if (result.ok()) {
    answer->set_payload(*std::move(result));
  } else {
    answer->set_error(std::string(result.status().message()));
  }
  backend_->Answer(*answer);
}

void Servant::AnswerFrom(uint64_t delivery, std::string* reply) {
  char block[512];
  google::protobuf::Arena arena(nso::ArenaOn(block, sizeof(block)));
  auto* answer = google::protobuf::Arena::CreateMessage<api::ServantMessage::Answer>(&arena);
  answer->set_delivery(delivery);
  answer->mutable_payload()->swap(*reply);  // lent: O(1), no copy
  backend_->Answer(*answer);
  reply->swap(*answer->mutable_payload());  // back (empty if the backend moved it on)
}

// The state is answered in chunks of at most this size (the daemons stream it on in chunks).
constexpr size_t kStateChunkBytes = 256 * 1024;

void Servant::SendState(uint64_t delivery) {
  if (get_state_stream_) {
    // One chunk is held back so the last one can say so.
    std::optional<std::string> held;
    StateWriter write = [&](std::string chunk) {
      for (size_t at = 0; at < chunk.size(); at += kStateChunkBytes) {
        if (held) Answer(delivery, *std::move(held), true);
        held = chunk.size() <= kStateChunkBytes ? std::move(chunk)
                                                : chunk.substr(at, kStateChunkBytes);
      }
    };
    absl::Status status = get_state_stream_(write);
    if (!status.ok()) return Answer(delivery, status);
    return Answer(delivery, held ? std::move(*held) : std::string(), false);
  }
  absl::StatusOr<std::string> state = get_state_ ? get_state_() : std::string();
  if (!state.ok()) return Answer(delivery, state.status());
  size_t at = 0;
  while (state->size() - at > kStateChunkBytes) {
    Answer(delivery, state->substr(at, kStateChunkBytes), true);
    at += kStateChunkBytes;
  }
  Answer(delivery, at == 0 ? std::move(*state) : state->substr(at), false);
}

absl::Status Servant::TakeStateChunk(const api::ServantEvent& event) {
  absl::Status status;
  if (set_state_chunk_) {
    status = set_state_chunk_(event.state_offset(), event.payload(), event.state_last());
  } else {
    if (event.state_offset() == 0) partial_state_.clear();
    partial_state_ += event.payload();
    if (!event.state_last()) return absl::OkStatus();
    if (set_state_) status = set_state_(partial_state_);
    partial_state_.clear();
    partial_state_.shrink_to_fit();
  }
  if (!status.ok()) std::fprintf(stderr, "cohort servant: SetState: %s\n", status.ToString().c_str());
  return status;
}

void Servant::Handle(const api::ServantEvent& event) {
  if (!event.ended().empty()) {  // the daemon ended the registration (DeleteGroup): no more
    absl::MutexLock lock(&mu_);
    ended_ = absl::NotFoundError(event.ended());
    if (inline_ && !done_) {
      end_status_ = ended_;
      done_ = true;
    }
    return;
  }
  if (!kept_path_.empty()) kept_view_ = std::max(kept_view_, event.view_id());
  if (event.method().empty()) {
    if (!multicast_handler_) return;
    multicast_handler_(event.payload());
    if (!kept_path_.empty()) {
      kept_calls_.Add(event.call(), std::string());
      Applied(event.group_seq(), 0, false, std::string());
    }
    return;
  }
  // The daemon's reserved methods all start with '$' (a client cannot call such a method): one
  // test per call rather than one per reserved name.
  if (event.method()[0] == '$' && HandleReserved(event)) return;

  current_group_seq_ = event.group_seq();
  nested_calls_ = 0;
  auto it = methods_.find(event.method());
  if (it == methods_.end()) {
    if (!event.one_way()) {
      Answer(event.delivery(), absl::UnimplementedError(absl::StrCat(
                                   "group \"", group_, "\" has no method \"", event.method(), "\"")));
    }
    return;
  }
  absl::StatusOr<std::string> result;
  if (it->second.into) {
    reply_.clear();
    absl::Status status = it->second.into(event.payload(), &reply_);
    if (status.ok() && kept_path_.empty() && ReplyFits(reply_.size())) {
      // The hot path: answered from reply_, kept for the next call (unless it grew large).
      if (!event.one_way()) AnswerFrom(event.delivery(), &reply_);
      if (reply_.capacity() > kKeptReplyBytes) std::string().swap(reply_);
      return;
    }
    // An error, a reply over the limit, or a durable group's (kept with the state): as Serve's.
    if (status.ok()) {
      result = std::move(reply_);
    } else {
      result = std::move(status);
    }
  } else {
    result = it->second.handler(event.payload());
  }
  BoundReply(&result);
  if (!kept_path_.empty()) {
    kept_calls_.Add(event.call(), event.one_way() ? absl::StatusOr<std::string>(std::string())
                                                  : result);
    // Answered once the state is on disk (FlushKept): no answer from a state not kept.
    return Applied(event.group_seq(), event.delivery(), !event.one_way(), std::move(result));
  }
  if (!event.one_way()) Answer(event.delivery(), std::move(result));
}

bool Servant::HandleReserved(const api::ServantEvent& event) {
  if (event.method() == "$get_state") {  // nso::kGetStateMethod
    if (FlushKept()) SendState(event.delivery());
    return true;
  }
  if (event.method() == "$set_state") {  // nso::kSetStateMethod
    if (!FlushKept()) return true;
    TakeStateChunk(event).IgnoreError();  // said on stderr; the group goes on
    if (event.state_last() && !kept_path_.empty()) {
      if (event.has_kept_calls()) kept_calls_.Replace(event.kept_calls());
      Applied(event.group_seq(), 0, false, std::string());
    }
    return true;
  }
  if (event.method() == "$restore_kept") {  // nso::kRestoreKeptMethod
    RestoreKept(event.delivery());
    return true;
  }
  if (event.method() == "$view") {  // nso::kViewMethod
    // Kept before the application sees it: a view it saw is never numbered again after a power
    // cut (the group is re-founded above every view kept).
    if (!kept_path_.empty()) {
      Applied(event.group_seq(), 0, false, std::string());
      if (!FlushKept()) return true;
    }
    if (on_view_) {
      on_view_({group_, event.view_id(), internal::ToViewMembers(event.view().members()),
                event.view().in_view(), event.group_seq()});
    }
    return true;
  }
  return false;
}

void Servant::RestoreKept(uint64_t delivery) {
  // nso::kRestoreKeptMethod: the group is re-founded from the state kept here.
  if (!kept_) {
    return Answer(delivery, absl::FailedPreconditionError(absl::StrCat(
                                "group \"", group_, "\": no kept state to take back (nothing was "
                                "found in ", kept_path_, ", or the object has moved on)")));
  }
  invocation::KeptState kept = *std::move(kept_);
  kept_.reset();
  absl::Status taken = kept_calls_.ReplaceFrom(kept.calls);
  if (taken.ok()) taken = InstallWholeState(std::move(kept.state));
  if (!taken.ok()) {
    kept_calls_.Clear();
    return Answer(delivery, absl::Status(taken.code(), absl::StrCat("taking back the state kept "
                                                                    "in ", kept_path_, ": ",
                                                                    taken.message())));
  }
  Answer(delivery, std::move(kept.calls));
}

void Servant::Applied(uint64_t position, uint64_t delivery, bool answer,
                      absl::StatusOr<std::string> result) {
  kept_.reset();  // the object has moved on from what was found on disk
  unkept_position_ = position;
  if (answer) held_answers_.emplace_back(delivery, std::move(result));
}

bool Servant::FlushKept() {
  if (!unkept_position_) return true;
  const uint64_t position = *unkept_position_;
  unkept_position_.reset();
  std::vector<std::pair<uint64_t, absl::StatusOr<std::string>>> answers;
  answers.swap(held_answers_);
  if (!Keep(position)) return false;  // stopped: the held answers are never sent
  for (auto& [delivery, result] : answers) Answer(delivery, std::move(result));
  return true;
}

void Servant::DeliveryLoop() {
  absl::Status status;
  do {
    api::ServantEvent event;
    while (backend_->Next(&event)) {
      Handle(event);
      // Group commit: one write of the kept state for the deliveries read together.
      constexpr size_t kMaxHeldAnswers = 256;
      if (unkept_position_ &&
          (!backend_->EventBuffered() || held_answers_.size() >= kMaxHeldAnswers)) {
        FlushKept();
      }
      if (!event.ended().empty()) {
        backend_->Cancel();  // the daemon sends nothing more: close the stream
        break;
      }
    }
    FlushKept();  // what was applied is kept; the answers cannot reach the daemon any more
    status = backend_->Finish();
  } while (Rejoin(&status));
  absl::MutexLock lock(&mu_);
  end_status_ = ended_.ok() ? status : ended_;
  done_ = true;
}

namespace {

// Worth another try: the daemon is away (restarting) or did not answer in time.
bool Transient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

bool Stopped(absl::Status* why) {
  *why = absl::CancelledError("servant stopped");
  return false;
}

}  // namespace

bool Servant::Rejoin(absl::Status* why) {
  if (!rejoin_ || !reconnect_ || why->code() != absl::StatusCode::kUnavailable) return false;
  const internal::SteadyTime give_up = internal::SteadyAfter(give_up_after_);
  invocation::DoublingPause backoff(absl::Milliseconds(100), absl::Seconds(2));
  while (true) {
    const absl::Duration pause = backoff.Next();
    {
      absl::MutexLock lock(&mu_);
      if (!ended_.ok()) return false;  // the daemon ended it (its group was deleted)
    }
    if (stopped_.WaitForNotificationWithTimeout(std::min(pause, internal::SteadyLeft(give_up)))) {
      return Stopped(why);
    }
    if (internal::SteadyNow() >= give_up) {
      *why = absl::Status(why->code(), absl::StrCat("gave up registering again after ",
                                                    absl::FormatDuration(give_up_after_), ": ",
                                                    why->message()));
      return false;
    }
    auto connected = reconnect_();
    if (!connected.ok()) {
      *why = connected.status();
      if (!Transient(*why)) return false;
      continue;
    }
    std::unique_ptr<internal::ServantBackend> fresh = std::move(connected->first);
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return Stopped(why);
      registering_ = fresh.get();
    }
    ResetState();
    kept_calls_.Clear();
    if (!kept_path_.empty()) {
      if (absl::Status read = LoadKept(); !read.ok()) {
        *why = absl::Status(read.code(), absl::StrCat("serve group \"", group_, "\" again: ",
                                                      read.message()));
        return false;
      }
    }
    api::ServantMessage::Register request = Registration();
    request.set_nso(connected->second);
    absl::Status registered = fresh->Register(request);
    absl::MutexLock lock(&mu_);
    registering_ = nullptr;
    if (stopping_) return Stopped(why);
    if (!registered.ok()) {
      *why = absl::Status(registered.code(), absl::StrCat("serve group \"", group_,
                                                          "\" again: ", registered.message()));
      if (!Transient(registered)) return false;
      continue;
    }
    std::swap(backend_, fresh);  // the old one goes when `fresh` does, after the lock
    nso_ = connected->second;
    ++rejoins_;
    return true;
  }
}

void Servant::ResetState() {
  if (initial_state_) InstallWholeState(*initial_state_).IgnoreError();  // said on stderr
}

absl::Status Servant::InstallWholeState(std::string state) {
  // As a state transfer of one chunk (the hooks' either kind; a partial state is dropped).
  api::ServantEvent whole;
  whole.set_payload(std::move(state));
  whole.set_state_offset(0);
  whole.set_state_last(true);
  return TakeStateChunk(whole);
}

}  // namespace cohort
