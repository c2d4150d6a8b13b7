// RevocationStore (nso/revocation.h): the check the gRPC ports make of every new connection's
// certificate chain against the newest CRLs (tls.crl_dir): revoked, another CA's, the host.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "nso/revocation.h"
#include "test/tls_test_util.h"

namespace cohort::nso {
namespace {

using Catch::Matchers::Contains;
using test::ReadText;

// The CRL files of a hashed directory made by tools/make-test-ca (crl/ or crl-none/).
std::string CrlsOf(const std::string& dir) {
  std::string crls;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) crls += ReadText(entry.path());
  return crls;
}

TEST_CASE("revocation store: a revoked certificate is refused, the CA's others pass; another CA's "
          "fails; the dialer's host is checked",
          "[tls]") {
  const std::string ca = test::MakeCa();
  auto store = RevocationStore::Create("tls.ca_file", ReadText(ca + "/ca.pem"), CrlsOf(ca + "/crl"));
  REQUIRE(store.ok());
  CHECK((*store)->Check(ReadText(ca + "/daemon.pem"), "").ok());
  CHECK((*store)->Check(ReadText(ca + "/app1.pem"), "").ok());
  absl::Status revoked = (*store)->Check(ReadText(ca + "/revoked.pem"), "");
  CHECK(revoked.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(revoked.message()), Contains("revoked"));
  absl::Status rogue = (*store)->Check(ReadText(ca + "/rogue.pem"), "");
  CHECK(rogue.code() == absl::StatusCode::kUnauthenticated);
  CHECK_THAT(std::string(rogue.message()), Contains("refused"));

  // Hosts: the daemon certificate is for 127.0.0.1, localhost and cohort.
  for (const char* host : {"127.0.0.1:7101", "127.0.0.1", "localhost:9", "cohort"}) {
    INFO(host);
    CHECK((*store)->Check(ReadText(ca + "/daemon.pem"), host).ok());
  }
  for (const char* host : {"10.0.0.1:7101", "other.example", "[::1]:7101"}) {
    INFO(host);
    absl::Status other = (*store)->Check(ReadText(ca + "/daemon.pem"), host);
    CHECK(other.code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(other.message()), Contains("is not for"));
  }

  // The list before the revocation: the certificate passes.
  auto before = RevocationStore::Create("tls.ca_file", ReadText(ca + "/ca.pem"),
                                        CrlsOf(ca + "/crl-none"));
  REQUIRE(before.ok());
  CHECK((*before)->Check(ReadText(ca + "/revoked.pem"), "").ok());
  // An issuer without a CRL is not checked: the rogue CA's certificates with its own CA.
  auto no_crl = RevocationStore::Create("auth.client_ca_file", ReadText(ca + "/rogue-ca.pem"),
                                        CrlsOf(ca + "/crl"));
  REQUIRE(no_crl.ok());
  CHECK((*no_crl)->Check(ReadText(ca + "/rogue.pem"), "").ok());
}

TEST_CASE("revocation store: bad input is named", "[tls]") {
  const std::string ca = test::MakeCa();
  const std::string crls = CrlsOf(ca + "/crl");
  auto no_ca = RevocationStore::Create("auth.client_ca_file", "not a certificate", crls);
  CHECK(no_ca.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(no_ca.status().message()), Contains("auth.client_ca_file"));
  auto no_crl = RevocationStore::Create("tls.ca_file", ReadText(ca + "/ca.pem"), "nothing");
  CHECK(no_crl.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(no_crl.status().message()), Contains("tls.crl_dir"));
  auto store = RevocationStore::Create("tls.ca_file", ReadText(ca + "/ca.pem"), crls);
  REQUIRE(store.ok());
  CHECK((*store)->Check("garbage", "").code() == absl::StatusCode::kUnauthenticated);
  CHECK((*store)->Check("", "").code() == absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace cohort::nso
