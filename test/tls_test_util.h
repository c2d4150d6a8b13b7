// What the TLS tests share: a test CA from tools/make-test-ca (a data dependency of the test)
// and TLS contexts made from its files.
#ifndef COHORT_TEST_TLS_TEST_UTIL_H_
#define COHORT_TEST_TLS_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "nso/tls_channel.h"
#include "test/ops_test_util.h"

namespace cohort::nso::test {

using cohort::test::ReadText;

// tools/make-test-ca into a directory of the test's: ca.pem, daemon.pem/.key (from that CA),
// rogue.pem/.key (from another CA).
inline std::string MakeCa() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/test-ca";
  std::string out;
  REQUIRE(cohort::test::RunCapture("tools/make-test-ca " + dir, &out) == 0);
  return dir;
}

// A context with the CA of `dir` and the certificate `name` (daemon or rogue).
inline std::shared_ptr<TlsContext> Tls(const std::string& dir, const std::string& name) {
  auto context = TlsContext::Create(ReadText(dir + "/ca.pem"), ReadText(dir + "/" + name + ".pem"),
                                    ReadText(dir + "/" + name + ".key"));
  REQUIRE(context.ok());
  return *context;
}

}  // namespace cohort::nso::test

#endif  // COHORT_TEST_TLS_TEST_UTIL_H_
