// The local fast path (issue 7, nso/local_api.h): clients and servants on the daemon's host carry
// their calls over the daemon's Unix socket; the same calls over gRPC give the same answers; a
// peer that speaks nonsense on the socket gets an error naming what is wrong and the daemon
// carries on; listen.local: off and a socket file path; tokens are checked on the socket too.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "invocation/client.h"
#include "invocation/local_link.h"
#include "invocation/servant.h"
#include "nso/framing.h"
#include "nso/unix_address.h"
#include "proto/api.pb.h"
#include "test/cluster.h"
#include "test/counter_replica.h"

namespace cohort {
namespace {

using Catch::Matchers::Contains;

constexpr char kGroups[] = R"(groups:
  - name: counter
    members: [n1, n2, n3]
    ordering: consensus
)";

void StartCounters(test::Cluster* cluster,
                   std::vector<std::unique_ptr<test::CounterReplica>>* replicas) {
  REQUIRE(cluster->Start());
  for (int i = 1; i <= cluster->size(); ++i) {
    replicas->push_back(std::make_unique<test::CounterReplica>());
    REQUIRE(replicas->back()->Start(cluster->ClientAddress(i), "counter").ok());
  }
}

// A raw connection to the daemon's socket, to speak to it byte by byte.
class RawSocket {
 public:
  explicit RawSocket(const std::string& address) {
    REQUIRE(address.rfind("unix:", 0) == 0);
    std::string name = address.substr(5);
    sockaddr_un where{};
    socklen_t length = 0;
    REQUIRE(nso::UnixAddress(name, &where, &length));
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&where), length) == 0);
    timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawSocket() { close(fd_); }
  void SendBytes(const std::string& bytes) {
    REQUIRE(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
  void Send(const api::LocalFrame& frame) {
    std::string bytes;
    nso::AppendFrame(frame, &bytes);
    SendBytes(bytes);
  }
  // The next frame; false when the daemon closed the connection (or 10 s passed).
  bool Receive(api::LocalFrame* frame) {
    while (true) {
      if (in_.size() >= 4) {
        uint32_t length = nso::GetFrameLength(in_.data());
        if (in_.size() >= 4 + length) {
          bool ok = frame->ParseFromArray(in_.data() + 4, static_cast<int>(length));
          in_.erase(0, 4 + length);
          return ok;
        }
      }
      char buffer[4096];
      ssize_t got = read(fd_, buffer, sizeof(buffer));
      if (got <= 0) return false;
      in_.append(buffer, static_cast<size_t>(got));
    }
  }
  // The daemon's error frame, then the end of the connection.
  std::string ErrorThenClose() {
    api::LocalFrame frame;
    if (!Receive(&frame)) return "(no error frame)";
    std::string error = frame.has_error() ? frame.error() : "(not an error frame)";
    api::LocalFrame more;
    if (Receive(&more)) return "(not closed after the error)";
    return error;
  }

 private:
  int fd_ = -1;
  std::string in_;
};

api::LocalFrame Hello(uint64_t key) {
  api::LocalFrame frame;
  frame.mutable_hello()->set_version(1);
  frame.mutable_hello()->set_key(key);
  return frame;
}

}  // namespace

TEST_CASE("local fast path: clients and servants use the daemon's socket; gRPC agrees",
          "[e2e][local]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  for (const auto& replica : replicas) CHECK(std::string(replica->servant->via()) == "local");

  auto local = Client::Connect(cluster.ClientAddress(1), "local-client");
  REQUIRE(local.ok());
  CHECK(std::string((*local)->via()) == "local");
  CHECK_THAT((*local)->local_endpoint().address, Contains("unix:@cohortd-n1-"));
  ConnectOptions grpc_only;
  grpc_only.local = false;
  auto remote = Client::Connect(cluster.ClientAddress(2), grpc_only);
  REQUIRE(remote.ok());
  CHECK(std::string((*remote)->via()) == "grpc");
  REQUIRE(test::WaitHealthy(local->get(), "counter"));

  // Both kinds of caller at once, many calls in flight on each: one total order, every reply of
  // every replica, each value seen once.
  constexpr int kThreads = 4;
  constexpr int kCalls = 50;
  std::atomic<int> failures{0};
  absl::Mutex mu;
  std::map<std::string, std::multiset<std::string>> values;
  std::vector<std::thread> callers;
  for (int t = 0; t < 2 * kThreads; ++t) {
    Client* client = t % 2 == 0 ? local->get() : remote->get();
    callers.emplace_back([&, client] {
      for (int i = 0; i < kCalls; ++i) {
        auto result = client->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
        if (!result.ok() || result->replies.size() != 3) {
          failures++;
          continue;
        }
        absl::MutexLock lock(&mu);
        for (const Reply& reply : result->replies) values[reply.member].insert(reply.payload);
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  REQUIRE(failures.load() == 0);
  std::multiset<std::string> expected;
  for (int v = 1; v <= 2 * kThreads * kCalls; ++v) expected.insert(std::to_string(v));
  REQUIRE(values.size() == 3);
  for (const auto& [member, seen] : values) {
    INFO("member " << member);
    CHECK(seen == expected);
  }

  // Errors come back the same way on both paths.
  for (Client* client : {local->get(), remote->get()}) {
    INFO("via " << client->via());
    auto unknown = client->Invoke("nosuchgroup", "get", "", Mode::kAll);
    CHECK(unknown.status().code() == absl::StatusCode::kNotFound);
    auto method = client->Invoke("counter", "nosuchmethod", "", Mode::kAll);
    REQUIRE(method.ok());  // the mode is met; each replica's servant answered UNIMPLEMENTED
    for (const Reply& reply : method->replies) {
      CHECK(reply.status.code() == absl::StatusCode::kUnimplemented);
    }
    CHECK(client->Send("counter", "add", "0").ok());
  }
  // A large call (over the stream limit) goes as a unary gRPC call and works too.
  std::string big(2 << 20, 'x');
  auto large = (*local)->Invoke("counter", "get", big, Mode::kFirst, absl::Seconds(10));
  CHECK(large.ok());
  replicas.clear();
}

TEST_CASE("local fast path: nonsense on the socket gets an error naming it; the daemon carries on",
          "[e2e][local]") {
  test::Cluster cluster{{3, kGroups, "", "warn"}};
  std::vector<std::unique_ptr<test::CounterReplica>> replicas;
  StartCounters(&cluster, &replicas);
  auto client = Client::Connect(cluster.ClientAddress(1), "good");
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == "local");
  const internal::LocalEndpoint endpoint = (*client)->local_endpoint();
  // One full view first: the orphaned wait-for-all calls below must find every member.
  REQUIRE(test::WaitAllReply(client->get(), "counter", 3));

  {  // the wrong key: a client that did not attach to this daemon
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key + 1));
    CHECK_THAT(raw.ErrorThenClose(), Contains("wrong key"));
  }
  {  // a call before the hello
    RawSocket raw(endpoint.address);
    api::LocalFrame call;
    call.mutable_call()->set_call(1);
    raw.Send(call);
    CHECK_THAT(raw.ErrorThenClose(), Contains("the first frame must be a hello"));
  }
  {  // bytes that are not a LocalFrame
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key));
    api::LocalFrame answer;
    REQUIRE(raw.Receive(&answer));
    CHECK(answer.has_hello());
    std::string garbage;
    nso::PutFrameLength(6, &garbage);
    garbage += "\xff\xff\xff\xff\xff\xff";
    raw.SendBytes(garbage);
    CHECK_THAT(raw.ErrorThenClose(), Contains("undecodable frame"));
  }
  {  // a length over the limit
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key));
    api::LocalFrame answer;
    REQUIRE(raw.Receive(&answer));
    std::string huge;
    nso::PutFrameLength(0x7fffffff, &huge);
    raw.SendBytes(huge);
    CHECK_THAT(raw.ErrorThenClose(), Contains("over the limit"));
  }
  {  // a servant message on a call connection, and an answer before any register
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key));
    api::LocalFrame answer;
    REQUIRE(raw.Receive(&answer));
    api::LocalFrame stray;
    stray.mutable_servant()->mutable_answer()->set_delivery(7);
    raw.Send(stray);
    CHECK_THAT(raw.ErrorThenClose(), Contains("an answer before the register"));
  }
  {  // a servant registering for a group the daemon does not know
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key));
    api::LocalFrame answer;
    REQUIRE(raw.Receive(&answer));
    api::LocalFrame reg;
    reg.mutable_servant()->mutable_register_()->set_nso((*client)->nso());
    reg.mutable_servant()->mutable_register_()->set_group("nosuchgroup");
    raw.Send(reg);
    CHECK_THAT(raw.ErrorThenClose(), Contains("nosuchgroup"));
  }
  {  // a client that goes away with calls in flight
    RawSocket raw(endpoint.address);
    raw.Send(Hello(endpoint.key));
    api::LocalFrame answer;
    REQUIRE(raw.Receive(&answer));
    for (int i = 1; i <= 20; ++i) {
      api::LocalFrame call;
      call.mutable_call()->set_call(i);
      api::InvokeRequest* invoke = call.mutable_call()->mutable_invoke();
      invoke->set_nso((*client)->nso());
      invoke->set_group("counter");
      invoke->set_method("add");
      invoke->set_payload("1");
      invoke->set_mode(api::WAIT_ALL);
      raw.Send(call);
    }
  }
  // The daemon lost nothing: the good client still calls, and all 20 orphaned adds were applied
  // exactly once at every replica (the next add sees 21).
  REQUIRE(test::WaitHealthy(client->get(), "counter"));
  auto after = (*client)->Invoke("counter", "add", "1", Mode::kAll, absl::Seconds(10));
  INFO((after.ok() ? std::string("ok") : after.status().ToString()));
  REQUIRE(after.ok());
  REQUIRE(after->replies.size() == 3);
  for (const Reply& reply : after->replies) CHECK(reply.payload == "21");
  replicas.clear();
}

TEST_CASE("local fast path: off, or a socket file that is removed at shutdown", "[e2e][local]") {
  SECTION("listen.local: off: everything goes over gRPC") {
    test::ClusterOptions options{1, "groups:\n  - {name: counter, members: [n1]}\n", "", "warn"};
    options.listen_local = "off";
    test::Cluster cluster(options);
    std::vector<std::unique_ptr<test::CounterReplica>> replicas;
    StartCounters(&cluster, &replicas);
    CHECK(std::string(replicas[0]->servant->via()) == "grpc");
    auto client = Client::Connect(cluster.ClientAddress(1), "c");
    REQUIRE(client.ok());
    CHECK(std::string((*client)->via()) == "grpc");
    auto result = (*client)->Invoke("counter", "add", "2", Mode::kAll);
    REQUIRE(result.ok());
    CHECK(result->replies.at(0).payload == "2");
    replicas.clear();
  }
  SECTION("listen.local: a path") {
    char dir_template[] = "/tmp/cohort-local-XXXXXX";
    REQUIRE(mkdtemp(dir_template) != nullptr);
    const std::string path = std::string(dir_template) + "/n1.sock";
    {
      test::ClusterOptions options{1, "groups:\n  - {name: counter, members: [n1]}\n", "", "warn"};
      options.listen_local = path;
      test::Cluster cluster(options);
      std::vector<std::unique_ptr<test::CounterReplica>> replicas;
      StartCounters(&cluster, &replicas);
      struct stat info {};
      REQUIRE(lstat(path.c_str(), &info) == 0);
      CHECK(S_ISSOCK(info.st_mode));
      auto client = Client::Connect(cluster.ClientAddress(1), "c");
      REQUIRE(client.ok());
      CHECK((*client)->local_endpoint().address == "unix:" + path);
      auto result = (*client)->Invoke("counter", "add", "3", Mode::kAll);
      REQUIRE(result.ok());
      CHECK(result->replies.at(0).payload == "3");
      replicas.clear();
      cluster.Stop(1);  // SIGTERM: a graceful shutdown removes the socket file
      struct stat gone {};
      CHECK(lstat(path.c_str(), &gone) != 0);
    }
    rmdir(dir_template);
  }
}

TEST_CASE("local fast path: tokens are checked on the socket, per call", "[e2e][local][security]") {
  const std::string auth = "auth:\n  tokens:\n    - {name: app1, token: token-one}\n";
  test::Cluster cluster({1, "groups:\n  - {name: counter, members: [n1]}\n", auth, "warn"});
  REQUIRE(cluster.Start());
  ConnectOptions app1;
  app1.token = "token-one";
  {
    auto servant = Servant::Create(cluster.ClientAddress(1), "counter", app1);
    REQUIRE(servant.ok());
    CHECK(std::string((*servant)->via()) == "local");
  }
  auto client = Client::Connect(cluster.ClientAddress(1), app1);
  REQUIRE(client.ok());
  REQUIRE(std::string((*client)->via()) == "local");
  internal::LocalEndpoint endpoint = (*client)->local_endpoint();
  endpoint.token = "token-three";
  auto refused = internal::LocalLink::Open(endpoint, absl::Seconds(5));
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Contains("unknown bearer token"));
  endpoint.token = "";
  refused = internal::LocalLink::Open(endpoint, absl::Seconds(5));
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Contains("requires a bearer token"));
  endpoint.token = "token-one";
  CHECK(internal::LocalLink::Open(endpoint, absl::Seconds(5)).ok());
}

}  // namespace cohort
