// Calls over the local fast path (invocation/local_calls.h) against a fake daemon end: a caller
// alone on the link reads its own result (no hand-off from a reader thread), the helper thread
// reads when several calls are pending, every result reaches its own caller whatever the order
// the daemon answers in, a result that comes after the reading caller has returned is still read,
// and a deadline or a broken link fails every call on the link, none hangs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/local_calls.h"
#include "nso/heap_count.h"
#include "proto/api.pb.h"
#include "test/echo_request.h"
#include "test/fake_local_daemon.h"

namespace cohort::internal {
namespace {

// The daemon's answer to a call: its payload back, from member "m1".
api::LocalFrame ResultFor(const api::LocalFrame& call) {
  api::LocalFrame frame;
  api::PipelinedResult* result = frame.mutable_result();
  result->set_call(call.call().call());
  api::ReplyFrom* reply = result->mutable_reply()->add_replies();
  reply->set_member("m1");
  reply->set_payload(call.call().invoke().payload());
  result->mutable_reply()->set_wanted(1);
  return frame;
}

// Reads `count` calls from the daemon's end (each within 5 s).
std::vector<api::LocalFrame> ReadCalls(FakeDaemon* daemon, size_t count) {
  std::vector<api::LocalFrame> calls;
  api::LocalFrame frame;
  while (calls.size() < count && daemon->ReadFrame(&frame, 5000)) {
    REQUIRE(frame.has_call());
    calls.push_back(frame);
  }
  REQUIRE(calls.size() == count);
  return calls;
}

std::string PayloadOf(const std::optional<absl::StatusOr<GroupReplies>>& got) {
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  REQUIRE(got->value().replies.size() == 1);
  return got->value().replies[0].payload;
}

TEST_CASE("local calls: a caller alone reads its own result, no hand-off from another thread",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  std::thread answerer([&daemon] {
    for (int i = 0; i < 20; ++i) daemon.WriteFrames({ResultFor(ReadCalls(&daemon, 1)[0])});
  });
  for (int i = 0; i < 20; ++i) {
    CHECK(PayloadOf(calls.Invoke(test::EchoRequest(absl::StrCat("p", i)), absl::Seconds(10))) ==
          absl::StrCat("p", i));
  }
  answerer.join();
  CHECK(calls.reads().by_callers == 20);
  CHECK(calls.reads().by_helper == 0);
}

TEST_CASE("local calls: concurrent callers each get their own result, in any order", "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  constexpr int kCallers = 16;
  for (int order = 0; order < 3; ++order) {  // answers reversed, interleaved, one write each
    std::thread answerer([&daemon, order] {
      std::vector<api::LocalFrame> got = ReadCalls(&daemon, kCallers);
      std::vector<api::LocalFrame> results;
      for (const api::LocalFrame& call : got) results.push_back(ResultFor(call));
      if (order == 0) {
        daemon.WriteFrames({results.rbegin(), results.rend()});
      } else if (order == 1) {
        for (size_t i = 0; i < results.size(); i += 2) daemon.WriteFrames({results[i]});
        absl::SleepFor(absl::Milliseconds(20));
        for (size_t i = 1; i < results.size(); i += 2) daemon.WriteFrames({results[i]});
      } else {
        for (const api::LocalFrame& result : results) {
          daemon.WriteFrames({result});
          absl::SleepFor(absl::Microseconds(300));
        }
      }
    });
    std::vector<std::string> payloads(kCallers);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&calls, &payloads, c, order] {
        auto got = calls.Invoke(test::EchoRequest(absl::StrCat("o", order, "c", c)), absl::Seconds(10));
        if (got.has_value() && got->ok() && got->value().replies.size() == 1) {
          payloads[c] = got->value().replies[0].payload;
        }
      });
    }
    for (std::thread& caller : callers) caller.join();
    answerer.join();
    for (int c = 0; c < kCallers; ++c) CHECK(payloads[c] == absl::StrCat("o", order, "c", c));
  }
  // With many calls pending the helper thread read (a caller alone may have read some).
  CHECK(calls.reads().by_helper > 0);
  CHECK(calls.reads().by_callers + calls.reads().by_helper == 3 * kCallers);
}

TEST_CASE("local calls: when the reading caller's own result comes first, the other one's is read",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  for (int round = 0; round < 10; ++round) {
    // Two callers; whichever reads, its result or the other's comes first, the other 50 ms later
    // in its own write: the second result needs a reader after the first caller has returned
    // (the helper, or the second caller once alone).
    std::thread answerer([&daemon, round] {
      std::vector<api::LocalFrame> got = ReadCalls(&daemon, 2);
      size_t first = round % 2;
      daemon.WriteFrames({ResultFor(got[first])});
      absl::SleepFor(absl::Milliseconds(50));
      daemon.WriteFrames({ResultFor(got[1 - first])});
    });
    std::optional<absl::StatusOr<GroupReplies>> a, b;
    std::thread other([&] { b = calls.Invoke(test::EchoRequest("b"), absl::Seconds(10)); });
    a = calls.Invoke(test::EchoRequest("a"), absl::Seconds(10));
    other.join();
    answerer.join();
    CHECK(PayloadOf(a) == "a");
    CHECK(PayloadOf(b) == "b");
  }
}

// The daemon's answer with `members` replies (m1, m2, ...), each "<member>:<payload>", m2's an
// error when `m2_fails`; or the error NOT_FOUND when `members` is 0.
api::LocalFrame RepliesFor(const api::LocalFrame& call, int members, bool m2_fails) {
  api::LocalFrame frame;
  api::PipelinedResult* result = frame.mutable_result();
  result->set_call(call.call().call());
  if (members == 0) {
    result->set_status_code(static_cast<int>(absl::StatusCode::kNotFound));
    result->set_error("unknown group \"g\"");
    return frame;
  }
  for (int m = 1; m <= members; ++m) {
    api::ReplyFrom* reply = result->mutable_reply()->add_replies();
    reply->set_member(absl::StrCat("m", m));
    reply->set_node(static_cast<uint32_t>(m));
    reply->set_payload(absl::StrCat("m", m, ":", call.call().invoke().payload()));
    if (m == 2 && m2_fails) {
      reply->set_status_code(static_cast<int>(absl::StatusCode::kUnimplemented));
      reply->set_error("no such method at m2");
    }
  }
  result->mutable_reply()->set_wanted(static_cast<uint32_t>(members));
  result->mutable_reply()->set_view_id(7);
  return frame;
}

TEST_CASE("local calls: InvokeInto fills the caller's replies, reusing their memory", "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  // Reply counts per call: the vector grows and shrinks; 0 is an error. The last six are
  // measured, after two calls of the same count (the strings made for replies the caller did not
  // have before reach the link's buffer in the first, grow there in the second): every reply OK
  // (an error's message is a new absl::Status's).
  const std::vector<int> members = {3, 3, 1, 3, 0, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  const size_t measured = members.size() - 6;
  std::thread answerer([&daemon, &members, measured] {
    for (size_t i = 0; i < members.size(); ++i) {
      daemon.WriteFrames({RepliesFor(ReadCalls(&daemon, 1)[0], members[i], i < measured)});
    }
  });
  GroupReplies into;
  std::set<const char*> buffers;  // where m1's payload was, over the last six (same size) calls
  uint64_t allocated = 0;         // by this thread in those calls (it reads its own results)
  for (size_t i = 0; i < members.size(); ++i) {
    // The same size each time (past the short-string buffer), a different text.
    const std::string payload = std::string(100, 'x') + static_cast<char>('a' + i);
    const api::InvokeRequest request = test::EchoRequest(payload);
    const uint64_t before = *nso::ThreadHeapAllocations();
    std::optional<absl::Status> got = calls.InvokeInto(request, absl::Seconds(10), &into);
    if (i >= measured) allocated += *nso::ThreadHeapAllocations() - before;
    INFO("call " << i);
    REQUIRE(got.has_value());
    if (members[i] == 0) {
      CHECK(got->code() == absl::StatusCode::kNotFound);
      CHECK(got->message() == "unknown group \"g\"");
      CHECK(into.replies.empty());
      continue;
    }
    REQUIRE(got->ok());
    REQUIRE(into.replies.size() == static_cast<size_t>(members[i]));
    CHECK(into.view_id == 7);
    CHECK(into.wanted == static_cast<uint32_t>(members[i]));
    for (int m = 1; m <= members[i]; ++m) {
      const Reply& reply = into.replies[m - 1];
      CHECK(reply.member == absl::StrCat("m", m));
      CHECK(reply.node == static_cast<uint32_t>(m));
      CHECK(reply.payload == absl::StrCat("m", m, ":", payload));
      if (m == 2 && i < measured) {
        CHECK(reply.status.code() == absl::StatusCode::kUnimplemented);
        CHECK(reply.status.message() == "no such method at m2");
      } else {
        CHECK(reply.status.ok());
      }
    }
    if (i >= measured) buffers.insert(into.replies[0].payload.data());
  }
  answerer.join();
  // Swapped, not made anew: m1's payload takes turns between two buffers, the caller's and the
  // link's read buffer, and the caller allocated nothing (Invoke's GroupReplies: a vector and a
  // string per reply, 4 per call here).
  CHECK(buffers.size() <= 2);
  CHECK(allocated == 0);
  CHECK(calls.reads().by_callers == members.size());
}

// An asynchronous call into memory the test keeps (Client::InvokeAsyncInto's AsyncCall): it
// notes the outcome, and what the finishing thread (the link's reader) has allocated so far.
class KeptCall : public AsyncInto {
 public:
  GroupReplies* into() override { return &replies; }
  void Finish(absl::Status outcome) override {
    absl::MutexLock lock(&mu);
    status = std::move(outcome);
    reader_allocations = *nso::ThreadHeapAllocations();
    ++finished;
  }
  bool AwaitFinished(int count) {
    absl::MutexLock lock(&mu);
    awaited = count;
    return mu.AwaitWithTimeout(absl::Condition(this, &KeptCall::Reached), absl::Seconds(10));
  }
  bool Reached() const { return finished >= awaited; }  // under mu

  GroupReplies replies;
  absl::Mutex mu;
  absl::Status status;
  uint64_t reader_allocations = 0;
  int finished = 0;
  int awaited = 0;
};

TEST_CASE("local calls: InvokeAsyncInto fills kept calls, the helper reads, nothing allocated "
          "per call",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  constexpr int kInFlight = 4;
  constexpr int kRounds = 12;
  constexpr int kMeasured = 6;  // the last rounds, once everything has grown
  std::vector<std::unique_ptr<KeptCall>> kept;
  std::vector<api::InvokeRequest> requests;
  for (int k = 0; k < kInFlight; ++k) {
    kept.push_back(std::make_unique<KeptCall>());
    requests.push_back(test::EchoRequest(std::string(100, 'x')));
  }
  uint64_t caller_allocated = 0;
  uint64_t reader_before = 0;
  for (int round = 0; round < kRounds; ++round) {
    const bool measured = round >= kRounds - kMeasured;
    const uint64_t before = *nso::ThreadHeapAllocations();
    for (int k = 0; k < kInFlight; ++k) {
      // The same size each time (past the short-string buffer), a different text.
      (*requests[k].mutable_payload())[0] = static_cast<char>('a' + (round + k) % 26);
      REQUIRE(calls.InvokeAsyncInto(requests[k], absl::Seconds(10), kept[k].get()));
    }
    if (measured) caller_allocated += *nso::ThreadHeapAllocations() - before;
    // The daemon answers the round's calls in reverse order, all at once.
    std::vector<api::LocalFrame> taken = ReadCalls(&daemon, kInFlight);
    std::vector<api::LocalFrame> answers;
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) answers.push_back(ResultFor(*it));
    daemon.WriteFrames(answers);
    for (int k = 0; k < kInFlight; ++k) {
      INFO("round " << round << " call " << k);
      REQUIRE(kept[k]->AwaitFinished(round + 1));
      absl::MutexLock lock(&kept[k]->mu);
      REQUIRE(kept[k]->status.ok());
      REQUIRE(kept[k]->replies.replies.size() == 1);
      CHECK(kept[k]->replies.replies[0].member == "m1");
      CHECK(kept[k]->replies.replies[0].payload == requests[k].payload());
      if (round == kRounds - kMeasured - 1) {
        reader_before = std::max(reader_before, kept[k]->reader_allocations);
      }
    }
  }
  uint64_t reader_after = 0;
  for (auto& call : kept) {
    absl::MutexLock lock(&call->mu);
    reader_after = std::max(reader_after, call->reader_allocations);
  }
  // Nobody waited: the helper read every result (no caller did).
  CHECK(calls.reads().by_helper == kInFlight * kRounds);
  CHECK(calls.reads().by_callers == 0);
  // The calls' bookkeeping, their deadlines' entries and their replies were kept from one round
  // to the next: the calling thread and the reader allocated nothing in the last rounds
  // (InvokeAsync: a Pending, a deadline's node and a GroupReplies per call at least).
  CHECK(caller_allocated == 0);
  CHECK(reader_after == reader_before);
}

TEST_CASE("local calls: InvokeAsyncInto's calls fail by their wait and when the link breaks",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  KeptCall late;
  const absl::Time start = absl::Now();
  REQUIRE(calls.InvokeAsyncInto(test::EchoRequest("late"), absl::Milliseconds(300), &late));
  ReadCalls(&daemon, 1);  // taken and never answered
  REQUIRE(late.AwaitFinished(1));
  CHECK(absl::Now() - start < absl::Seconds(5));
  {
    absl::MutexLock lock(&late.mu);
    CHECK(late.status.code() == absl::StatusCode::kDeadlineExceeded);
  }
  // The link was reset (a missing result means it is stuck): the next asynchronous call does
  // not wait for a new one and goes over gRPC (false, the call untouched).
  KeptCall next;
  CHECK_FALSE(calls.InvokeAsyncInto(test::EchoRequest("next"), absl::Seconds(10), &next));
  CHECK(next.finished == 0);
}

TEST_CASE("local calls: a caller's deadline resets the link and fails the others at once",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  std::optional<absl::StatusOr<GroupReplies>> patient;
  absl::Time patient_done;
  std::thread other([&] {
    patient = calls.Invoke(test::EchoRequest("patient"), absl::Seconds(30));
    patient_done = absl::Now();
  });
  ReadCalls(&daemon, 1);  // the daemon takes the patient call and never answers
  const absl::Time start = absl::Now();
  auto hasty = calls.Invoke(test::EchoRequest("hasty"), absl::Milliseconds(200));
  other.join();
  REQUIRE(hasty.has_value());
  CHECK(hasty->status().code() == absl::StatusCode::kDeadlineExceeded);
  REQUIRE(patient.has_value());
  CHECK(patient->status().code() == absl::StatusCode::kUnavailable);
  CHECK(patient_done - start < absl::Seconds(10));  // not its own 30 s deadline
}

TEST_CASE("local calls: a caller reading alone still stops at its deadline", "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  std::thread taker([&daemon] { ReadCalls(&daemon, 1); });  // taken, never answered
  const absl::Time start = absl::Now();
  auto got = calls.Invoke(test::EchoRequest("alone"), absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  taker.join();
  REQUIRE(got.has_value());
  CHECK(got->status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(took >= absl::Milliseconds(300));
  CHECK(took < absl::Seconds(5));  // its read waits a slice (100 ms) at a time, not for ever
}

TEST_CASE("local calls: the daemon's end closing fails every pending call UNAVAILABLE", "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  constexpr int kCallers = 8;
  std::vector<std::optional<absl::StatusOr<GroupReplies>>> got(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&calls, &got, c] {
      got[c] = calls.Invoke(test::EchoRequest(absl::StrCat(c)), absl::Seconds(30));
    });
  }
  std::vector<api::LocalFrame> taken = ReadCalls(&daemon, kCallers);
  daemon.WriteFrames({ResultFor(taken[3])});  // one answered, then the daemon goes away
  daemon.Close();
  for (std::thread& caller : callers) caller.join();
  int answered = 0;
  for (int c = 0; c < kCallers; ++c) {
    REQUIRE(got[c].has_value());
    if (got[c]->ok()) {
      ++answered;
      CHECK(PayloadOf(got[c]) == taken[3].call().invoke().payload());
    } else {
      CHECK(got[c]->status().code() == absl::StatusCode::kUnavailable);
    }
  }
  CHECK(answered == 1);
}

TEST_CASE("local calls: a link the daemon closed while idle is replaced before the call leaves",
          "[local]") {
  FakeDaemon daemon;
  LocalCalls calls(daemon.endpoint(), daemon.Open());
  std::thread answerer([&daemon] { daemon.WriteFrames({ResultFor(ReadCalls(&daemon, 1)[0])}); });
  CHECK(PayloadOf(calls.Invoke(test::EchoRequest("before"), absl::Seconds(10))) == "before");
  answerer.join();
  // The daemon restarts its end while no call is pending: nobody reads the link, so only the
  // next call can find it closed; it goes on a new link, not failing UNAVAILABLE on the old one.
  daemon.Close();
  daemon.AcceptAgain();
  std::thread again([&daemon] {
    daemon.Accepted();
    daemon.WriteFrames({ResultFor(ReadCalls(&daemon, 1)[0])});
  });
  CHECK(PayloadOf(calls.Invoke(test::EchoRequest("after"), absl::Seconds(10))) == "after");
  again.join();
  // Closed again, and this time no new link can be made (nothing answers its hello): the
  // fast path is given up (the client goes over gRPC), again without an UNAVAILABLE first.
  daemon.Close();
  CHECK_FALSE(calls.Invoke(test::EchoRequest("gone"), absl::Seconds(30)).has_value());
}

TEST_CASE("local calls: closing while a reopen waits for a frozen daemon's hello does not wait "
          "for it", "[local]") {
  FakeDaemon daemon;
  auto calls = std::make_unique<LocalCalls>(daemon.endpoint(), daemon.Open());
  // The daemon's end closes and nothing answers a new link's hello any more (the socket still
  // accepts: a frozen daemon). The asynchronous call finds the link closed, goes over gRPC (false)
  // and a thread starts reopening, which would wait 5 s for the hello.
  daemon.Close();
  LocalCalls::Done done = [](absl::StatusOr<GroupReplies>) {};
  CHECK_FALSE(calls->InvokeAsync(test::EchoRequest("frozen"), absl::Seconds(10), &done));
  absl::SleepFor(absl::Milliseconds(300));  // the reopen is waiting for the hello by now
  const absl::Time closing = absl::Now();
  calls.reset();
  CHECK(absl::Now() - closing < absl::Seconds(2));
}

}  // namespace
}  // namespace cohort::internal
