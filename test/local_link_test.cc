// The client's end of the local fast path (invocation/local_link.h) against a fake daemon end on a
// Unix socket of the test's own: concurrent writers share send() calls without losing, splitting or
// reordering a frame; WriteSoon holds answers while frames are buffered and sends them before the
// reader waits, when the reader has none left, or once they have been held kHoldUs.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "invocation/local_link.h"
#include "nso/framing.h"
#include "proto/api.pb.h"

namespace cohort::internal {
namespace {

// The daemon's end: listens on an abstract socket named after the test's pid, accepts one link
// and answers its hello; then reads and writes frames.
class FakeDaemon {
 public:
  FakeDaemon() {
    name_ = absl::StrCat("@cohort-local-link-test-", getpid(), "-", counter_++);
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, name_.data(), name_.size());
    address.sun_path[0] = '\0';
    socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size());
    REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length) == 0);
    REQUIRE(listen(listen_fd_, 4) == 0);
    acceptor_ = std::thread([this] {
      fd_ = accept(listen_fd_, nullptr, nullptr);
      api::LocalFrame hello;
      if (fd_ < 0 || !ReadFrame(&hello, 5000) || !hello.has_hello()) return;
      api::LocalFrame answer;
      answer.mutable_hello()->set_version(hello.hello().version());
      WriteFrames({answer});
    });
  }
  ~FakeDaemon() {
    if (acceptor_.joinable()) acceptor_.join();
    if (fd_ >= 0) close(fd_);
    close(listen_fd_);
  }

  std::unique_ptr<LocalLink> Open() {
    auto link = LocalLink::Open(LocalEndpoint{absl::StrCat("unix:", name_), 7, ""},
                                absl::Seconds(5));
    REQUIRE(link.ok());
    acceptor_.join();
    return *std::move(link);
  }

  // Reads one frame within `timeout_ms`; false on a timeout or the end of the stream.
  bool ReadFrame(api::LocalFrame* frame, int timeout_ms) {
    while (true) {
      if (in_.size() >= nso::kFrameLengthBytes) {
        uint32_t length = nso::GetFrameLength(in_.data());
        if (in_.size() - nso::kFrameLengthBytes >= length) {
          bool ok = frame->ParseFromArray(in_.data() + nso::kFrameLengthBytes,
                                          static_cast<int>(length));
          in_.erase(0, nso::kFrameLengthBytes + length);
          return ok;
        }
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
    REQUIRE(send(fd_, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size()));
  }
  void Close() { shutdown(fd_, SHUT_RDWR); }

 private:
  static inline std::atomic<int> counter_{0};
  std::string name_;
  int listen_fd_ = -1;
  int fd_ = -1;
  std::thread acceptor_;
  std::string in_;
};

api::LocalFrame Call(uint64_t id, const std::string& payload) {
  api::LocalFrame frame;
  frame.mutable_call()->set_call(id);
  frame.mutable_call()->mutable_invoke()->set_payload(payload);
  return frame;
}

api::LocalFrame Event(uint64_t delivery) {
  api::LocalFrame frame;
  frame.mutable_event()->set_delivery(delivery);
  return frame;
}

api::LocalFrame AnswerTo(uint64_t delivery) {
  api::LocalFrame frame;
  frame.mutable_servant()->mutable_answer()->set_delivery(delivery);
  return frame;
}

// WriteSoon's clock in these tests: it moves only when a test moves it.
std::atomic<int64_t> fake_now_ns{1'000'000'000};
int64_t FakeNow() { return fake_now_ns.load(); }

// kFastRunsToHold events one at a time, each answered at once (nothing else buffered): the
// handlers have been fast, so WriteSoon may hold from now on.
void WarmUp(FakeDaemon* daemon, LocalLink* link) {
  link->SetClockForTest(&FakeNow);
  api::LocalFrame frame;
  api::LocalFrame answer;
  for (uint64_t d = 1000; d < 1000 + LocalLink::kFastRunsToHold; ++d) {
    daemon->WriteFrames({Event(d)});
    REQUIRE(link->Read(&frame));
    REQUIRE(link->WriteSoon(AnswerTo(d)).ok());
    REQUIRE(daemon->ReadFrame(&answer, 5000));  // sent at once
    REQUIRE(answer.servant().answer().delivery() == d);
  }
}

// After the warm-up, the daemon sends events 1..count in one write; the link reads event 1 and
// answers it with WriteSoon, which holds the answer while the other events are buffered.
void DeliverAndAnswerFirst(FakeDaemon* daemon, LocalLink* link, uint64_t count) {
  WarmUp(daemon, link);
  std::vector<api::LocalFrame> events;
  for (uint64_t d = 1; d <= count; ++d) events.push_back(Event(d));
  daemon->WriteFrames(events);
  api::LocalFrame frame;
  REQUIRE(link->Read(&frame));
  REQUIRE(frame.event().delivery() == 1);
  REQUIRE(link->WriteSoon(AnswerTo(1)).ok());
}

TEST_CASE("concurrent writers: every frame arrives whole, in each writer's order", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  constexpr int kWriters = 16;
  constexpr int kFrames = 2000;
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kFrames; ++i) {
        // Sizes vary so that frames straddle the daemon's reads.
        std::string payload(static_cast<size_t>((i * 37 + w) % 3000), static_cast<char>('a' + w));
        if (!link->Write(Call(static_cast<uint64_t>(w) * 1000000 + i, payload)).ok()) ++failed;
      }
    });
  }
  std::map<int, int> next;  // writer -> next index expected
  int got = 0;
  api::LocalFrame frame;
  while (got < kWriters * kFrames && daemon.ReadFrame(&frame, 10000)) {
    REQUIRE(frame.has_call());
    int w = static_cast<int>(frame.call().call() / 1000000);
    int i = static_cast<int>(frame.call().call() % 1000000);
    REQUIRE(i == next[w]);
    const std::string& payload = frame.call().invoke().payload();
    REQUIRE(payload == std::string(static_cast<size_t>((i * 37 + w) % 3000),
                                   static_cast<char>('a' + w)));
    next[w] = i + 1;
    ++got;
  }
  for (std::thread& t : writers) t.join();
  CHECK(failed == 0);
  CHECK(got == kWriters * kFrames);
}

TEST_CASE("a broken link fails the writers, none hangs", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  daemon.Close();
  std::vector<std::thread> writers;
  std::atomic<int> errors{0};
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (!link->Write(Call(i, std::string(100, 'x'))).ok()) ++errors;
      }
    });
  }
  for (std::thread& t : writers) t.join();
  CHECK(errors > 0);  // once the first send fails every later Write reports the broken link
  CHECK_FALSE(link->Write(Call(1, "y")).ok());
}

TEST_CASE("WriteSoon: answers to events read together leave together", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  DeliverAndAnswerFirst(&daemon, link.get(), 3);
  api::LocalFrame frame;
  api::LocalFrame answer;
  CHECK_FALSE(daemon.ReadFrame(&answer, 30));  // held: events 2 and 3 are buffered
  REQUIRE(link->Read(&frame));
  REQUIRE(link->WriteSoon(AnswerTo(2)).ok());
  REQUIRE(link->Read(&frame));
  REQUIRE(frame.event().delivery() == 3);
  REQUIRE(link->WriteSoon(AnswerTo(3)).ok());  // nothing buffered: all three go
  for (uint64_t d = 1; d <= 3; ++d) {
    REQUIRE(daemon.ReadFrame(&answer, 5000));
    CHECK(answer.servant().answer().delivery() == d);
  }
}

TEST_CASE("WriteSoon: held answers go before the reader waits for more", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  DeliverAndAnswerFirst(&daemon, link.get(), 2);  // held: event 2 is buffered
  api::LocalFrame frame;
  REQUIRE(link->Read(&frame));                    // event 2, from the buffer
  // The daemon sends event 3 only once it has the answer to 1: the reader must send it before
  // it waits, or this read times out.
  std::thread daemon_side([&] {
    api::LocalFrame answer;
    if (daemon.ReadFrame(&answer, 5000) && answer.servant().answer().delivery() == 1) {
      daemon.WriteFrames({Event(3)});
    }
  });
  bool got = link->ReadWithin(&frame, absl::Seconds(5));
  daemon_side.join();
  REQUIRE(got);
  CHECK(frame.event().delivery() == 3);
}

TEST_CASE("WriteSoon: an answer is held at most kHoldUs while events keep coming", "[local]") {
  // (and holding goes on: handler 2 ran within kHoldUs of its event)
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  DeliverAndAnswerFirst(&daemon, link.get(), 3);  // held
  api::LocalFrame frame;
  api::LocalFrame answer;
  fake_now_ns += LocalLink::kHoldUs * 600;  // 0.6 kHoldUs before event 2 is read
  REQUIRE(link->Read(&frame));
  fake_now_ns += LocalLink::kHoldUs * 500;  // handler 2 is fast, but 1 waited 1.1 kHoldUs
  REQUIRE(link->WriteSoon(AnswerTo(2)).ok());  // event 3 still buffered: both go
  REQUIRE(daemon.ReadFrame(&answer, 5000));
  CHECK(answer.servant().answer().delivery() == 1);
  REQUIRE(daemon.ReadFrame(&answer, 5000));
  CHECK(answer.servant().answer().delivery() == 2);
}

TEST_CASE("WriteSoon: after a slow handler answers go at once for kFastRunsToHold events",
          "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  WarmUp(&daemon, link.get());
  std::vector<api::LocalFrame> events;
  for (uint64_t d = 1; d <= 3; ++d) events.push_back(Event(d));
  daemon.WriteFrames(events);
  api::LocalFrame frame;
  api::LocalFrame answer;
  REQUIRE(link->Read(&frame));
  fake_now_ns += LocalLink::kHoldUs * 1000;  // a slow handler of event 1
  REQUIRE(link->WriteSoon(AnswerTo(1)).ok());
  REQUIRE(daemon.ReadFrame(&answer, 5000));  // not held, although events 2 and 3 are buffered
  CHECK(answer.servant().answer().delivery() == 1);
  REQUIRE(link->Read(&frame));
  REQUIRE(link->WriteSoon(AnswerTo(2)).ok());  // fast, but the run of fast handlers starts again
  REQUIRE(daemon.ReadFrame(&answer, 5000));
  CHECK(answer.servant().answer().delivery() == 2);
  // kFastRunsToHold fast answers later, holding is back.
  for (uint64_t d = 3; d < 2 + LocalLink::kFastRunsToHold; ++d) {
    if (d > 3) daemon.WriteFrames({Event(d)});
    REQUIRE(link->Read(&frame));
    REQUIRE(link->WriteSoon(AnswerTo(d)).ok());
    REQUIRE(daemon.ReadFrame(&answer, 5000));
  }
  daemon.WriteFrames({Event(100), Event(101)});
  REQUIRE(link->Read(&frame));
  REQUIRE(link->WriteSoon(AnswerTo(100)).ok());
  CHECK_FALSE(daemon.ReadFrame(&answer, 30));  // held again
  REQUIRE(link->Read(&frame));
  REQUIRE(link->WriteSoon(AnswerTo(101)).ok());
  REQUIRE(daemon.ReadFrame(&answer, 5000));
  CHECK(answer.servant().answer().delivery() == 100);
}

}  // namespace
}  // namespace cohort::internal
