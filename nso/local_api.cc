#include "nso/local_api.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "consensus/spare.h"
#include "google/protobuf/io/coded_stream.h"
#include "invocation/backpressure.h"
#include "nso/api_service.h"
#include "nso/framing.h"
#include "nso/scratch_arena.h"
#include "nso/spare_payloads.h"
#include "nso/unix_address.h"
#include "nso/logging.h"
#include "nso/status.h"

namespace cohort::nso {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudget = 256 * 1024;  // per readiness event: other sockets get their turn
constexpr uint32_t kLocalVersion = 1;
// Calls of one connection in flight at once; beyond it a call fails RESOURCE_EXHAUSTED at once
// (a client that does not wait for its results cannot fill the daemon's memory).
constexpr size_t kCallsInFlightMax = 1 << 16;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct LocalApi::Connection {
  enum class Kind { kNew, kCalls, kServant };
  uint64_t id = 0;
  int fd = -1;
  Kind kind = Kind::kNew;
  bool hello_done = false;
  bool closing = false;      // an error frame is queued: close once it is written
  bool want_write = false;   // EPOLLOUT watched
  bool read_paused = false;  // EPOLLIN not watched, frames read wait (LocalApi::MustPause)
  std::string caller;        // the application's name ("" = anonymous)
  std::string token;         // the hello's bearer token
  std::string certified;     // the name its sealed identity carried (client certificates)
  std::string in;
  std::string out;
  size_t out_offset = 0;
  uint64_t sent_bytes = 0;   // written to the socket so far (flow control: the servant reads)
  uint64_t servant = 0;      // the registered servant (servant connections)
  bool registering = false;  // RegisterServant runs: deliveries wait in `early`
  std::vector<ServantDelivery> early;
  bool dirty = false;        // in dirty_
  size_t calls_in_flight = 0;
  ResultSizes results;       // of its calls so far (PauseReadingCalls)
  bool peer_closed = false;  // the client's end is closed: its frames read are handled, no pause
  // Each frame read is parsed into this one object, emptied by RecycleFrame for the next: a
  // connection's frames are of one kind (a client's calls, a servant's answers), whose objects
  // and strings are kept from one to the next, so reading one allocates nothing (omniORB2, 001
  // sections 5-6). Handlers copy, move or swap out what they keep.
  api::LocalFrame read_frame;
};

LocalApi::LocalApi(LocalApiOptions options, Node* node, EventLoop* loop,
                   const AccessPolicy* policy, InvocationMetrics* metrics)
    : options_(std::move(options)), node_(node), loop_(loop), policy_(policy),
      metrics_(metrics),
      write_arena_(ArenaOn(write_block_, sizeof(write_block_))) {}

LocalApi::~LocalApi() { Shutdown(); }

absl::Status LocalApi::Listen() {
  std::random_device random;
  key_ = (static_cast<uint64_t>(random()) << 32) ^ random();
  std::string name;
  if (options_.listen == "auto") {
    name = absl::StrCat("@cohortd-", options_.node_name, "-", getpid(), "-",
                        absl::Hex(key_ & 0xffffff));
  } else {
    name = options_.listen;
    struct stat info {};
    if (lstat(name.c_str(), &info) == 0) {
      if (!S_ISSOCK(info.st_mode)) {
        return absl::InvalidArgumentError(
            absl::StrCat("listen.local: ", name, " exists and is not a socket"));
      }
      unlink(name.c_str());  // a socket file left by an earlier run
    }
    socket_file_ = name;
  }
  sockaddr_un address{};
  socklen_t length = 0;
  if (!UnixAddress(name, &address, &length)) {
    return absl::InvalidArgumentError(absl::StrCat("listen.local: \"", name, "\" is too long"));
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listen_fd_, 128) != 0) {
    std::string why = std::strerror(errno);
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    socket_file_.clear();
    return absl::UnavailableError(absl::StrCat("cannot listen on listen.local ", name, ": ", why));
  }
  if (!socket_file_.empty()) chmod(socket_file_.c_str(), 0660);
  address_ = absl::StrCat("unix:", name);
  read_buffer_.resize(kReadChunk);
  return absl::OkStatus();
}

void LocalApi::Start() {
  loop_->Post([this] {
    if (listen_fd_ >= 0) loop_->Watch(listen_fd_, EPOLLIN, [this](uint32_t) { Accept(); });
  });
}

void LocalApi::Shutdown() {
  for (auto& [id, connection] : connections_) close(connection->fd);
  connections_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
  if (!socket_file_.empty()) unlink(socket_file_.c_str());
  socket_file_.clear();
}

void LocalApi::Accept() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      // Out of descriptors: the pending connection stays, and the socket stays readable; stop
      // watching it for a while rather than spin the protocol thread (Flush resumes).
      Log("api")->warn("local fast path: cannot accept ({}): pausing accepts for 100 ms",
                       std::strerror(errno));
      loop_->Rewatch(listen_fd_, 0);
      accept_paused_until_ms_ = MonotonicNowMs() + 100;
      return;
    }
    if (fd < 0) return;  // EAGAIN: all taken
    auto connection = std::make_unique<Connection>();
    connection->id = next_id_++;
    connection->fd = fd;
    uint64_t id = connection->id;
    connections_[id] = std::move(connection);
    loop_->Watch(fd, EPOLLIN, [this, id](uint32_t events) { OnEvents(id, events); });
  }
}

LocalApi::Connection* LocalApi::Find(uint64_t id) {
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second.get();
}

void LocalApi::OnEvents(uint64_t id, uint32_t events) {
  Connection* connection = Find(id);
  if (connection == nullptr) return;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (!ReadSome(connection)) {
      WriteSome(connection);  // a last error frame, best effort
      return Close(id);
    }
  }
  if (events & EPOLLOUT) {
    if (!WriteSome(connection)) return Close(id);
    if (!ResumeIfRoom(connection)) {
      WriteSome(connection);  // a last error frame, best effort
      return Close(id);
    }
  }
}

bool LocalApi::ReadSome(Connection* connection) {
  size_t taken = 0;
  bool open = true;
  while (taken < kReadBudget) {
    ssize_t got = read(connection->fd, read_buffer_.data(), read_buffer_.size());
    if (got > 0) {
      connection->in.append(read_buffer_.data(), static_cast<size_t>(got));
      taken += static_cast<size_t>(got);
      if (static_cast<size_t>(got) < read_buffer_.size()) break;  // drained
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    open = false;  // closed by the client, or an error
    // What it sent before it went is handled, in full: a pause for its results no longer
    // applies (they go nowhere), and its calls read are not dropped with the connection.
    connection->peer_closed = true;
    break;
  }
  return HandleFrames(connection) && open;
}

namespace {

// The memory a frame's strings keep for the next (RecycleFrame).
size_t KeptBytes(const api::LocalFrame& frame) {
  if (frame.has_servant() && frame.servant().has_answer()) {
    return frame.servant().answer().payload().capacity() +
           frame.servant().answer().error().capacity();
  }
  if (frame.has_call()) return frame.call().invoke().payload().capacity();
  return 0;
}

// Empties `frame` for the next parse into it (a merge), keeping the objects of a servant's
// answer or a client's call: their strings keep their memory. Clear() would delete them (a
// oneof's or a proto3 submessage's object goes with it), and the parse would make them again.
// Anything else, or unknown fields anywhere, is cleared whole.
// A payload moved on (a servant's answer to its call, a client's call to its group) is refilled
// from this thread's spare payloads (spare_payloads.h).
void RecycleFrame(api::LocalFrame* frame) {
  if (NoUnknownFields(*frame)) {
    if (frame->has_servant() && frame->servant().has_answer() &&
        NoUnknownFields(frame->servant())) {
      api::ServantMessage::Answer* answer = frame->mutable_servant()->mutable_answer();
      answer->Clear();
      SparePayloads().Refill(answer->mutable_payload());
      return;
    }
    if (frame->has_call() && NoUnknownFields(frame->call())) {
      api::PipelinedCall* call = frame->mutable_call();
      call->set_call(0);
      if (call->has_invoke()) {
        call->mutable_invoke()->Clear();
        SparePayloads().Refill(call->mutable_invoke()->mutable_payload());
      }
      return;
    }
  }
  frame->Clear();
}

}  // namespace

bool LocalApi::HandleFrames(Connection* connection) {
  size_t offset = 0;
  std::string& in = connection->in;
  bool ok = !connection->closing;
  while (ok && in.size() - offset >= kFrameLengthBytes) {
    if (MustPause(*connection)) {
      if (!connection->read_paused) {
        connection->read_paused = true;
        Rewatch(connection);
      }
      break;  // the frames left wait in `in` (Flush resumes)
    }
    uint32_t length = GetFrameLength(in.data() + offset);
    if (length > options_.frame_bytes_max) {
      ok = Fail(connection, absl::StrCat("frame of ", length, " bytes is over the limit of ",
                                         options_.frame_bytes_max, " bytes"));
      break;
    }
    if (in.size() - offset - kFrameLengthBytes < length) break;
    api::LocalFrame* frame = &connection->read_frame;
    RecycleFrame(frame);
    google::protobuf::io::CodedInputStream input(
        reinterpret_cast<const uint8_t*>(in.data() + offset + kFrameLengthBytes),
        static_cast<int>(length));
    const bool parsed = frame->MergeFromCodedStream(&input);
    if (parsed) {
      offset += kFrameLengthBytes + length;
      ok = HandleFrame(connection, frame);
    }
    if (!parsed || KeptBytes(*frame) > consensus::kSpareBytesMax) frame->Clear();  // a large one's go
    if (!parsed) {
      ok = Fail(connection, "undecodable frame (not a cohort.api.LocalFrame)");
      break;
    }
  }
  in.erase(0, offset);
  return ok;
}

bool LocalApi::HandleFrame(Connection* connection, api::LocalFrame* frame) {
  if (!connection->hello_done) {
    if (!frame->has_hello()) return Fail(connection, "the first frame must be a hello");
    return OnHello(connection, frame->hello());
  }
  switch (frame->kind_case()) {
    case api::LocalFrame::kCall:
      if (connection->kind == Connection::Kind::kServant) {
        return Fail(connection, "a call on a servant connection");
      }
      connection->kind = Connection::Kind::kCalls;
      return OnCall(connection, frame->mutable_call());
    case api::LocalFrame::kServant:
      if (connection->kind == Connection::Kind::kCalls) {
        return Fail(connection, "a servant message on a call connection");
      }
      return OnServant(connection, frame->mutable_servant());
    default:
      return Fail(connection, absl::StrCat("unexpected frame (kind ",
                                           static_cast<int>(frame->kind_case()), ")"));
  }
}

bool LocalApi::OnHello(Connection* connection, const api::LocalHello& hello) {
  if (hello.version() != kLocalVersion) {
    return Fail(connection, absl::StrCat("unsupported local protocol version ", hello.version()));
  }
  if (hello.key() != key_) {
    return Fail(connection, "wrong key: attach to this daemon first (AttachReply.local_key)");
  }
  if (policy_ != nullptr) {
    if (!hello.identity().empty()) {
      absl::StatusOr<std::string> certified = policy_->OpenIdentity(hello.identity());
      if (!certified.ok()) return Fail(connection, std::string(certified.status().message()));
      connection->certified = *std::move(certified);
    }
    grpc::Status allowed =
        policy_->AuthenticateLocal(connection->certified, hello.token(), &connection->caller);
    if (!allowed.ok()) return Fail(connection, allowed.error_message());
    connection->token = hello.token();  // checked again per call: a reload may revoke it
  }
  connection->hello_done = true;
  api::LocalFrame answer;
  answer.mutable_hello()->set_version(kLocalVersion);
  Queue(connection, answer);
  return true;
}

bool LocalApi::OnCall(Connection* connection, api::PipelinedCall* call) {
  const uint64_t id = connection->id;
  const uint64_t number = call->call();
  const api::Mode mode = call->invoke().mode();
  const int64_t start_ns = metrics_ != nullptr ? NowNs() : 0;
  if (policy_ != nullptr) {
    // Like the gRPC API, every call is checked against the tokens and ACLs in force now.
    grpc::Status allowed =
        policy_->AuthenticateLocal(connection->certified, connection->token, &connection->caller);
    if (allowed.ok()) {
      allowed = policy_->CheckCaller(connection->caller, call->invoke().group(), Right::kInvoke);
    }
    if (!allowed.ok()) {
      OnResult(id, number, mode, start_ns, InvokeResult{FromGrpcStatus(allowed)});
      return true;
    }
  }
  absl::StatusOr<InvokeOptions> options = TakeInvokeOptions(call->mutable_invoke());
  if (!options.ok()) {
    OnResult(id, number, mode, start_ns, InvokeResult{options.status()});
    return true;
  }
  if (connection->calls_in_flight >= kCallsInFlightMax) {
    OnResult(id, number, mode, start_ns,
             InvokeResult{invocation::BacklogError(absl::StrCat(
                 "over ", kCallsInFlightMax, " calls in flight on this connection"))});
    return true;
  }
  ++connection->calls_in_flight;
  const uint64_t token = next_token_++;
  pending_[token] = {id, number, mode, start_ns};
  node_->Invoke(call->invoke().nso(), *std::move(options), [this, token](InvokeResult result) {
    auto it = pending_.find(token);
    if (it == pending_.end()) return;
    const Pending pending = it->second;
    pending_.erase(it);
    if (Connection* owner = Find(pending.connection)) --owner->calls_in_flight;
    OnResult(pending.connection, pending.call, pending.mode, pending.start_ns, std::move(result));
  });
  return true;
}

void LocalApi::OnResult(uint64_t id, uint64_t call, api::Mode mode, int64_t start_ns,
                        InvokeResult result) {
  grpc::Status status = ToGrpcStatus(result.status);
  if (metrics_ != nullptr) {
    metrics_->RecordInvocation(ModeLabel(mode), CodeLabel(status.error_code()),
                               static_cast<double>(NowNs() - start_ns) / 1e9);
  }
  Connection* connection = Find(id);
  if (connection == nullptr || connection->closing) return;  // the client went away
  connection->results.Add(ResultBytes(result));
  auto* frame = google::protobuf::Arena::CreateMessage<api::LocalFrame>(&write_arena_);
  api::PipelinedResult* out = frame->mutable_result();
  out->set_call(call);
  out->set_status_code(status.error_code());
  if (!status.ok()) out->set_error(status.error_message());
  ToInvokeReply(&result, out->mutable_reply());
  node_->RecycleReplies(std::move(result.replies));
  Queue(connection, *frame);
  for (api::ReplyFrom& reply : *out->mutable_reply()->mutable_replies()) {
    KeepWrittenPayload(reply.mutable_payload());
  }
  write_arena_.Reset();  // (the arena is empty between frames)
}

bool LocalApi::OnServant(Connection* connection, api::ServantMessage* message) {
  if (message->has_register_()) {
    if (connection->kind == Connection::Kind::kServant) {
      return Fail(connection, "a servant connection registers once");
    }
    connection->kind = Connection::Kind::kServant;
    const api::ServantMessage::Register& request = message->register_();
    if (policy_ != nullptr) {
      grpc::Status allowed = policy_->CheckCaller(connection->caller, request.group(), Right::kJoin);
      if (!allowed.ok()) return Fail(connection, allowed.error_message());
    }
    const uint64_t id = connection->id;
    connection->registering = true;
    absl::StatusOr<uint64_t> servant = node_->RegisterServant(
        request.nso(), request.group(),
        [this, id](ServantDelivery delivery) { OnDelivery(id, std::move(delivery)); },
        ServantKeptState{request.keeps_state(), request.kept_position(), request.kept_view()},
        request.view_events());
    connection->registering = false;
    if (!servant.ok()) return Fail(connection, servant.status().ToString());
    connection->servant = *servant;
    // Flow control (nso/group_flow.h): what waits in this connection's buffer is the servant's
    // backlog; the node asks on the protocol thread, which is this loop's.
    node_->SetServantHooks(
        *servant,
        [this, id]() {
          Connection* servant_connection = Find(id);
          if (servant_connection == nullptr) return ServantBacklog{};
          return ServantBacklog{servant_connection->out.size() - servant_connection->out_offset,
                                servant_connection->sent_bytes};
        },
        [this, id](const absl::Status& why) {
          // Cut off (limits.servant_cutoff_bytes): closed at the next Flush, its buffer dropped.
          Connection* servant_connection = Find(id);
          if (servant_connection == nullptr) return;
          Log("api")->warn("local connection {} closed: {}", id, std::string(why.message()));
          servant_connection->servant = 0;  // the node unregistered it
          servant_connection->closing = true;
          MarkDirty(servant_connection);
        });
    api::LocalFrame ack;
    ack.mutable_event()->set_registered(true);
    ack.mutable_event()->set_group(request.group());
    ack.mutable_event()->set_max_reply_bytes(node_->max_reply_bytes());
    Queue(connection, ack);
    std::vector<ServantDelivery> early = std::move(connection->early);
    for (ServantDelivery& delivery : early) OnDelivery(id, std::move(delivery));
    return true;
  }
  if (message->has_answer()) {
    if (connection->servant == 0) return Fail(connection, "an answer before the register");
    api::ServantMessage::Answer* answer = message->mutable_answer();
    // Swapped: the frame's string gets memory back for the next answer read (Connection::read_frame).
    node_->AnswerSwapping(connection->servant, answer->delivery(),
                          absl::Status(static_cast<absl::StatusCode>(answer->status_code()),
                                       answer->error()),
                          answer->mutable_payload(), answer->more());
    return true;
  }
  return Fail(connection, "an empty servant message");
}

void LocalApi::OnDelivery(uint64_t id, ServantDelivery delivery) {
  Connection* connection = Find(id);
  if (connection == nullptr || connection->closing) return;
  if (connection->registering) {
    connection->early.push_back(std::move(delivery));
    return;
  }
  auto* frame = google::protobuf::Arena::CreateMessage<api::LocalFrame>(&write_arena_);
  ToServantEvent(std::move(delivery), frame->mutable_event());
  Queue(connection, *frame);
  KeepWrittenPayload(frame->mutable_event()->mutable_payload());
  write_arena_.Reset();
}

void LocalApi::Queue(Connection* connection, const api::LocalFrame& frame) {
  if (connection->out_offset > 0 && connection->out_offset == connection->out.size()) {
    connection->out.clear();
    connection->out_offset = 0;
  }
  AppendFrame(frame, &connection->out);
  MarkDirty(connection);
}

void LocalApi::MarkDirty(Connection* connection) {
  if (connection->dirty) return;
  connection->dirty = true;
  dirty_.push_back(connection->id);
}

bool LocalApi::Fail(Connection* connection, const std::string& why) {
  Log("api")->warn("local connection {} closed: {}", connection->id, why);
  api::LocalFrame frame;
  frame.set_error(why);
  Queue(connection, frame);
  connection->closing = true;
  return false;
}

void LocalApi::Flush() {
  if (accept_paused_until_ms_ != 0 && MonotonicNowMs() >= accept_paused_until_ms_) {
    accept_paused_until_ms_ = 0;
    loop_->Rewatch(listen_fd_, EPOLLIN);
  }
  // Closing a servant connection may queue frames for others: loop until nothing is left.
  std::vector<uint64_t>& dirty = flushing_;  // swapped with dirty_: both keep their storage
  while (!dirty_.empty()) {
    dirty.clear();
    dirty.swap(dirty_);
    for (uint64_t id : dirty) {
      Connection* connection = Find(id);
      if (connection == nullptr) continue;
      connection->dirty = false;
      if (!WriteSome(connection) || connection->closing) {
        Close(id);
        continue;
      }
      if (!ResumeIfRoom(connection)) {
        WriteSome(connection);  // a last error frame, best effort
        Close(id);
        continue;
      }
      // A servant's connection is bounded by the node (limits.servant_cutoff_bytes: a servant
      // that reads may be sent a burst beyond it, Node::TickFlow).
      const uint64_t unsent = connection->out.size() - connection->out_offset;
      const uint64_t cutoff = ResultsCutoff(connection->results.largest);
      if (connection->servant == 0 && unsent > cutoff) {
        Log("api")->warn(
            "local connection {} does not read what it is sent ({} bytes, more than {}): closed",
            id, unsent, cutoff);
        if (metrics_ != nullptr) metrics_->RecordClientCutOff("local");
        Close(id);
      }
    }
  }
}

bool LocalApi::WriteSome(Connection* connection) {
  std::string& out = connection->out;
  while (connection->out_offset < out.size()) {
    ssize_t sent = send(connection->fd, out.data() + connection->out_offset,
                        out.size() - connection->out_offset, MSG_NOSIGNAL);
    if (sent > 0) {
      connection->out_offset += static_cast<size_t>(sent);
      connection->sent_bytes += static_cast<uint64_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  DropSent(&out, &connection->out_offset);
  bool want_write = !out.empty();
  if (want_write != connection->want_write) {
    connection->want_write = want_write;
    Rewatch(connection);
  }
  return true;
}

bool LocalApi::MustPause(const Connection& connection) const {
  return connection.kind == Connection::Kind::kCalls && !connection.peer_closed &&
         PauseReadingCalls(connection.read_paused, connection.calls_in_flight,
                           connection.out.size() - connection.out_offset,
                           connection.results);
}

bool LocalApi::ResumeIfRoom(Connection* connection) {
  if (!connection->read_paused || MustPause(*connection)) return true;
  connection->read_paused = false;
  Rewatch(connection);
  // The frames read while paused; what came meanwhile at the next readiness.
  return HandleFrames(connection);
}

void LocalApi::Rewatch(Connection* connection) {
  loop_->Rewatch(connection->fd, (connection->read_paused ? 0 : EPOLLIN) |
                                     (connection->want_write ? EPOLLOUT : 0));
}

void LocalApi::Close(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  std::unique_ptr<Connection> connection = std::move(it->second);
  connections_.erase(it);
  loop_->Unwatch(connection->fd);
  close(connection->fd);
  // Calls of a call connection still complete in the Node; their results find no connection.
  if (connection->servant != 0) node_->UnregisterServant(connection->servant);
}

}  // namespace cohort::nso
