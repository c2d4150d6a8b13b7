// Which name a peer daemon's TLS certificate must carry (issue 8's mutual TLS, bound to the node):
// tls.server_name when set (every daemon's certificate carries it), else the host of the peer's
// address in `peers` (an IP address or a DNS name). A dialer checks the acceptor's certificate
// against it, and an acceptor the dialer's against the node its hello claims to be, so a daemon
// holding a certificate of the cluster's CA cannot speak as another node.
#ifndef COHORT_NSO_PEER_NAMES_H_
#define COHORT_NSO_PEER_NAMES_H_

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace cohort::nso {

inline std::string PeerCertificateName(const std::string& address, const std::string& server_name) {
  if (!server_name.empty()) return server_name;
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host;
}

// Whether one of a certificate's subject alternative names (as gRPC's auth context lists them:
// DNS names and IP addresses as text) is `name`: IP addresses and DNS names compare exactly (DNS
// without regard to case), and "*.example.org" covers one label under example.org.
inline bool CertificateCarries(const std::vector<std::string>& names, const std::string& name) {
  for (const std::string& san : names) {
    if (absl::EqualsIgnoreCase(san, name)) return true;
    if (absl::StartsWith(san, "*.")) {
      const size_t dot = name.find('.');
      if (dot != std::string::npos && dot > 0 && absl::EqualsIgnoreCase(san.substr(1), name.substr(dot))) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_PEER_NAMES_H_
