// tls.crl_dir on the gRPC ports: a certificate verifier that checks each new connection's chain
// against the newest RevocationStore (nso/revocation.h), which the daemon's monitor thread
// replaces when the tls files or CRLs change. A certificate revoked while the daemons run is
// refused at its next connection, on the gRPC ports as on the raw TCP transport.
#ifndef COHORT_NSO_GRPC_REVOCATION_H_
#define COHORT_NSO_GRPC_REVOCATION_H_

#include <grpcpp/security/tls_certificate_verifier.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/revocation.h"

namespace cohort::nso {

// The newest store: set by the monitor thread, read by gRPC's handshake threads.
class RevocationSource {
 public:
  explicit RevocationSource(std::shared_ptr<const RevocationStore> store)
      : store_(std::move(store)) {}
  void Set(std::shared_ptr<const RevocationStore> store) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    store_ = std::move(store);
  }
  std::shared_ptr<const RevocationStore> Get() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return store_;
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const RevocationStore> store_ ABSL_GUARDED_BY(mu_);
};

// For TlsCredentialsOptions::set_certificate_verifier. `check_host` (a dialer): the acceptor's
// certificate must also be for the target's host (it replaces gRPC's HostNameCertificateVerifier).
// A connection that presents no certificate passes: the port's own rules decide about it.
std::shared_ptr<grpc::experimental::CertificateVerifier> MakeRevocationVerifier(
    std::shared_ptr<const RevocationSource> source, bool check_host);

}  // namespace cohort::nso

#endif  // COHORT_NSO_GRPC_REVOCATION_H_
