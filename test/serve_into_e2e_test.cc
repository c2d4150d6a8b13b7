// The stub library's calls into kept memory (issue 7: no allocation per call in the client and
// its servants either): Client::InvokeInto fills a GroupReplies the caller keeps, and a method
// served with Servant::ServeInto writes its reply into memory its servant keeps. Against three
// real daemons, servants on the local fast path and over gRPC, a client on each path: replies,
// a handler's error, a reply over the daemons' limit, one-way calls, an unknown group, a reply
// count that changes between calls, and both kinds of method on one servant. The allocations
// saved are counted by daemon_allocations_e2e_test and cohort-bench.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "test/cluster.h"
#include "test/counter_replica.h"
#include "test/ops_test_util.h"

namespace cohort {
namespace {

constexpr char kGroups[] = R"(groups:
  - name: g
    members: [n1, n2, n3]
    ordering: consensus
)";
// The daemons' payload limit, so that a reply over it is cheap to make.
constexpr char kLimits[] = "limits:\n  max_payload_bytes: 1024\n";

// A servant answering through ServeInto ("echo", "fail", "big", "note") and Serve ("plain").
struct IntoServant {
  std::unique_ptr<Servant> servant;
  std::atomic<int> notes{0};
  ~IntoServant() { servant.reset(); }  // its handlers use `notes`

  absl::Status Start(const std::string& address, const std::string& name, bool local) {
    ConnectOptions options;
    options.client_name = name;
    options.local = local;
    auto created = Servant::Create(address, "g", options);
    if (!created.ok()) return created.status();
    servant = *std::move(created);
    servant->ServeInto("echo", [name](const std::string& payload, std::string* reply) {
      if (!reply->empty()) return absl::InternalError("the reply memory was not emptied");
      absl::StrAppend(reply, payload, "@", name);
      return absl::OkStatus();
    });
    servant->ServeInto("fail", [name](const std::string& payload, std::string* reply) {
      reply->assign("written before the error, not sent");
      return absl::InvalidArgumentError(absl::StrCat("bad ", payload, " at ", name));
    });
    servant->ServeInto("big", [](const std::string&, std::string* reply) {
      reply->assign(2000, 'b');  // over the daemons' 1024
      return absl::OkStatus();
    });
    servant->ServeInto("note", [this](const std::string&, std::string* reply) {
      ++notes;
      reply->assign("one-way: not sent");
      return absl::OkStatus();
    });
    servant->Serve("plain", [name](const std::string& payload) -> absl::StatusOr<std::string> {
      return absl::StrCat("plain ", payload, "@", name);
    });
    return servant->Start();
  }
};

std::set<std::string> Payloads(const GroupReplies& replies) {
  std::set<std::string> payloads;
  for (const Reply& reply : replies.replies) payloads.insert(reply.payload);
  return payloads;
}

}  // namespace

TEST_CASE("InvokeInto and ServeInto: kept memory, the same answers as Invoke and Serve", "[e2e]") {
  test::Cluster cluster{{3, kGroups, kLimits, "warn"}};
  REQUIRE(cluster.Start());
  // n2's servant over gRPC, the others on the local fast path.
  std::vector<std::unique_ptr<IntoServant>> servants;
  for (int i = 1; i <= 3; ++i) {
    servants.push_back(std::make_unique<IntoServant>());
    REQUIRE(servants.back()->Start(cluster.ClientAddress(i), absl::StrCat("n", i), i != 2).ok());
  }
  CHECK(std::string(servants[0]->servant->via()) == "local");
  CHECK(std::string(servants[1]->servant->via()) == "grpc");

  const bool local = GENERATE(true, false);
  INFO((local ? "client on the local fast path" : "client over gRPC"));
  ConnectOptions options;
  options.client_name = "into-client";
  options.local = local;
  auto client = Client::Connect(cluster.ClientAddress(1), options);
  REQUIRE(client.ok());
  CHECK(std::string((*client)->via()) == (local ? "local" : "grpc"));
  REQUIRE(test::WaitHealthy(client->get(), "g"));

  GroupReplies replies;  // one, reused by every call below
  const std::string payload(100, 'p');
  const std::set<std::string> echoed = {payload + "@n1", payload + "@n2", payload + "@n3"};
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    REQUIRE((*client)->InvokeInto("g", "echo", payload, Mode::kAll, &replies, absl::Seconds(10))
                .ok());
    CHECK(replies.wanted == 3);
    CHECK(replies.view_id >= 1);
    REQUIRE(replies.replies.size() == 3);
    for (const Reply& reply : replies.replies) CHECK(reply.status.ok());
    CHECK(Payloads(replies) == echoed);
    std::set<std::string> members;
    for (const Reply& reply : replies.replies) members.insert(reply.member);
    CHECK(members == std::set<std::string>{"n1", "n2", "n3"});

    // Fewer replies wanted: the caller's vector shrinks, then grows back in the next round.
    REQUIRE((*client)->InvokeInto("g", "echo", "q", Mode::kFirst, &replies, absl::Seconds(10))
                .ok());
    CHECK(replies.wanted == 1);
    REQUIRE(replies.replies.size() >= 1);
    CHECK(replies.replies[0].payload == "q@" + replies.replies[0].member);
  }

  // A handler's error is each reply's status; what it wrote is not sent.
  REQUIRE((*client)->InvokeInto("g", "fail", "x", Mode::kAll, &replies, absl::Seconds(10)).ok());
  REQUIRE(replies.replies.size() == 3);
  for (const Reply& reply : replies.replies) {
    CHECK(reply.status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(reply.status.message() == absl::StrCat("bad x at ", reply.member));
    CHECK(reply.payload.empty());
  }

  // A reply over the daemons' limit becomes the error the daemon would send, naming the limit.
  REQUIRE((*client)->InvokeInto("g", "big", "", Mode::kAll, &replies, absl::Seconds(10)).ok());
  REQUIRE(replies.replies.size() == 3);
  for (const Reply& reply : replies.replies) {
    CHECK(reply.status.code() == absl::StatusCode::kResourceExhausted);
    CHECK(std::string(reply.status.message()).find("max_payload_bytes") != std::string::npos);
  }

  // One-way: every servant runs it, none answers (a later call is ordered after it).
  const int notes_before = servants[0]->notes.load();
  REQUIRE((*client)->InvokeInto("g", "note", "", Mode::kOneWay, &replies, absl::Seconds(10)).ok());
  CHECK(replies.replies.empty());
  REQUIRE((*client)->InvokeInto("g", "echo", "after", Mode::kAll, &replies, absl::Seconds(10))
              .ok());
  for (const auto& servant : servants) CHECK(servant->notes.load() == notes_before + 1);

  // An unknown group: NOT_FOUND naming it, and no replies left from the last call.
  absl::Status unknown =
      (*client)->InvokeInto("nope", "echo", "x", Mode::kAll, &replies, absl::Seconds(10));
  CHECK(unknown.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(unknown.message()).find("nope") != std::string::npos);
  CHECK(replies.replies.empty());

  // A method served by value on the same servant; then ServeInto's again, into the same memory.
  REQUIRE((*client)->InvokeInto("g", "plain", "v", Mode::kAll, &replies, absl::Seconds(10)).ok());
  CHECK(Payloads(replies) == std::set<std::string>{"plain v@n1", "plain v@n2", "plain v@n3"});
  REQUIRE((*client)->InvokeInto("g", "echo", payload, Mode::kAll, &replies, absl::Seconds(10))
              .ok());
  CHECK(Payloads(replies) == echoed);
  // And Invoke gets the same answers as InvokeInto.
  auto by_value = (*client)->Invoke("g", "echo", payload, Mode::kAll, absl::Seconds(10));
  REQUIRE(by_value.ok());
  CHECK(Payloads(*by_value) == echoed);
}

}  // namespace cohort
