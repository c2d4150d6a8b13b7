// What the peer transport tests share: heartbeats numbered for checking order, and a wait.
#ifndef COHORT_TEST_TRANSPORT_TEST_UTIL_H_
#define COHORT_TEST_TRANSPORT_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/event_loop.h"
#include "nso/transport.h"
#include "tools/subprocess.h"

namespace cohort::nso::test {

// Sends numbered heartbeats through a transport from the protocol thread, as the Node does, and
// records the numbers of those it receives.
class HeartbeatLog {
 public:
  HeartbeatLog(EventLoop* loop, Transport* transport) : loop_(loop), transport_(transport) {
    transport_->SetReceiver([this](NodeId from, wire::Envelope envelope) {
      absl::MutexLock lock(&mu_);
      if (envelope.has_consensus()) {
        consensus_.push_back(envelope.SerializeAsString());
        return;
      }
      received_.push_back(envelope.heartbeat().sent_ms());
    });
    transport_->SetLinkWatcher([this](NodeId peer, bool up) {
      absl::MutexLock lock(&mu_);
      links_.push_back((up ? "up " : "down ") + std::to_string(peer));
    });
  }

  // Heartbeats numbered first..first+count-1, sent as one batch of protocol work; each is
  // `pad_bytes` larger (a longer group name) when asked.
  void Send(NodeId self, NodeId to, int first, int count, NodeId claimed_sender = 0,
            size_t pad_bytes = 0) {
    loop_->Post([=, this] {
      for (int i = first; i < first + count; ++i) {
        wire::Envelope envelope;
        envelope.set_version(wire::VERSION_1);
        envelope.set_group("g" + std::string(pad_bytes, 'p'));
        envelope.set_sender_node(claimed_sender ? claimed_sender : self);
        envelope.mutable_heartbeat()->set_sent_ms(i);
        transport_->Send(to, std::move(envelope));
      }
    });
  }
  // Each envelope with a consensus value held apart (Transport::SendWithBatch), as one batch of
  // protocol work with heartbeat `heartbeat` before it.
  void SendConsensus(NodeId to, const wire::Envelope& envelope,
                     std::shared_ptr<const wire::MessageBatch> value, int copies,
                     int heartbeat) {
    loop_->Post([=, this] {
      for (int i = 0; i < copies; ++i) {
        wire::Envelope beat;
        beat.set_version(wire::VERSION_1);
        beat.set_group("g");
        beat.set_sender_node(envelope.sender_node());
        beat.mutable_heartbeat()->set_sent_ms(heartbeat + i);
        transport_->Send(to, std::move(beat));
        transport_->SendWithBatch(
            to, envelope, {value, consensus::SharedBatch::Field::kConsensusValue});
      }
    });
  }
  std::vector<uint64_t> Received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  // The consensus envelopes received, serialised.
  std::vector<std::string> ConsensusReceived() {
    absl::MutexLock lock(&mu_);
    return consensus_;
  }
  // What the transport's link watcher was told, in order: "up 2", "down 2", ...
  std::vector<std::string> LinkEvents() {
    absl::MutexLock lock(&mu_);
    return links_;
  }

 private:
  EventLoop* const loop_;
  Transport* const transport_;
  absl::Mutex mu_;
  std::vector<uint64_t> received_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> consensus_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> links_ ABSL_GUARDED_BY(mu_);
};

template <typename Predicate>
bool Eventually(Predicate predicate) {
  for (int i = 0; i < 1000; ++i) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return predicate();
}

inline std::vector<uint64_t> Range(int first, int count) {
  std::vector<uint64_t> numbers;
  for (int i = first; i < first + count; ++i) numbers.push_back(i);
  return numbers;
}

// Transport::SetLinkWatcher, in either transport: node 1 is told when node 2 connects, when node
// 2's process goes away (its connection closes: one "down", at once), and when it is back; a
// connection that never says hello tells nothing. `poke` runs once both are connected, with node
// 2's port (a stranger's connection, say).
template <typename Endpoint>
void CheckLinkEvents(const std::function<void(int port2)>& poke = nullptr) {
  const int port1 = subprocess::FreePort();
  const int port2 = subprocess::FreePort();
  auto one = std::make_unique<Endpoint>(1, port1, 2, port2);
  auto two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(Eventually([&] { return one->transport().Connected(2) && two->transport().Connected(1); }));
  if (poke) poke(port2);
  REQUIRE(Eventually([&] { return one->LinkEvents().size() >= 1; }));
  CHECK(one->LinkEvents() == std::vector<std::string>{"up 2"});
  CHECK(two->LinkEvents() == std::vector<std::string>{"up 1"});
  two.reset();
  // Within a second (the failure detector's timeout would take 50 ms; this is told at once).
  const auto gone = std::chrono::steady_clock::now();
  REQUIRE(Eventually([&] { return one->LinkEvents().size() >= 2; }));
  CHECK(std::chrono::steady_clock::now() - gone < std::chrono::seconds(1));
  CHECK(one->LinkEvents() == std::vector<std::string>{"up 2", "down 2"});
  two = std::make_unique<Endpoint>(2, port2, 1, port1);
  REQUIRE(Eventually([&] { return one->LinkEvents().size() >= 3; }));
  CHECK(one->LinkEvents() == std::vector<std::string>{"up 2", "down 2", "up 2"});
  CHECK(two->LinkEvents() == std::vector<std::string>{"up 1"});
}

// Whether endpoints 1 and 2 (of either transport's test) get connected to each other.
template <typename Endpoint>
bool BothConnected(Endpoint& one, Endpoint& two) {
  return Eventually([&] { return one.transport().Connected(2) && two.transport().Connected(1); });
}

// Sends heartbeats first..first+count-1 each way, at once, and checks that each endpoint, which
// had received nothing, gets them once each, in order; and that they left in fewer frames.
template <typename Endpoint>
void CheckExchange(Endpoint& one, Endpoint& two, int first, int count) {
  one.SendHeartbeats(1, 2, first, count);
  two.SendHeartbeats(2, 1, first, count);
  REQUIRE(Eventually([&] {
    return two.Received().size() >= static_cast<size_t>(count) &&
           one.Received().size() >= static_cast<size_t>(count);
  }));
  CHECK(two.Received() == Range(first, count));
  CHECK(one.Received() == Range(first, count));
  // Batching: what one batch of protocol work sends leaves in fewer frames than envelopes.
  CHECK(one.transport().counters().frames_sent.load() < static_cast<uint64_t>(count));
}

}  // namespace cohort::nso::test

#endif  // COHORT_TEST_TRANSPORT_TEST_UTIL_H_
