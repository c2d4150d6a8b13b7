// The queues between the protocol thread and a stream's writer: nso/reactor_outbox.h (a gRPC
// reactor's writes, one at a time) and nso/handoff_queue.h (an embedded node's consumer thread).
// A group watch pushes snapshots that supersede the ones not yet written (PushLatest), so a
// watcher that never reads holds one message at its daemon, however many views change (until
// session 51 every change was queued); a stream past its due_bytes_max is cut off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nso/handoff_queue.h"
#include "nso/reactor_outbox.h"
#include "proto/api.pb.h"

namespace cohort::nso {
namespace {

// A reactor whose writes complete only when the test says so (WriteDone).
struct FakeReactor {
  using Outbox = ReactorOutbox<std::string, api::GroupDetailsReply>;
  std::vector<std::string> written;
  std::vector<bool> hinted;  // buffer hint of each write: more was due behind it
  std::vector<std::string> dropped;
  int finished = 0;
  grpc::Status status;

  Outbox::Hooks Hooks() {
    Outbox::Hooks hooks;
    hooks.start_write = [this](const api::GroupDetailsReply* out, grpc::WriteOptions options) {
      written.push_back(out->group());
      hinted.push_back(options.get_buffer_hint());
    };
    hooks.finish = [this](grpc::Status why) {
      ++finished;
      status = std::move(why);
    };
    hooks.convert = [](std::string item, api::GroupDetailsReply* out) {
      out->set_group(std::move(item));
    };
    hooks.dropped = [this](const std::string& item) { dropped.push_back(item); };
    hooks.weigh = [](const std::string& item) { return static_cast<uint64_t>(item.size()); };
    return hooks;
  }
};

TEST_CASE("reactor outbox: one write at a time, in order, a burst with buffer hints") {
  FakeReactor reactor;
  FakeReactor::Outbox outbox(reactor.Hooks());
  outbox.Push("a", /*expected=*/false);
  CHECK(reactor.written == std::vector<std::string>{"a"});  // at once, by the pushing thread
  outbox.Push("bb", false);
  outbox.Push("ccc", false);
  CHECK(reactor.written.size() == 1);  // a write is in progress
  CHECK(outbox.backlog().due_bytes == 5);
  CHECK(outbox.backlog().outstanding == 2);
  outbox.WriteDone(true);
  outbox.WriteDone(true);
  CHECK(reactor.written == std::vector<std::string>{"a", "bb", "ccc"});
  CHECK(reactor.hinted == std::vector<bool>{false, true, false});
  CHECK(outbox.backlog().written_bytes == 6);
  outbox.WriteDone(true);
  CHECK(reactor.finished == 0);
  outbox.Close();
  CHECK(reactor.finished == 1);
  CHECK(reactor.status.ok());
}

TEST_CASE("reactor outbox: a snapshot supersedes the ones not yet written (PushLatest)") {
  FakeReactor reactor;
  FakeReactor::Outbox outbox(reactor.Hooks());
  outbox.PushLatest("view-1");
  CHECK(reactor.written == std::vector<std::string>{"view-1"});
  // The watcher does not read: the write in progress never completes while views change.
  for (int view = 2; view <= 1000; ++view) outbox.PushLatest("view-" + std::to_string(view));
  CHECK(outbox.backlog().outstanding == 1);
  CHECK(outbox.backlog().due_bytes == std::string("view-1000").size());
  CHECK(reactor.dropped.empty());  // superseded, not dropped for a gone client
  outbox.WriteDone(true);
  CHECK(reactor.written == std::vector<std::string>{"view-1", "view-1000"});
  outbox.WriteDone(true);
  CHECK(outbox.backlog().outstanding == 0);
  outbox.PushLatest("view-1001");  // nothing due: written at once
  CHECK(reactor.written.back() == "view-1001");
}

TEST_CASE("reactor outbox: a gone client's items are dropped and the stream finishes once the "
          "write in progress is done") {
  FakeReactor reactor;
  FakeReactor::Outbox outbox(reactor.Hooks());
  outbox.Push("a", false);
  outbox.Push("b", false);
  outbox.FinishWith(grpc::Status(grpc::StatusCode::NOT_FOUND, "group gone"));
  CHECK(reactor.dropped == std::vector<std::string>{"b"});
  CHECK(reactor.finished == 0);  // "a" is being written
  outbox.WriteDone(true);
  CHECK(reactor.finished == 1);
  CHECK(reactor.status.error_code() == grpc::StatusCode::NOT_FOUND);
  outbox.Detach();
  outbox.PushLatest("late");  // after OnDone: dropped without a hook
  CHECK(reactor.written == std::vector<std::string>{"a"});
  CHECK(reactor.finished == 1);
}

TEST_CASE("reactor outbox: past due_bytes_max the stream finishes with the overflow's status, "
          "what is due dropped; what was pushed, counted") {
  FakeReactor reactor;
  FakeReactor::Outbox::Hooks hooks = reactor.Hooks();
  hooks.due_bytes_max = [](uint64_t) -> uint64_t { return 10; };
  hooks.overflow = [](uint64_t due, uint64_t bound) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        std::to_string(due) + " due over " + std::to_string(bound));
  };
  FakeReactor::Outbox outbox(std::move(hooks));
  outbox.Push("1234", false);  // written at once: not due
  outbox.Push("abcd", false);
  outbox.Push("efgh", false);
  CHECK(outbox.backlog().pushed == 3);
  CHECK(outbox.backlog().pushed_bytes == 12);
  CHECK(reactor.dropped.empty());  // 8 due: within the limit
  outbox.Push("ijk", false);       // 11 due
  CHECK(reactor.dropped == std::vector<std::string>{"abcd", "efgh", "ijk"});
  CHECK(reactor.finished == 0);  // the write in progress first
  outbox.WriteDone(true);
  CHECK(reactor.finished == 1);
  CHECK(reactor.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(reactor.status.error_message() == "11 due over 10");
  CHECK(reactor.written == std::vector<std::string>{"1234"});
}

TEST_CASE("reactor outbox: a bound of the heaviest item pushed so far rises with large items "
          "(here 3 times it)") {
  FakeReactor reactor;
  FakeReactor::Outbox::Hooks hooks = reactor.Hooks();
  hooks.due_bytes_max = [](uint64_t largest) { return std::max<uint64_t>(10, 3 * largest); };
  hooks.overflow = [](uint64_t due, uint64_t bound) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        std::to_string(due) + " due over " + std::to_string(bound));
  };
  FakeReactor::Outbox outbox(std::move(hooks));
  outbox.Push("12", false);  // written at once: not due
  outbox.Push("abcde", false);
  outbox.Push("fghij", false);
  outbox.Push("klmn", false);  // 14 due: over 10, within 3 x 5
  CHECK(outbox.backlog().largest == 5);
  CHECK(reactor.dropped.empty());
  outbox.WriteDone(true);  // "12" done, "abcde" handed to gRPC: 9 due
  outbox.Push("opqrst", false);  // 15 due, the bound 18
  CHECK(reactor.dropped.empty());
  outbox.Push("uvwx", false);  // 19 due
  CHECK(reactor.dropped == std::vector<std::string>{"fghij", "klmn", "opqrst", "uvwx"});
  outbox.WriteDone(true);
  CHECK(reactor.finished == 1);
  CHECK(reactor.status.error_message() == "19 due over 18");
  CHECK(reactor.written == std::vector<std::string>{"12", "abcde"});
}

TEST_CASE("handoff queue: PushLatest leaves one item for a consumer that did not take") {
  HandoffQueue<int> queue;
  REQUIRE(queue.Push(1));
  REQUIRE(queue.PushLatest(2));
  REQUIRE(queue.PushLatest(3));
  std::vector<int> taken;
  REQUIRE(queue.TakeAll(&taken));
  CHECK(taken == std::vector<int>{3});
  REQUIRE(queue.Push(4));
  REQUIRE(queue.Push(5));
  REQUIRE(queue.TakeAll(&taken));
  CHECK(taken == std::vector<int>{4, 5});  // Push keeps every item
  queue.Close();
  CHECK_FALSE(queue.PushLatest(6));
  CHECK_FALSE(queue.TakeAll(&taken));
}

}  // namespace
}  // namespace cohort::nso
