// The simulated network's fault injection (nso/sim_network.h).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nso/rng.h"
#include "nso/sim_network.h"

namespace cohort::nso {
namespace {

struct Received {
  NodeId from;
  NodeId to;
  uint64_t at_ms;
  uint64_t heartbeat;
};

// Wires receivers for nodes 1..n that record every delivery.
std::vector<Received>* Record(SimNetwork* network, uint32_t n, std::vector<Received>* log) {
  for (NodeId node = 1; node <= n; ++node) {
    network->Endpoint(node)->SetReceiver([network, log, node](NodeId from, wire::Envelope e) {
      log->push_back({from, node, network->now_ms(), e.heartbeat().sent_ms()});
    });
  }
  return log;
}

wire::Envelope Heartbeat(uint64_t value) {
  wire::Envelope envelope;
  envelope.mutable_heartbeat()->set_sent_ms(value);
  return envelope;
}

TEST_CASE("rng: same seed same sequence, Uniform in range, Chance roughly right", "[sim]") {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    CHECK(x == b.Next());
    differs = differs || x != c.Next();
  }
  CHECK(differs);
  int hits = 0;
  for (int i = 0; i < 100000; ++i) {
    CHECK(a.Uniform(10) < 10);
    CHECK(a.Range(5, 7) >= 5);
    hits += a.Chance(250000) ? 1 : 0;
  }
  CHECK(hits > 23500);
  CHECK(hits < 26500);
}

TEST_CASE("sim network: fixed delay and per-message random delay", "[sim]") {
  SimNetworkOptions options;
  options.delay_min_ms = options.delay_max_ms = 10;
  SimNetwork network(options);
  std::vector<Received> log;
  Record(&network, 2, &log);
  network.Endpoint(1)->Send(2, Heartbeat(1));
  network.RunUntil(9);
  CHECK(log.empty());
  network.RunUntil(10);
  REQUIRE(log.size() == 1);
  CHECK(log[0].at_ms == 10);
  CHECK(log[0].from == 1);

  network.SetDelay(1, 50);
  log.clear();
  for (uint64_t i = 0; i < 200; ++i) network.Endpoint(1)->Send(2, Heartbeat(i));
  CHECK(network.RunUntilQuiet(1000));
  REQUIRE(log.size() == 200);
  bool reordered = false;
  for (size_t i = 1; i < log.size(); ++i) reordered |= log[i].heartbeat < log[i - 1].heartbeat;
  CHECK(reordered);  // reordering falls out of random delays
  for (const Received& r : log) CHECK(r.at_ms - 10 <= 50);
}

TEST_CASE("sim network: drop rate roughly right, duplicates counted", "[sim]") {
  SimNetworkOptions options;
  options.seed = 3;
  options.drop_per_million = 200000;
  options.duplicate_per_million = 100000;
  SimNetwork network(options);
  std::vector<Received> log;
  Record(&network, 2, &log);
  for (uint64_t i = 0; i < 10000; ++i) network.Endpoint(1)->Send(2, Heartbeat(i));
  network.RunUntilQuiet(1000);
  const SimCounters& counters = network.counters();
  CHECK(counters.messages_sent == 10000);
  CHECK(counters.messages_dropped > 1800);
  CHECK(counters.messages_dropped < 2200);
  CHECK(counters.messages_duplicated > 700);  // 10 % of the 80 % that survive the drop
  CHECK(counters.messages_duplicated < 900);
  CHECK(log.size() == counters.messages_delivered);
  CHECK(counters.messages_delivered == 10000 - counters.messages_dropped +
                                           counters.messages_duplicated);
}

TEST_CASE("sim network: partition cuts messages across sets, heal restores", "[sim]") {
  SimNetwork network(SimNetworkOptions{});
  std::vector<Received> log;
  Record(&network, 4, &log);
  network.Partition({{1, 2}, {3}});  // 4 is in no set: alone
  network.Endpoint(1)->Send(2, Heartbeat(1));
  network.Endpoint(1)->Send(3, Heartbeat(2));
  network.Endpoint(3)->Send(4, Heartbeat(3));
  network.RunUntilQuiet(100);
  REQUIRE(log.size() == 1);
  CHECK(log[0].to == 2);
  // A partition that begins while a message is in flight loses it too.
  network.Heal();
  network.Endpoint(1)->Send(3, Heartbeat(4));
  network.Partition({{1}, {3}});
  network.RunUntilQuiet(200);
  CHECK(log.size() == 1);
  network.Heal();
  network.Endpoint(1)->Send(3, Heartbeat(5));
  network.RunUntilQuiet(300);
  CHECK(log.size() == 2);
}

TEST_CASE("sim network: a crashed node neither sends nor receives; in-flight messages lost",
          "[sim]") {
  SimNetworkOptions options;
  options.delay_min_ms = options.delay_max_ms = 5;
  SimNetwork network(options);
  std::vector<Received> log;
  Record(&network, 3, &log);
  network.Endpoint(1)->Send(2, Heartbeat(1));  // in flight when 2 crashes
  network.RunUntil(2);
  network.Crash(2);
  network.Endpoint(2)->Send(3, Heartbeat(2));  // a crashed node does not send
  network.RunUntil(20);
  CHECK(log.empty());
  CHECK(network.crashed(2));
  // In flight across a restart: lost as well.
  network.Endpoint(1)->Send(2, Heartbeat(3));
  network.Restart(2);
  network.RunUntil(40);
  CHECK(log.empty());
  network.Endpoint(1)->Send(2, Heartbeat(4));
  network.RunUntil(60);
  REQUIRE(log.size() == 1);
  CHECK(log[0].heartbeat == 4);
}

TEST_CASE("sim network: timers fire in (time, insertion) order", "[sim]") {
  SimNetwork network(SimNetworkOptions{});
  std::vector<int> fired;
  network.After(10, [&] { fired.push_back(1); });
  network.After(5, [&] { fired.push_back(2); });
  network.After(10, [&] { fired.push_back(3); });
  network.RunUntil(10);
  CHECK(fired == std::vector<int>{2, 1, 3});
  CHECK(network.now_ms() == 10);
  CHECK(network.counters().timers_fired == 3);
}

uint64_t Trace(uint64_t seed) {
  SimNetworkOptions options;
  options.seed = seed;
  options.delay_max_ms = 30;
  options.drop_per_million = 100000;
  options.duplicate_per_million = 100000;
  SimNetwork network(options);
  std::vector<Received> log;
  Record(&network, 3, &log);
  // Every delivery triggers a reply until a bound: the trace depends on every random choice.
  for (NodeId node = 1; node <= 3; ++node) {
    network.Endpoint(node)->SetReceiver([&network, node](NodeId from, wire::Envelope e) {
      if (e.heartbeat().sent_ms() < 200) {
        network.Endpoint(node)->Send(from, Heartbeat(e.heartbeat().sent_ms() + 1));
      }
    });
  }
  for (uint64_t i = 0; i < 20; ++i) network.Endpoint(1 + i % 3)->Send(1 + (i + 1) % 3,
                                                                     Heartbeat(i));
  network.RunUntilQuiet(100000);
  return network.trace_hash();
}

TEST_CASE("sim network: the message singled out is lost, delayed or delivered again late",
          "[sim]") {
  struct Case {
    const char* name;
    bool drop;
    uint64_t delay_ms;
    uint64_t duplicate_ms;
    std::vector<uint64_t> want_values;  // the heartbeats delivered to node 2, in order
    std::vector<uint64_t> want_at_ms;   // and when
    const char* done;
  };
  const std::vector<Case> cases = {
      {"drop", true, 0, 0, {1, 3}, {10, 10}, "lost"},
      {"delay", false, 500, 0, {1, 3, 2}, {10, 10, 510}, "delayed 500 ms"},
      {"duplicate", false, 0, 700, {1, 2, 3, 2}, {10, 10, 10, 710},
       "delivered again 700 ms later"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      SimNetworkOptions options;
      options.delay_min_ms = options.delay_max_ms = 10;
      MessagePerturbation perturbation;
      perturbation.send = 2;
      perturbation.drop = c.drop;
      perturbation.delay_ms = c.delay_ms;
      perturbation.duplicate_ms = c.duplicate_ms;
      options.perturbations = {perturbation};
      options.record_send_kinds = true;
      SimNetwork network(options);
      std::vector<Received> log;
      Record(&network, 2, &log);
      for (uint64_t value : {1, 2, 3}) network.Endpoint(1)->Send(2, Heartbeat(value));
      CHECK(network.perturbed() ==
            std::string("message 2 (heartbeat, group  view 0) n1->n2 sent at t=0ms: ") + c.done);
      CHECK(network.perturbed_kind() == "heartbeat");
      CHECK(network.send_kinds() ==
            std::vector<uint8_t>(3, wire::Envelope::kHeartbeat));
      network.RunUntil(2000);
      std::vector<uint64_t> values, at_ms;
      for (const Received& r : log) {
        values.push_back(r.heartbeat);
        at_ms.push_back(r.at_ms);
      }
      CHECK(values == c.want_values);
      CHECK(at_ms == c.want_at_ms);
    }
  }
}

TEST_CASE("sim network: the sender of the message singled out crashes right after it, if the "
          "hook agrees", "[sim]") {
  for (bool agree : {true, false}) {
    SECTION(agree ? "crashes" : "forbidden") {
      SimNetworkOptions options;
      options.delay_min_ms = options.delay_max_ms = 10;
      MessagePerturbation perturbation;
      perturbation.send = 2;
      perturbation.crash = true;
      perturbation.restart_ms = 77;
      options.perturbations = {perturbation};
      SimNetwork network(options);
      std::vector<NodeId> asked;
      network.SetPerturbHook([&asked, agree](NodeId sender, uint64_t restart_ms) {
        asked.push_back(sender);
        CHECK(restart_ms == 77);
        return agree;
      });
      std::vector<Received> log;
      Record(&network, 3, &log);
      for (uint64_t value : {1, 2, 3}) network.Endpoint(1)->Send(2, Heartbeat(value));
      network.Endpoint(3)->Send(1, Heartbeat(4));
      CHECK(asked == std::vector<NodeId>{1});
      CHECK(network.perturb_crashes() == (agree ? 1u : 0u));
      CHECK(network.crashed(1) == agree);
      network.RunUntil(100);
      std::vector<uint64_t> values;
      for (const Received& r : log) values.push_back(r.heartbeat);
      // The message itself goes out; what the sender sends after it, and what is sent to it,
      // is lost once it crashed.
      CHECK(values == (agree ? std::vector<uint64_t>{1, 2} : std::vector<uint64_t>{1, 2, 3, 4}));
    }
  }
}

TEST_CASE("sim network: same seed, same trace; another seed, another trace", "[sim]") {
  CHECK(Trace(11) == Trace(11));
  CHECK(Trace(11) != Trace(12));
}

}  // namespace
}  // namespace cohort::nso
