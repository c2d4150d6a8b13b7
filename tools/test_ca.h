// The tls section of a daemon's YAML for a CA directory made by tools/make-test-ca (its
// daemon.pem and daemon.key, signed by its ca.pem): for the tests, the bench and the nemesis.
#ifndef COHORT_TOOLS_TEST_CA_H_
#define COHORT_TOOLS_TEST_CA_H_

#include <string>

namespace cohort {

// One line, ending in a newline; `server_name` (tls.server_name) when peers' certificates are
// to be checked against that name (a SAN of the test certificates, e.g. "cohort") rather than
// the host of their address.
inline std::string TestCaTlsYaml(const std::string& dir, const std::string& server_name = "") {
  return "tls: {ca_file: " + dir + "/ca.pem, cert_file: " + dir + "/daemon.pem, key_file: " + dir +
         "/daemon.key" + (server_name.empty() ? "" : ", server_name: " + server_name) + "}\n";
}

}  // namespace cohort

#endif  // COHORT_TOOLS_TEST_CA_H_
