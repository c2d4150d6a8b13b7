// What the TLS tests share: a test CA from tools/make-test-ca (a data dependency of the test)
// and TLS contexts made from its files.
#ifndef COHORT_TEST_TLS_TEST_UTIL_H_
#define COHORT_TEST_TLS_TEST_UTIL_H_

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "nso/tls_channel.h"
#include "test/ops_test_util.h"

namespace cohort::nso::test {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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
  auto context = TlsContext::Create(ReadFile(dir + "/ca.pem"), ReadFile(dir + "/" + name + ".pem"),
                                    ReadFile(dir + "/" + name + ".key"));
  REQUIRE(context.ok());
  return *context;
}

}  // namespace cohort::nso::test

#endif  // COHORT_TEST_TLS_TEST_UTIL_H_
