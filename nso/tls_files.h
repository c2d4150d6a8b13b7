// A daemon's TLS files (tls.ca_file, cert_file, key_file), read at start and looked at again
// every tls.reload_seconds, so that a certificate rotated on disk (cert-manager, a renewal cron)
// is used by new connections without a restart: the raw TCP peer transport gets a new OpenSSL
// context (nso/tls_channel.h), and the gRPC servers and dialer get the texts through
// PublishedTls (below), which gRPC's FileWatcherCertificateProvider reads.
//
// A change is taken only when the three files make a valid context together: a key rewritten a
// moment after its certificate fails once (named in the log) and is taken at the next look; a
// broken file changes nothing. Connections already up keep the session they have.
//
// Not thread-safe: one caller (the daemon's monitor thread).
#ifndef COHORT_NSO_TLS_FILES_H_
#define COHORT_NSO_TLS_FILES_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nso/tls_channel.h"

namespace cohort::nso {

// The text of a PEM file; `key` (e.g. "tls.cert_file") names it in the error.
absl::StatusOr<std::string> ReadPem(const std::string& key, const std::string& path);
// The CRLs (PEM) of the files of `dir` (tls.crl_dir), in name order, concatenated; files that hold
// no CRL are skipped. An error when the directory cannot be read.
absl::StatusOr<std::string> ReadCrlDir(const std::string& dir);

class TlsFiles {
 public:
  // `client_ca_file` (auth.client_ca_file, "" = none): the CA of applications' certificates,
  // read and reloaded with the others.
  // `crl_dir` (tls.crl_dir, "" = none): its CRLs, read and reloaded with the others.
  TlsFiles(std::string ca_file, std::string cert_file, std::string key_file,
           std::string client_ca_file = "", std::string crl_dir = "")
      : ca_file_(std::move(ca_file)), cert_file_(std::move(cert_file)), key_file_(std::move(key_file)),
        client_ca_file_(std::move(client_ca_file)), crl_dir_(std::move(crl_dir)) {}

  // Reads the files and makes the context (at start: an error stops the daemon).
  absl::StatusOr<std::shared_ptr<TlsContext>> Load();

  // Reads them again: nullopt when nothing changed since the last context made (or since the
  // last error); a new context when they changed and make one; the error (naming the file or
  // the part that is wrong) when they changed and do not. Only a valid context is remembered, so
  // a half-done rotation is looked at again next time.
  std::optional<absl::StatusOr<std::shared_ptr<TlsContext>>> Reload();

  // The texts of the last valid set.
  const std::string& ca_pem() const { return ca_; }
  const std::string& cert_pem() const { return cert_; }
  const std::string& key_pem() const { return key_; }
  // The applications' CA: client_ca_file's, or tls.ca_file's without one.
  const std::string& client_ca_pem() const { return client_ca_file_.empty() ? ca_ : client_ca_; }
  // tls.crl_dir's CRLs, concatenated ("" = none).
  const std::string& crl_pem() const { return crl_; }

 private:
  const std::string ca_file_, cert_file_, key_file_, client_ca_file_, crl_dir_;
  std::string ca_, cert_, key_, client_ca_, crl_;
  std::string loaded_;      // the three texts the current context was made from
  std::string last_error_;  // the three texts of the last failed attempt (not retried as such)
};

// Validated TLS texts where gRPC's FileWatcherCertificateProvider reads them: anonymous memory
// files (memfd) at fixed descriptors, named /proc/self/fd/N, so that nothing is left on disk if
// the daemon is killed. The certificate chain and its key go in ONE file (given to gRPC as both
// paths; OpenSSL's PEM readers skip the blocks of the other kind), replaced with one dup2, so
// gRPC never reads a new certificate with an old key; and only a triple TlsFiles validated is
// published, so a broken file on disk never reaches gRPC (which would fail new handshakes).
class PublishedTls {
 public:
  PublishedTls() = default;
  ~PublishedTls();
  PublishedTls(const PublishedTls&) = delete;
  PublishedTls& operator=(const PublishedTls&) = delete;

  // Replaces the published texts (any thread, one at a time).
  absl::Status Publish(const std::string& ca_pem, const std::string& cert_pem,
                       const std::string& key_pem, const std::string& client_ca_pem);
  std::string ca_path() const;         // after the first Publish
  std::string identity_path() const;   // the chain and its key
  std::string client_ca_path() const;  // the applications' CA

 private:
  int ca_fd_ = -1;
  int identity_fd_ = -1;
  int client_ca_fd_ = -1;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_TLS_FILES_H_
