// The seal that carries an application's certified name to the local fast path
// (nso/identity_seal.h): it opens only unchanged and only in the daemon that made it.
#include <catch2/catch.hpp>

#include <string>

#include "nso/identity_seal.h"

namespace cohort::nso {
namespace {

TEST_CASE("a seal opens to its name, and only in the daemon that made it", "[security]") {
  IdentitySeal daemon;
  std::string sealed = daemon.Seal("app1");
  REQUIRE(daemon.Open(sealed).ok());
  CHECK(*daemon.Open(sealed) == "app1");
  CHECK(daemon.Open(daemon.Seal("")).value() == "");  // an anonymous caller stays anonymous

  // Another name with the same tag, a changed tag, a truncated seal: refused.
  std::string renamed = "app2" + sealed.substr(4);
  CHECK(daemon.Open(renamed).status().code() == absl::StatusCode::kPermissionDenied);
  std::string flipped = sealed;
  flipped.back() = static_cast<char>(flipped.back() ^ 1);
  CHECK(daemon.Open(flipped).status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(daemon.Open("app1").status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(daemon.Open("").status().code() == absl::StatusCode::kPermissionDenied);

  // Another daemon (or this one after a restart) has another key.
  IdentitySeal other;
  CHECK(other.Open(sealed).status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(other.Open(sealed).status().message()),
             Catch::Matchers::Contains("attach to it over gRPC first"));
}

}  // namespace
}  // namespace cohort::nso
