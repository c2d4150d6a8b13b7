#include "nso/identity_seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

namespace cohort::nso {
namespace {

constexpr size_t kMacBytes = 32;  // SHA-256

std::string Mac(const std::array<unsigned char, 32>& key, const std::string& name) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(name.data()), name.size(), out, &length);
  return std::string(reinterpret_cast<const char*>(out), length);
}

}  // namespace

IdentitySeal::IdentitySeal() {
  // Without randomness a seal could be forged: better not to start.
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) std::abort();
}

std::string IdentitySeal::Seal(const std::string& name) const { return name + Mac(key_, name); }

absl::StatusOr<std::string> IdentitySeal::Open(const std::string& sealed) const {
  if (sealed.size() < kMacBytes) {
    return absl::PermissionDeniedError("malformed identity: attach over gRPC first");
  }
  std::string name = sealed.substr(0, sealed.size() - kMacBytes);
  std::string mac = Mac(key_, name);
  if (mac.size() != kMacBytes ||
      CRYPTO_memcmp(mac.data(), sealed.data() + name.size(), kMacBytes) != 0) {
    return absl::PermissionDeniedError(
        "identity not sealed by this daemon: attach to it over gRPC first");
  }
  return name;
}

}  // namespace cohort::nso
