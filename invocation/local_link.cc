#include "invocation/local_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "nso/framing.h"
#include "nso/unix_address.h"

namespace cohort::internal {
namespace {

constexpr uint32_t kLocalVersion = 1;
constexpr size_t kFrameBytesMax = 1u << 30;  // a longer length is garbage: the link breaks
constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<LocalLink>> LocalLink::Open(const LocalEndpoint& endpoint,
                                                           absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<LocalLink>> link = Connect(endpoint);
  if (!link.ok()) return link.status();
  if (absl::Status hello = (*link)->Hello(endpoint, timeout); !hello.ok()) return hello;
  return link;
}

absl::StatusOr<std::unique_ptr<LocalLink>> LocalLink::Connect(const LocalEndpoint& endpoint) {
  if (!absl::StartsWith(endpoint.address, "unix:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("local fast path \"", endpoint.address, "\" is not unix:<name>"));
  }
  std::string name = endpoint.address.substr(5);
  sockaddr_un address{};
  socklen_t length = 0;
  if (!nso::UnixAddress(name, &address, &length)) {
    return absl::InvalidArgumentError(absl::StrCat("bad local socket name \"", name, "\""));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", endpoint.address, ": ", why));
  }
  // A daemon that stops taking frames for this long is stuck: the write fails, the link breaks.
  timeval send_timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  return std::unique_ptr<LocalLink>(new LocalLink(fd));
}

absl::Status LocalLink::Hello(const LocalEndpoint& endpoint, absl::Duration timeout) {
  api::LocalFrame hello;
  hello.mutable_hello()->set_version(kLocalVersion);
  hello.mutable_hello()->set_key(endpoint.key);
  hello.mutable_hello()->set_token(endpoint.token);
  hello.mutable_hello()->set_identity(endpoint.identity);
  if (absl::Status written = Write(hello); !written.ok()) return written;
  api::LocalFrame answer;
  if (!ReadWithin(&answer, timeout)) {
    return absl::UnavailableError(
        absl::StrCat("no hello from the daemon at ", endpoint.address));
  }
  if (answer.has_error()) {
    return absl::PermissionDeniedError(
        absl::StrCat("the daemon at ", endpoint.address, " refused: ", answer.error()));
  }
  if (!answer.has_hello() || answer.hello().version() != kLocalVersion) {
    return absl::UnavailableError(absl::StrCat("unexpected answer from ", endpoint.address));
  }
  return absl::OkStatus();
}

LocalLink::~LocalLink() {
  Shutdown();
  close(fd_);
}

void LocalLink::Shutdown() {
  if (!shut_.exchange(true)) shutdown(fd_, SHUT_RDWR);
}

absl::Status LocalLink::Write(const api::LocalFrame& frame) { return Send(&frame); }

absl::Status LocalLink::WriteSoon(const api::LocalFrame& frame) {
  const int64_t now_ns = now_ns_();
  fast_runs_ = now_ns - handed_out_ns_ < kHoldUs * 1000 ? std::min(fast_runs_ + 1, kFastRunsToHold)
                                                         : 0;
  if (fast_runs_ < kFastRunsToHold || !FrameBuffered()) return Send(&frame);
  {
    absl::MutexLock lock(&write_mu_);
    if (!write_error_.ok()) return write_error_;
    if (!held_.load(std::memory_order_relaxed)) held_since_ns_ = now_ns;
    nso::AppendFrame(frame, &out_);
    held_.store(true, std::memory_order_relaxed);
    if (out_.size() < kHoldBytesMax && now_ns - held_since_ns_ < kHoldUs * 1000) {
      return absl::OkStatus();
    }
  }
  return Send(nullptr);  // held long or large enough: everything goes now
}

absl::Status LocalLink::Send(const api::LocalFrame* frame) {
  write_mu_.Lock();
  if (frame != nullptr && write_error_.ok()) nso::AppendFrame(*frame, &out_);
  if (sending_now_) {
    // The caller in send() takes this frame with the next batch; past kPendingBytesMax wait for
    // it, as a blocking send() would have made this caller wait.
    if (out_.size() > kPendingBytesMax) {
      write_mu_.Await(absl::Condition(
          +[](LocalLink* link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(link->write_mu_) {
            return !link->sending_now_ || link->out_.size() <= kPendingBytesMax;
          },
          this));
    }
    absl::Status status = write_error_;
    write_mu_.Unlock();
    return status;
  }
  sending_now_ = true;
  held_.store(false, std::memory_order_relaxed);
  while (!out_.empty() && write_error_.ok()) {
    sending_.swap(out_);
    write_mu_.Unlock();
    absl::Status sent = SendAll(sending_);
    sending_.clear();
    if (sending_.capacity() > (1 << 20)) sending_ = std::string();  // not a large call's buffer
    write_mu_.Lock();
    if (!sent.ok()) write_error_ = sent;
  }
  if (!write_error_.ok()) out_.clear();
  if (out_.capacity() > (1 << 20)) out_ = std::string();
  sending_now_ = false;
  absl::Status status = write_error_;
  write_mu_.Unlock();
  return status;
}

absl::Status LocalLink::SendAll(const std::string& bytes) {
  size_t offset = 0;
  while (offset < bytes.size()) {
    ssize_t sent = send(fd_, bytes.data() + offset, bytes.size() - offset, MSG_NOSIGNAL);
    if (sent > 0) {
      offset += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    std::string why = sent < 0 ? std::strerror(errno) : "closed";
    Shutdown();  // a partial frame cannot be taken back: the link is done
    return absl::UnavailableError(absl::StrCat("local link to the daemon broke: ", why));
  }
  return absl::OkStatus();
}

bool LocalLink::FrameBuffered() const {
  return nso::WholeFrame(in_.data() + in_offset_, in_.size() - in_offset_);
}

LocalLink::Outcome LocalLink::Fill(SteadyTime deadline) {
  while (true) {
    if (in_.size() - in_offset_ >= nso::kFrameLengthBytes &&
        nso::GetFrameLength(in_.data() + in_offset_) > kFrameBytesMax) {
      return Outcome::kEnded;
    }
    if (FrameBuffered()) return Outcome::kFrame;
    if (in_offset_ > 0) {
      in_.erase(0, in_offset_);
      in_offset_ = 0;
    }
    // About to wait for the daemon: what WriteSoon held goes now (an error shows in the read).
    if (held_.load(std::memory_order_relaxed)) Send(nullptr).IgnoreError();
    // Wait in poll() for POLLIN only, never in a blocking read(): a Unix stream socket wakes a
    // thread asleep in read() each time the daemon consumes what this side wrote (the kernel's
    // write-space wake-up shares the socket's wait queue; poll() filters it by event). A caller or
    // servant asleep in read() was woken twice per call, and on 2 cores the second wake-up cost
    // more than the extra system call (BENCHMARKS.md, session 18).
    int timeout_ms = -1;
    if (deadline != SteadyTime::max()) {
      // Rounded up: a poll that returns a little early would only come round again.
      const absl::Duration left = SteadyLeft(deadline);
      timeout_ms = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1 << 30));
    }
    pollfd ready{fd_, POLLIN, 0};
    int polled = poll(&ready, 1, timeout_ms);
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) return Outcome::kTimeout;
    if (polled < 0) return Outcome::kEnded;
    if (!chunk_) chunk_ = std::make_unique<char[]>(kReadChunk);  // reused: no zero-fill per read
    ssize_t got = recv(fd_, chunk_.get(), kReadChunk, MSG_DONTWAIT);
    if (got > 0) {
      in_.append(chunk_.get(), static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    return Outcome::kEnded;
  }
}

bool LocalLink::PeerClosed() {
  if (shut_.load()) return true;
  if (in_.size() > in_offset_) return false;
  char byte;
  ssize_t got = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;
  return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool LocalLink::Read(api::LocalFrame* frame) { return ReadWithin(frame, absl::InfiniteDuration()); }

bool LocalLink::ReadWithin(api::LocalFrame* frame, absl::Duration timeout) {
  Outcome outcome = Take(Fill(SteadyAfter(timeout)), frame);
  if (outcome == Outcome::kTimeout) Shutdown();
  return outcome == Outcome::kFrame;
}

LocalLink::Outcome LocalLink::ReadUntil(api::LocalFrame* frame, SteadyTime deadline) {
  return Take(Fill(deadline), frame);
}

LocalLink::Outcome LocalLink::Take(Outcome filled, api::LocalFrame* frame) {
  if (filled != Outcome::kFrame) {
    if (filled == Outcome::kEnded) Shutdown();
    return filled;
  }
  uint32_t length = nso::GetFrameLength(in_.data() + in_offset_);
  // The kind the frame holds is cleared, not deleted: a frame of the same kind (a servant's next
  // event, a caller's next result) is parsed into its objects and strings, reusing their storage
  // (no per-message allocation, omniORB2, 001 sections 5-6). LocalFrame is a oneof only, so
  // this is a parse.
  switch (frame->kind_case()) {
    case api::LocalFrame::kEvent: frame->mutable_event()->Clear(); break;
    case api::LocalFrame::kResult: {
      // A proto3 message's Clear() deletes its message fields (heap messages): the reply and
      // its ReplyFroms are kept, cleared, to be parsed into (a reply without one stays empty).
      api::PipelinedResult* result = frame->mutable_result();
      api::InvokeReply* reply = result->release_reply();
      result->Clear();
      if (reply != nullptr) {
        reply->Clear();
        result->set_allocated_reply(reply);
      }
      break;
    }
    default: frame->Clear(); break;
  }
  google::protobuf::io::CodedInputStream input(
      reinterpret_cast<const uint8_t*>(in_.data() + in_offset_ + nso::kFrameLengthBytes),
      static_cast<int>(length));
  bool ok = frame->MergeFromCodedStream(&input) && input.ConsumedEntireMessage();
  in_offset_ += nso::kFrameLengthBytes + length;
  handed_out_ns_ = now_ns_();  // WriteSoon: how long its handler ran
  if (ok) return Outcome::kFrame;
  Shutdown();
  return Outcome::kEnded;
}

}  // namespace cohort::internal
