// A fake daemon end of the local fast path (invocation/local_link.h), for tests of the client's
// end: listens on an abstract Unix socket of the test's own, accepts one link, answers its hello,
// then reads and writes frames as the test says.
#ifndef COHORT_TEST_FAKE_LOCAL_DAEMON_H_
#define COHORT_TEST_FAKE_LOCAL_DAEMON_H_

#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/local_link.h"
#include "nso/framing.h"
#include "nso/unix_address.h"
#include "proto/api.pb.h"

namespace cohort::internal {

// The daemon's end: listens on an abstract socket named after the test's pid, accepts one link
// (or, after AcceptAgain, the next) and answers its hello; then reads and writes frames.
class FakeDaemon {
 public:
  FakeDaemon() {
    name_ = absl::StrCat("@cohort-local-link-test-", getpid(), "-", counter_++);
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    socklen_t length = 0;
    REQUIRE(nso::UnixAddress(name_, &address, &length));
    REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(listen(listen_fd_, 4) == 0);
    StartAcceptor();
  }

  // After Close: accepts the next link (and answers its hello); Accepted() waits for it.
  void AcceptAgain() {
    if (acceptor_.joinable()) acceptor_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    in_.clear();
    StartAcceptor();
  }
  void Accepted() {
    if (acceptor_.joinable()) acceptor_.join();
  }
  ~FakeDaemon() {
    if (acceptor_.joinable()) acceptor_.join();
    if (fd_ >= 0) close(fd_);
    close(listen_fd_);
  }

  LocalEndpoint endpoint() const { return LocalEndpoint{absl::StrCat("unix:", name_), 7, ""}; }

  std::unique_ptr<LocalLink> Open() {
    auto link = LocalLink::Open(endpoint(), absl::Seconds(5));
    REQUIRE(link.ok());
    acceptor_.join();
    return *std::move(link);
  }

  // Reads one frame within `timeout_ms`; false on a timeout or the end of the stream.
  bool ReadFrame(api::LocalFrame* frame, int timeout_ms) {
    while (true) {
      if (nso::WholeFrame(in_.data(), in_.size())) {
        uint32_t length = nso::GetFrameLength(in_.data());
        bool ok = frame->ParseFromArray(in_.data() + nso::kFrameLengthBytes,
                                        static_cast<int>(length));
        in_.erase(0, nso::kFrameLengthBytes + length);
        return ok;
      }
      pollfd ready{fd_, POLLIN, 0};
      if (poll(&ready, 1, timeout_ms) <= 0) return false;
      char chunk[65536];
      ssize_t got = read(fd_, chunk, sizeof(chunk));
      if (got <= 0) return false;
      in_.append(chunk, static_cast<size_t>(got));
    }
  }
  // Writes the frames with one send(), so the link reads them together.
  void WriteFrames(const std::vector<api::LocalFrame>& frames) {
    std::string out;
    for (const api::LocalFrame& frame : frames) nso::AppendFrame(frame, &out);
    WriteBytes(out);
  }
  // Writes raw bytes (e.g. part of a frame).
  void WriteBytes(const std::string& bytes) {
    REQUIRE(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  void Close() { shutdown(fd_, SHUT_RDWR); }

 private:
  void StartAcceptor() {
    acceptor_ = std::thread([this] {
      fd_ = accept(listen_fd_, nullptr, nullptr);
      api::LocalFrame hello;
      if (fd_ < 0 || !ReadFrame(&hello, 5000) || !hello.has_hello()) return;
      api::LocalFrame answer;
      answer.mutable_hello()->set_version(hello.hello().version());
      WriteFrames({answer});
    });
  }

  static inline std::atomic<int> counter_{0};
  std::string name_;
  int listen_fd_ = -1;
  int fd_ = -1;
  std::thread acceptor_;
  std::string in_;
};

}  // namespace cohort::internal

#endif  // COHORT_TEST_FAKE_LOCAL_DAEMON_H_
