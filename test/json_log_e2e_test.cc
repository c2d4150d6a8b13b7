// log_format json on real daemons: everything a daemon writes, its log and its ready line, is
// one JSON object per line, also the messages that quote group names and errors.
#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "invocation/client.h"
#include "test/cluster.h"
#include "test/ops_test_util.h"

namespace cohort {

TEST_CASE("log_format json: every line a daemon writes is a JSON object", "[e2e][logging]") {
  test::Cluster cluster({3, "groups:\n  - {name: g, members: [n1, n2, n3]}\n",
                         "log_format: json\n", "info"});
  REQUIRE(cluster.Start());
  // Lines that quote names: a client's unknown group, a daemon that leaves its groups as it
  // stops (drain), the others' suspicion and exclusion of it.
  auto client = Client::Connect(cluster.ClientAddress(1));
  REQUIRE(client.ok());
  CHECK((*client)->Invoke("no \"such\" group", "m", "", invocation::Mode::kAll).status().code() ==
        absl::StatusCode::kNotFound);
  {
    // A reload of a broken file: refused, named, and the daemon serves on.
    std::ofstream config(cluster.ConfigPath(1), std::ios::app);
    config << "bogus_key: 1\n";
  }
  cluster.Signal(1, SIGHUP);
  REQUIRE(test::Eventually([&] {
    return absl::StrContains(test::ReadText(cluster.LogPath(1)), "bogus_key");
  }, 10));
  cluster.Stop(3);
  REQUIRE(test::Eventually([&] {
    auto view = (*client)->GroupDetails("g");
    return view.ok() && view->members.size() == 2;
  }, 20));
  size_t lines = 0, quoting = 0;
  for (int i = 1; i <= 3; ++i) {
    for (absl::string_view line : absl::StrSplit(test::ReadText(cluster.LogPath(i)), '\n',
                                                 absl::SkipEmpty())) {
      INFO("n" << i << ": " << line);
      google::protobuf::Struct object;
      CHECK(google::protobuf::util::JsonStringToMessage(std::string(line), &object).ok());
      CHECK(object.fields().count("msg") == 1);
      ++lines;
      if (absl::StrContains(line, "\\\"")) ++quoting;
    }
  }
  INFO(lines << " lines, " << quoting << " quoting");
  CHECK(quoting > 0);
  CHECK_THAT(test::ReadText(cluster.LogPath(1)),
             Catch::Contains("\"component\":\"daemon\",\"msg\":\"cohortd n1 ready: peers on "));
}

}  // namespace cohort
