// The protocol thread (nso/event_loop.h): tasks run in the order posted, and a flood of posted
// tasks does not starve the watched descriptors or the tick. Found with cohort-bench: 64 threads
// sending one-way calls through an embedded node kept its task queue non-empty, the loop never
// looked at its peer sockets, the failure detector heard nobody and the node refused its own calls
// ("one-way needs 2 of 3 members, 1 reachable", 64,539 errors in a 0.5 s window).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "nso/event_loop.h"

namespace cohort::nso {
namespace {

using Clock = std::chrono::steady_clock;

void Spin(std::chrono::microseconds how_long) {
  const Clock::time_point end = Clock::now() + how_long;
  while (Clock::now() < end) {
  }
}

}  // namespace

TEST_CASE("event loop: posted tasks run in order, also when a batch is split", "[event_loop]") {
  EventLoop loop(10, 1 << 20, [](uint64_t) {});
  loop.Start();
  std::vector<int> ran;  // loop thread only until Stop
  constexpr int kTasks = 20000;
  for (int i = 0; i < kTasks; ++i) {
    // Every task takes ~1 us: the batch outlasts the budget and is split in several rounds.
    REQUIRE(loop.Post([&ran, i] {
      Spin(std::chrono::microseconds(1));
      ran.push_back(i);
    }));
  }
  loop.Stop();  // runs what is queued
  REQUIRE(ran.size() == kTasks);
  for (int i = 0; i < kTasks; ++i) {
    if (ran[i] != i) FAIL("task " << i << " ran as number " << ran[i]);
  }
}

TEST_CASE("event loop: a flood of posted tasks does not starve descriptors or the tick",
          "[event_loop]") {
  std::atomic<int> ticks{0};
  EventLoop loop(10, 1 << 20, [&](uint64_t) { ticks++; });
  int pipe_fds[2];
  REQUIRE(pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) == 0);
  std::atomic<int> bytes_read{0};
  REQUIRE(loop.Watch(pipe_fds[0], EPOLLIN, [&](uint32_t) {
    char buffer[64];
    ssize_t got = read(pipe_fds[0], buffer, sizeof(buffer));
    if (got > 0) bytes_read += static_cast<int>(got);
  }));
  loop.Start();

  // Four threads keep the queue full for 3 s: each task spins 20 us, and they post far faster
  // than one thread runs them.
  std::atomic<bool> flooding{true};
  std::atomic<int64_t> ran{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      while (flooding) {
        if (loop.QueueDepth() > 20000) {
          std::this_thread::yield();
          continue;
        }
        loop.Post([&ran] {
          Spin(std::chrono::microseconds(20));
          ran++;
        });
      }
    });
  }
  const Clock::time_point flood_end = Clock::now() + std::chrono::seconds(3);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the queue is full by now
  const int ticks_before = ticks.load();
  // Bytes written to the descriptor during the flood are read during the flood, each within
  // a generous bound (the budget is 5 ms; before the fix they waited for the flood to end).
  int written = 0;
  int late = 0;
  while (Clock::now() + std::chrono::milliseconds(600) < flood_end) {
    REQUIRE(write(pipe_fds[1], "x", 1) == 1);
    ++written;
    const Clock::time_point asked = Clock::now();
    while (bytes_read.load() < written && Clock::now() - asked < std::chrono::milliseconds(500)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (bytes_read.load() < written) ++late;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int ticks_during = ticks.load() - ticks_before;
  const size_t depth = loop.QueueDepth();
  flooding = false;
  for (std::thread& poster : posters) poster.join();
  loop.Stop();
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  INFO("written " << written << ", late " << late << ", ticks during the flood " << ticks_during
                  << ", tasks run " << ran.load() << ", queue depth at the end " << depth);
  REQUIRE(depth > 1000);     // the flood was real: work was still waiting at the end
  CHECK(written >= 20);
  CHECK(late == 0);           // every byte was read within 500 ms, while tasks kept waiting
  CHECK(ticks_during >= 20);  // the tick kept running (every 10 ms when free; >= 20 in ~2 s)
}

}  // namespace cohort::nso
