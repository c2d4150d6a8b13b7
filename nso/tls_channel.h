// Mutual TLS for the raw TCP peer transport (peer_transport: tcp with a tls section), on
// OpenSSL (Debian's libssl, which gRPC already links). The rules are those of the gRPC peer
// streams (nso/daemon.cc, MakeCredentials): both ends present a certificate from the cluster's CA
// (tls.ca_file), and the dialer checks the acceptor's against the host of the peer's address, or
// tls.server_name. Non-blocking: the handshake runs inside the connection's first reads and
// writes on the protocol thread, so TLS adds no thread to the path (issue 7).
#ifndef COHORT_NSO_TLS_CHANNEL_H_
#define COHORT_NSO_TLS_CHANNEL_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace cohort::nso {

// The CA, certificate and key of one daemon: shared by all its peer connections.
class TlsContext {
 public:
  // PEM texts (tls.ca_file, tls.cert_file: the chain, leaf first; tls.key_file). An error names
  // the part that is wrong. `crl_pem` (tls.crl_dir's CRLs, concatenated; "" = none): a peer's
  // certificate its issuer's CRL lists is refused; an issuer without one is not checked (as
  // gRPC's crl_directory does).
  static absl::StatusOr<std::shared_ptr<TlsContext>> Create(const std::string& ca_pem,
                                                            const std::string& cert_pem,
                                                            const std::string& key_pem,
                                                            const std::string& crl_pem = "");
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* const ctx_;
};

// OK when `pem` holds at least one CA certificate; else an error naming `key` (e.g.
// "auth.client_ca_file").
absl::Status CheckCaBundle(const std::string& key, const std::string& pem);

// What an operation that could not finish waits for.
enum class TlsWait { kNone, kReadable, kWritable };

// One connection's TLS session over a non-blocking socket it does not own.
class TlsChannel {
 public:
  // `peer_name` (dialer only): the IP address or DNS name the acceptor's certificate must carry.
  static absl::StatusOr<std::unique_ptr<TlsChannel>> Create(const TlsContext& context, int fd,
                                                            bool dialer,
                                                            const std::string& peer_name);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // As read(2) and send(2): > 0 bytes moved; 0 the peer closed (Read only); -1 with *wait the
  // readiness to wait for, or kNone and *error saying why TLS failed (a bad certificate, a peer
  // that does not speak TLS), or kNone and *error empty when the connection itself failed
  // (errno: reset by a dead peer, broken pipe).
  ssize_t Read(char* buffer, size_t size, TlsWait* wait, std::string* error);
  ssize_t Write(const char* data, size_t size, TlsWait* wait, std::string* error);
  // Whether OpenSSL holds bytes read from the socket that no Read has returned yet.
  bool HasPending() const;
  // After the handshake: OK when the peer's (verified) certificate is for `name`, an IP address
  // or a DNS name, as a dialer checks the acceptor's; the acceptor checks the dialer's this way
  // against the node the dialer's hello claims to be (a certificate binds its holder to a node).
  absl::Status CheckPeerName(const std::string& name) const;

 private:
  explicit TlsChannel(SSL* ssl) : ssl_(ssl) {}
  // The outcome of an SSL_read/SSL_write that returned `result`.
  ssize_t Outcome(int result, bool reading, TlsWait* wait, std::string* error);
  SSL* const ssl_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TLS_CHANNEL_H_
