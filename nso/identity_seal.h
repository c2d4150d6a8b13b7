// Carries an application's name, proven once on gRPC (its TLS client certificate, issue 8's
// auth.client_certificates), to the daemon's local fast path, which has no TLS: Attach hands the
// client its name sealed with a key only this daemon process knows (HMAC-SHA256), and the local
// hello presents it back. A client cannot forge or alter a seal, and a seal is worthless to
// another daemon or after a restart.
#ifndef COHORT_NSO_IDENTITY_SEAL_H_
#define COHORT_NSO_IDENTITY_SEAL_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"

namespace cohort::nso {

class IdentitySeal {
 public:
  IdentitySeal();  // a fresh random key

  std::string Seal(const std::string& name) const;
  // The sealed name, or PermissionDenied when `sealed` is not a seal of this key.
  absl::StatusOr<std::string> Open(const std::string& sealed) const;

 private:
  std::array<unsigned char, 32> key_{};
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_IDENTITY_SEAL_H_
