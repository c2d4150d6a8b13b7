#include "nso/revocation.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace cohort::nso {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(absl::string_view pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct StackFree {
  void operator()(STACK_OF(X509) * chain) const { sk_X509_pop_free(chain, X509_free); }
};
struct StoreCtxFree {
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
};

// "host:port" -> "host", "[v6]:port" -> "v6"; a bare name or IPv6 address stays as it is.
std::string HostOf(absl::string_view target) {
  if (!target.empty() && target.front() == '[') {
    size_t end = target.find(']');
    return std::string(target.substr(1, end == absl::string_view::npos ? target.npos : end - 1));
  }
  size_t colon = target.find(':');
  if (colon != absl::string_view::npos && target.find(':', colon + 1) == absl::string_view::npos) {
    return std::string(target.substr(0, colon));
  }
  return std::string(target);
}

}  // namespace

int AcceptMissingCrl(int ok, X509_STORE_CTX* ctx) {
  return ok != 0 || X509_STORE_CTX_get_error(ctx) == X509_V_ERR_UNABLE_TO_GET_CRL;
}

int AddCaCertificates(X509_STORE* store, const std::string& ca_pem) {
  BioPtr ca = MemoryBio(ca_pem);
  int cas = 0;
  while (X509* cert = PEM_read_bio_X509(ca.get(), nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++cas;
    X509_free(cert);
  }
  ERR_clear_error();  // the end of the PEM text reads as an error
  return cas;
}

absl::Status AddCrls(X509_STORE* store, const std::string& crl_pem) {
  BioPtr crls = MemoryBio(crl_pem);
  int count = 0;
  while (X509_CRL* crl = PEM_read_bio_X509_CRL(crls.get(), nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_crl(store, crl) == 1) ++count;
    X509_CRL_free(crl);
  }
  ERR_clear_error();  // the end of the PEM text reads as an error
  if (count == 0) return absl::InvalidArgumentError("tls.crl_dir: no CRL could be read in it");
  X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const RevocationStore>> RevocationStore::Create(
    absl::string_view ca_key, const std::string& ca_pem, const std::string& crl_pem) {
  ERR_clear_error();
  X509_STORE* store = X509_STORE_new();
  if (store == nullptr) return absl::InternalError("TLS: cannot make a certificate store");
  std::shared_ptr<const RevocationStore> made(new RevocationStore(store));
  if (AddCaCertificates(store, ca_pem) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(ca_key, ": no CA certificate in it"));
  }
  if (absl::Status added = AddCrls(store, crl_pem); !added.ok()) return added;
  X509_STORE_set_verify_cb(store, AcceptMissingCrl);
  return made;
}

RevocationStore::~RevocationStore() { X509_STORE_free(store_); }

absl::Status RevocationStore::Check(absl::string_view chain_pem, absl::string_view host) const {
  BioPtr bio = MemoryBio(chain_pem);
  std::unique_ptr<X509, X509Free> leaf(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (leaf == nullptr) {
    ERR_clear_error();
    return absl::UnauthenticatedError("the peer's certificate cannot be read");
  }
  std::unique_ptr<STACK_OF(X509), StackFree> rest(sk_X509_new_null());
  while (X509* extra = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(rest.get(), extra);
  }
  ERR_clear_error();
  std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(X509_STORE_CTX_new());
  if (ctx == nullptr || X509_STORE_CTX_init(ctx.get(), store_, leaf.get(), rest.get()) != 1) {
    ERR_clear_error();
    return absl::InternalError("TLS: cannot check a certificate");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::UnauthenticatedError(
        absl::StrCat("the peer's certificate is refused: ", X509_verify_cert_error_string(error)));
  }
  if (host.empty()) return absl::OkStatus();
  std::string name = HostOf(host);
  in_addr ip4{};
  in6_addr ip6{};
  bool ip = inet_pton(AF_INET, name.c_str(), &ip4) == 1 || inet_pton(AF_INET6, name.c_str(), &ip6) == 1;
  int matches = ip ? X509_check_ip_asc(leaf.get(), name.c_str(), 0)
                   : X509_check_host(leaf.get(), name.c_str(), name.size(), 0, nullptr);
  if (matches == 1) return absl::OkStatus();
  return absl::UnauthenticatedError(absl::StrCat("the peer's certificate is not for \"", name, "\""));
}

}  // namespace cohort::nso
