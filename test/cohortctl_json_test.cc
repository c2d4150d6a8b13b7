// cohortctl with typed payloads (issue 8: "invoke or multicast from the shell, payload as text or
// JSON for typed stubs"): three real daemons with the typed CounterServant of
// examples/counter.proto (as in typed_stub_test), and cohortctl run as a subprocess with the
// FileDescriptorSet made by protoc (//test:counter_protoset): the request is JSON, the replies
// are printed as JSON.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "examples/counter.cohort.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "invocation/typed.h"
#include "test/cluster.h"
#include "test/typed_counter_fixture.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;
using examples::AddRequest;
using examples::CounterGroup;
using examples::GetRequest;
using examples::Value;

struct Fixture : test::TypedCounterFixture {
  void Start() { TypedCounterFixture::Start(1); }
};


// cohortctl against daemon 2 with the counter's descriptor set.
std::string Ctl(const Fixture& fixture) {
  return test::Runfile("tools/cohortctl") + " --address " + fixture.cluster.ClientAddress(2) +
         " --timeout-ms 10000 --descriptor-set " + test::Runfile("test/counter.protoset") + " ";
}

}  // namespace

TEST_CASE("cohortctl invoke: JSON request built from a descriptor set, JSON replies",
          "[ops][e2e][typed]") {
  Fixture fixture;
  fixture.Start();
  const std::string ctl = Ctl(fixture);
  const std::string typed =
      " --json-type cohort.examples.AddRequest --reply-type cohort.examples.Value";
  std::string out;

  REQUIRE(test::RunCapture(ctl + "invoke counter Add '{\"delta\": 5}' --mode all" + typed, &out) ==
          0);
  INFO(out);
  CHECK_THAT(out, Contains("3 of 3 wanted replies"));
  for (const char* member : {"n1", "n2", "n3"}) {
    CHECK_THAT(out, Contains(std::string(member) + ": {\"value\":\"5\"}"));
  }

  // Replicas got a real AddRequest: the in-process typed stub sees the same state.
  CounterGroup counter(fixture.client.get(), "counter");
  auto all = counter.Get(GetRequest(), Mode::kAll, absl::Seconds(10));
  REQUIRE(all.ok());
  REQUIRE(all->replies.size() == 3);
  for (const auto& item : all->replies) CHECK(item.response.value() == 5);

  // Get with an empty JSON object; a zero field would be printed too (always_print_primitive).
  REQUIRE(test::RunCapture(ctl + "invoke counter Get '{}' --mode first --json-type "
                                 "cohort.examples.GetRequest --reply-type cohort.examples.Value",
                           &out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains(": {\"value\":\"5\"}"));

  // One-way with a JSON payload, then the servants' typed error reaches the shell.
  REQUIRE(test::RunCapture(ctl + "invoke counter Add '{\"delta\": \"2\"}' --mode one_way" + typed,
                           &out) == 0);
  CHECK_THAT(out, Contains("sent (one-way)"));
  REQUIRE(test::RunCapture(ctl + "invoke counter Add '{\"delta\": -1}' --mode majority" + typed,
                           &out) == 0);
  INFO(out);
  CHECK_THAT(out, Contains("error INVALID_ARGUMENT: Add: delta must not be negative"));
  REQUIRE(test::RunCapture(ctl + "invoke counter Add '{\"delta\": 3}' --mode all" + typed, &out) ==
          0);
  INFO(out);
  CHECK_THAT(out, Contains(": {\"value\":\"10\"}"));  // 5 + 2 (one-way) + 3
}

TEST_CASE("cohortctl typed payload flags: bad JSON, unknown types and missing files exit 2",
          "[ops][typed]") {
  // No daemon needed: the payload is checked before connecting.
  const std::string ctl = test::Runfile("tools/cohortctl") + " --address 127.0.0.1:1 ";
  const std::string set = " --descriptor-set " + test::Runfile("test/counter.protoset");
  std::string out;
  CHECK(test::RunCapture(ctl + "invoke counter Add '{\"delta\": \"five\"}'" + set +
                             " --json-type cohort.examples.AddRequest",
                         &out) == 2);
  CHECK_THAT(out, Contains("PAYLOAD is not JSON for cohort.examples.AddRequest"));
  CHECK(test::RunCapture(ctl + "invoke counter Add '{\"delt\": 1}'" + set +
                             " --json-type cohort.examples.AddRequest",
                         &out) == 2);
  CHECK(test::RunCapture(ctl + "invoke counter Add '{}'" + set + " --json-type AddRequest", &out) ==
        2);
  CHECK_THAT(out, Contains("no message AddRequest"));
  CHECK(test::RunCapture(ctl + "invoke counter Add '{}' --json-type cohort.examples.AddRequest",
                         &out) == 2);
  CHECK_THAT(out, Contains("need --descriptor-set"));
  CHECK(test::RunCapture(ctl + "invoke counter Add '{}' --descriptor-set /nonexistent.protoset "
                               "--json-type cohort.examples.AddRequest",
                         &out) == 2);
  CHECK_THAT(out, Contains("cannot read /nonexistent.protoset"));
  CHECK(test::RunCapture(ctl + "multicast counter '[1]'" + set +
                             " --json-type cohort.examples.AddRequest",
                         &out) == 2);
  CHECK(test::RunCapture(ctl + "--help", &out) == 0);
  CHECK_THAT(out, Contains("--json-type MESSAGE"));
}

}  // namespace cohort
