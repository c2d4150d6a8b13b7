// The client's end of the local fast path (invocation/local_link.h) against a fake daemon end on a
// Unix socket of the test's own: concurrent writers share send() calls without losing, splitting or
// reordering a frame; ReadUntil's timeout keeps the link and a partial frame; a reader waiting
// for a frame is not woken when the daemon consumes what the link wrote; WriteSoon holds answers while frames are buffered and sends them before the reader
// waits, when the reader has none left, or once they have been held kHoldUs.
#include <catch2/catch.hpp>
#include <poll.h>
#include <sys/resource.h>
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
#include "test/fake_local_daemon.h"
#include "nso/framing.h"
#include "proto/api.pb.h"

namespace cohort::internal {
namespace {

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

// Take parses each result into the last one's objects (their storage reused): what a frame does
// not carry must not stay from the one before.
TEST_CASE("results read into one frame hold only what each carries", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  auto result = [](uint64_t call, int replies, int status) {
    api::LocalFrame frame;
    api::PipelinedResult* result = frame.mutable_result();
    result->set_call(call);
    result->set_status_code(status);
    if (status != 0) result->set_error("refused");
    for (int i = 0; i < replies; ++i) {
      api::ReplyFrom* from = result->mutable_reply()->add_replies();
      from->set_member(absl::StrCat("n", i + 1));
      from->set_node(i + 1);
      from->set_payload(std::string(40 + i, 'r'));
    }
    if (replies > 0) result->mutable_reply()->set_view_id(7);
    return frame;
  };
  const std::vector<api::LocalFrame> sent = {result(1, 3, 0), result(2, 1, 0), result(3, 0, 5),
                                             result(4, 2, 0)};
  daemon.WriteFrames(sent);
  api::LocalFrame frame;
  for (const api::LocalFrame& expected : sent) {
    REQUIRE(link->ReadUntil(&frame, internal::SteadyAfter(absl::Seconds(5))) ==
            LocalLink::Outcome::kFrame);
    CHECK(frame.result().call() == expected.result().call());
    CHECK(frame.result().status_code() == expected.result().status_code());
    CHECK(frame.result().error() == expected.result().error());
    // The reply, field by field (an empty one may be kept where none came).
    CHECK(frame.result().reply().SerializeAsString() == expected.result().reply().SerializeAsString());
    // Moved out, as ToGroupReplies does: the next parse must not rely on what is left.
    for (api::ReplyFrom& from : *frame.mutable_result()->mutable_reply()->mutable_replies()) {
      std::string taken = std::move(*from.mutable_payload());
    }
  }
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

TEST_CASE("ReadUntil: a timeout keeps the link and the part of a frame read so far", "[local]") {
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  std::string bytes;
  nso::AppendFrame(Event(42), &bytes);
  daemon.WriteBytes(bytes.substr(0, bytes.size() / 2));
  api::LocalFrame frame;
  const internal::SteadyTime start = internal::SteadyNow();
  CHECK(link->ReadUntil(&frame, start + std::chrono::milliseconds(100)) == LocalLink::Outcome::kTimeout);
  CHECK(internal::SteadySince(start) >= absl::Milliseconds(100));
  CHECK(link->ReadUntil(&frame, internal::SteadyNow()) == LocalLink::Outcome::kTimeout);  // already due
  daemon.WriteBytes(bytes.substr(bytes.size() / 2));
  REQUIRE(link->ReadUntil(&frame, internal::SteadyAfter(absl::Seconds(5))) == LocalLink::Outcome::kFrame);
  CHECK(frame.event().delivery() == 42);
  CHECK_FALSE(link->FrameBuffered());
  daemon.WriteFrames({Event(1), Event(2)});  // one write: the second frame stays buffered
  REQUIRE(link->ReadUntil(&frame, internal::SteadyAfter(absl::Seconds(5))) == LocalLink::Outcome::kFrame);
  CHECK(link->FrameBuffered());
  daemon.Close();
  REQUIRE(link->ReadUntil(&frame, internal::SteadyAfter(absl::Seconds(5))) == LocalLink::Outcome::kFrame);
  CHECK(frame.event().delivery() == 2);
  CHECK(link->ReadUntil(&frame, internal::SteadyAfter(absl::Seconds(5))) == LocalLink::Outcome::kEnded);
}

TEST_CASE("a waiting reader sleeps while the daemon consumes what the link writes", "[local]") {
  // A thread asleep in read() on a Unix stream socket is woken each time the other end consumes
  // what this end wrote (the write-space wake-up); LocalLink waits in poll(), which filters it.
  FakeDaemon daemon;
  std::unique_ptr<LocalLink> link = daemon.Open();
  std::atomic<bool> reading{false};
  std::atomic<long> switches{-1};
  api::LocalFrame got;
  std::thread reader([&] {
    rusage before{};
    getrusage(RUSAGE_THREAD, &before);
    reading = true;
    bool ok = link->Read(&got);
    rusage after{};
    getrusage(RUSAGE_THREAD, &after);
    switches = ok ? after.ru_nvcsw - before.ru_nvcsw : -2;
  });
  while (!reading) absl::SleepFor(absl::Milliseconds(1));
  constexpr int kWrites = 50;
  for (int i = 0; i < kWrites; ++i) {
    absl::SleepFor(absl::Milliseconds(2));  // the reader is asleep again
    REQUIRE(link->Write(Call(i, "x")).ok());
    api::LocalFrame call;
    REQUIRE(daemon.ReadFrame(&call, 5000));  // consumed: the write space comes back
    CHECK(call.call().call() == static_cast<uint64_t>(i));
  }
  absl::SleepFor(absl::Milliseconds(2));
  daemon.WriteFrames({Event(7)});
  reader.join();
  REQUIRE(got.event().delivery() == 7);
  INFO("voluntary context switches of the reader during " << kWrites << " writes: " << switches);
  CHECK(switches >= 1);  // it did sleep
  CHECK(switches < kWrites / 5);  // a read() woken per consumed write makes at least kWrites
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
