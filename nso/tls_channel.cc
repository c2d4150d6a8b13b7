#include "nso/tls_channel.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nso/revocation.h"

namespace cohort::nso {
namespace {

// OpenSSL's queued errors as one line (and the queue emptied).
std::string Errors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(code, line, sizeof(line));
    absl::StrAppend(&text, text.empty() ? "" : "; ", line);
  }
  return text.empty() ? "unknown TLS error" : text;
}

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// OpenSSL's socket BIO writes with write(2): to a dead peer that raises SIGPIPE, which kills a
// process that has not chosen to ignore it (an application with an embedded node; found by
// tls_channel_test). This BIO is the socket BIO with send(MSG_NOSIGNAL) for its writes.
int SendNoSignal(BIO* bio, const char* data, int size) {
  int fd = -1;
  BIO_get_fd(bio, &fd);
  ssize_t sent = send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
  BIO_clear_retry_flags(bio);
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
    BIO_set_retry_write(bio);
  }
  return static_cast<int>(sent);
}

const BIO_METHOD* SocketNoSignal() {
  static const BIO_METHOD* method = [] {
    const BIO_METHOD* socket = BIO_s_socket();
    BIO_METHOD* own = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                                       BIO_TYPE_DESCRIPTOR,
                                   "socket, no SIGPIPE");
    BIO_meth_set_write(own, SendNoSignal);
    BIO_meth_set_read(own, BIO_meth_get_read(socket));
    BIO_meth_set_puts(own, BIO_meth_get_puts(socket));
    BIO_meth_set_ctrl(own, BIO_meth_get_ctrl(socket));
    BIO_meth_set_create(own, BIO_meth_get_create(socket));
    BIO_meth_set_destroy(own, BIO_meth_get_destroy(socket));
    return own;
  }();
  return method;
}

}  // namespace

absl::Status CheckCaBundle(const std::string& key, const std::string& pem) {
  BioPtr bio = MemoryBio(pem);
  int cas = 0;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    ++cas;
    X509_free(cert);
  }
  ERR_clear_error();  // the end of the PEM text reads as an error
  if (cas == 0) return absl::InvalidArgumentError(absl::StrCat(key, ": no CA certificate in it"));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<TlsContext>> TlsContext::Create(const std::string& ca_pem,
                                                               const std::string& cert_pem,
                                                               const std::string& key_pem,
                                                               const std::string& crl_pem) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", Errors()));
  std::shared_ptr<TlsContext> context(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // Partial writes, retried from a buffer that may have moved (the connection's output grows).
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A peer that dies (kill -9) closes without close_notify: that is an end of stream, not an
  // attack on it (frames are length-prefixed: a truncated one is never delivered).
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  // One read(2) takes in what the socket has, not a record header and then its body.
  SSL_CTX_set_read_ahead(ctx, 1);

  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  if (AddCaCertificates(store, ca_pem) == 0) {
    return absl::InvalidArgumentError("tls.ca_file: no CA certificate in it");
  }

  BioPtr chain = MemoryBio(cert_pem);
  X509* leaf = PEM_read_bio_X509(chain.get(), nullptr, nullptr, nullptr);
  if (leaf == nullptr || SSL_CTX_use_certificate(ctx, leaf) != 1) {
    if (leaf != nullptr) X509_free(leaf);
    return absl::InvalidArgumentError(absl::StrCat("tls.cert_file: ", Errors()));
  }
  X509_free(leaf);
  while (X509* extra = PEM_read_bio_X509(chain.get(), nullptr, nullptr, nullptr)) {
    SSL_CTX_add0_chain_cert(ctx, extra);  // takes it
  }
  ERR_clear_error();

  BioPtr key_bio = MemoryBio(key_pem);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key) != 1) {
    if (key != nullptr) EVP_PKEY_free(key);
    return absl::InvalidArgumentError(absl::StrCat("tls.key_file: ", Errors()));
  }
  EVP_PKEY_free(key);
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tls.key_file does not match tls.cert_file: ", Errors()));
  }
  // Mutual: each end must present a certificate the CA signed.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (!crl_pem.empty()) {
    if (absl::Status added = AddCrls(store, crl_pem); !added.ok()) return added;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptMissingCrl);
  }
  return context;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::unique_ptr<TlsChannel>> TlsChannel::Create(const TlsContext& context, int fd,
                                                               bool dialer,
                                                               const std::string& peer_name) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context.get());
  BIO* bio = BIO_new(SocketNoSignal());
  if (ssl == nullptr || bio == nullptr) {
    if (ssl != nullptr) SSL_free(ssl);
    if (bio != nullptr) BIO_free(bio);
    return absl::InternalError(absl::StrCat("TLS: ", Errors()));
  }
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl, bio, bio);  // the SSL owns it
  std::unique_ptr<TlsChannel> channel(new TlsChannel(ssl));
  if (!dialer) {
    SSL_set_accept_state(ssl);
    return channel;
  }
  SSL_set_connect_state(ssl);
  in_addr ip4{};
  in6_addr ip6{};
  bool ip = inet_pton(AF_INET, peer_name.c_str(), &ip4) == 1 ||
            inet_pton(AF_INET6, peer_name.c_str(), &ip6) == 1;
  bool named = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), peer_name.c_str()) == 1
                  : SSL_set1_host(ssl, peer_name.c_str()) == 1 &&
                        SSL_set_tlsext_host_name(ssl, peer_name.c_str()) == 1;
  if (!named) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot check certificates against \"", peer_name, "\": ", Errors()));
  }
  return channel;
}

TlsChannel::~TlsChannel() { SSL_free(ssl_); }

ssize_t TlsChannel::Read(char* buffer, size_t size, TlsWait* wait, std::string* error) {
  ERR_clear_error();
  int result = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  return result > 0 ? result : Outcome(result, /*reading=*/true, wait, error);
}

bool TlsChannel::HasPending() const { return SSL_has_pending(ssl_) == 1; }

absl::Status TlsChannel::CheckPeerName(const std::string& name) const {
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return absl::PermissionDeniedError("it presented no certificate");
  in_addr ip4{};
  in6_addr ip6{};
  bool ip = inet_pton(AF_INET, name.c_str(), &ip4) == 1 || inet_pton(AF_INET6, name.c_str(), &ip6) == 1;
  int matches = ip ? X509_check_ip_asc(cert, name.c_str(), 0)
                   : X509_check_host(cert, name.c_str(), name.size(), 0, nullptr);
  X509_free(cert);
  if (matches == 1) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("its certificate is not for \"", name, "\""));
}

ssize_t TlsChannel::Write(const char* data, size_t size, TlsWait* wait, std::string* error) {
  ERR_clear_error();
  int result = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  return result > 0 ? result : Outcome(result, /*reading=*/false, wait, error);
}

ssize_t TlsChannel::Outcome(int result, bool reading, TlsWait* wait, std::string* error) {
  *wait = TlsWait::kNone;
  int code = SSL_get_error(ssl_, result);
  switch (code) {
    case SSL_ERROR_WANT_READ:
      *wait = TlsWait::kReadable;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      *wait = TlsWait::kWritable;
      return -1;
    case SSL_ERROR_ZERO_RETURN:  // the peer's close_notify
      if (reading) return 0;
      error->clear();  // a write after it: the connection is over, TLS did not fail
      return -1;
    case SSL_ERROR_SYSCALL: {
      // A failed read(2)/send(2) (OpenSSL 3 queues it as a system error, older ones only set
      // errno): the connection failed, TLS did not.
      unsigned long queued = ERR_peek_error();
      if (queued != 0 && ERR_GET_LIB(queued) != ERR_LIB_SYS) break;
      int system_error = queued != 0 ? ERR_GET_REASON(queued) : errno;
      ERR_clear_error();
      if (system_error == EINTR) {
        *wait = reading ? TlsWait::kReadable : TlsWait::kWritable;
        return -1;
      }
      if (reading && (result == 0 || system_error == 0 || system_error == ECONNRESET)) {
        return 0;  // end of stream
      }
      error->clear();
      errno = system_error;
      return -1;
    }
    default:
      break;
  }
  long verify = SSL_get_verify_result(ssl_);
  *error = Errors();
  if (verify != X509_V_OK) {
    absl::StrAppend(error, " (certificate: ", X509_verify_cert_error_string(verify), ")");
  }
  return -1;
}

}  // namespace cohort::nso
