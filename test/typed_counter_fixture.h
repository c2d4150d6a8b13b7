// Test helper shared by the typed-stub tests: three real daemons, each with the typed
// CounterServant of examples/counter.proto, and a client attached to one of them.
#ifndef COHORT_TEST_TYPED_COUNTER_FIXTURE_H_
#define COHORT_TEST_TYPED_COUNTER_FIXTURE_H_

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "examples/counter.cohort.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"

namespace cohort::test {

inline constexpr char kTypedCounterGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
)";

// The typed replica: deliveries arrive one at a time in total order, so no lock is needed.
class TypedCounterReplica : public examples::CounterServant {
 public:
  absl::StatusOr<examples::Value> Add(const examples::AddRequest& request) override {
    if (request.delta() < 0) return absl::InvalidArgumentError("Add: delta must not be negative");
    value_ += request.delta();
    return Current();
  }
  absl::StatusOr<examples::Value> Get(const examples::GetRequest&) override { return Current(); }

 private:
  examples::Value Current() const {
    examples::Value value;
    value.set_value(value_);
    return value;
  }
  int64_t value_ = 0;
};

// Ready when every member answers a Get (which changes nothing): a member that is merely not
// suspected yet may not have been heard from, and the daemon fails fast until it has.
inline bool WaitTypedCounterReady(Client* client) {
  examples::CounterGroup probe(client, "counter");
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto replies = probe.Get(examples::GetRequest(), Mode::kAll, absl::Seconds(2));
    if (replies.ok() && replies->replies.size() == 3) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Declared so that the servants (which call into the replicas) stop before the replicas go.
struct TypedCounterFixture {
  Cluster cluster{{3, kTypedCounterGroups, "", "warn"}};
  std::vector<std::unique_ptr<TypedCounterReplica>> replicas;
  std::vector<std::unique_ptr<Servant>> servants;
  std::unique_ptr<Client> client;

  // Starts the daemons and replicas; the client attaches to daemon `client_node`.
  void Start(int client_node) {
    REQUIRE(cluster.Start());
    for (int i = 1; i <= 3; ++i) {
      auto servant = Servant::Create(cluster.ClientAddress(i), "counter");
      REQUIRE(servant.ok());
      replicas.push_back(std::make_unique<TypedCounterReplica>());
      replicas.back()->RegisterWith(servant->get());
      REQUIRE((*servant)->Start().ok());
      servants.push_back(std::move(*servant));
    }
    auto connected = Client::Connect(cluster.ClientAddress(client_node), "typed-client");
    REQUIRE(connected.ok());
    client = std::move(*connected);
    REQUIRE(WaitTypedCounterReady(client.get()));
  }
};

}  // namespace cohort::test

#endif  // COHORT_TEST_TYPED_COUNTER_FIXTURE_H_
