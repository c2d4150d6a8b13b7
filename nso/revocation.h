// Certificate revocation for the gRPC ports (tls.crl_dir). gRPC 1.51's own crl_directory keeps a
// CRL once it has loaded it, so a CA that revokes a certificate while the daemons run would not be
// heard there until a restart. A RevocationStore is made from the texts TlsFiles reads (the CA and
// the CRLs, re-read every tls.reload_seconds), and a RevocationVerifier (nso/grpc_revocation.h)
// checks every new gRPC connection's certificate chain against the newest one: the same rules as
// the raw TCP transport's OpenSSL store (nso/tls_channel.h).
#ifndef COHORT_NSO_REVOCATION_H_
#define COHORT_NSO_REVOCATION_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct x509_store_st X509_STORE;
typedef struct x509_store_ctx_st X509_STORE_CTX;

namespace cohort::nso {

// Adds the certificates of `ca_pem` (PEM, concatenated) to `store` as trusted; how many.
int AddCaCertificates(X509_STORE* store, const std::string& ca_pem);
// Adds the CRLs of `crl_pem` (PEM, concatenated) to `store` and makes it check them
// (X509_V_FLAG_CRL_CHECK). An error naming tls.crl_dir when none could be read.
absl::Status AddCrls(X509_STORE* store, const std::string& crl_pem);
// The verify callback of a store with CRLs: an issuer without a CRL is not checked (what gRPC's
// crl_directory did; both transports keep the rule).
int AcceptMissingCrl(int ok, X509_STORE_CTX* ctx);

// Immutable: shared by the threads that check handshakes.
class RevocationStore {
 public:
  // `ca_pem`: the CA bundle the chains must lead to; `crl_pem`: CRLs (PEM, concatenated), each
  // signed by its issuer. An error names what is wrong (`ca_key`, e.g. "tls.ca_file").
  static absl::StatusOr<std::shared_ptr<const RevocationStore>> Create(absl::string_view ca_key,
                                                                       const std::string& ca_pem,
                                                                       const std::string& crl_pem);
  ~RevocationStore();
  RevocationStore(const RevocationStore&) = delete;
  RevocationStore& operator=(const RevocationStore&) = delete;

  // OK when `chain_pem` (the peer's certificates, leaf first) verifies against the CA and no
  // certificate of it is listed by its issuer's CRL (an issuer without a CRL is not checked, as
  // the raw TCP transport does), and, if `host` is not empty, the leaf is for `host` (an IP
  // address or DNS name; "host:port" and "[v6]:port" are cut to the host). Else
  // UNAUTHENTICATED naming why ("certificate revoked").
  absl::Status Check(absl::string_view chain_pem, absl::string_view host) const;

 private:
  explicit RevocationStore(X509_STORE* store) : store_(store) {}
  X509_STORE* const store_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_REVOCATION_H_
