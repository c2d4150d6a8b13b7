#include "nso/tls_files.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cohort::nso {

absl::StatusOr<std::string> ReadPem(const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(
        absl::StrCat(key, ": cannot read \"", path, "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(key, ": \"", path, "\" is not PEM"));
  }
  return text.str();
}

absl::StatusOr<std::string> ReadCrlDir(const std::string& dir) {
  std::error_code error;
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file()) names.push_back(entry.path().string());  // symlinks followed
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("tls.crl_dir: cannot read \"", dir, "\": ", error.message()));
  }
  std::sort(names.begin(), names.end());
  std::string crls;
  for (const std::string& name : names) {
    std::ifstream in(name, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (text.str().find("-----BEGIN X509 CRL-----") != std::string::npos) {
      absl::StrAppend(&crls, text.str(), "\n");
    }
  }
  return crls;
}

absl::StatusOr<std::shared_ptr<TlsContext>> TlsFiles::Load() {
  std::optional<absl::StatusOr<std::shared_ptr<TlsContext>>> loaded = Reload();
  if (!loaded) return absl::InternalError("TLS files already loaded");
  return *std::move(loaded);
}

std::optional<absl::StatusOr<std::shared_ptr<TlsContext>>> TlsFiles::Reload() {
  absl::StatusOr<std::string> ca = ReadPem("tls.ca_file", ca_file_);
  absl::StatusOr<std::string> cert = ReadPem("tls.cert_file", cert_file_);
  absl::StatusOr<std::string> key = ReadPem("tls.key_file", key_file_);
  absl::StatusOr<std::string> client_ca =
      client_ca_file_.empty() ? absl::StatusOr<std::string>("")
                              : ReadPem("auth.client_ca_file", client_ca_file_);
  absl::StatusOr<std::string> crls =
      crl_dir_.empty() ? absl::StatusOr<std::string>("") : ReadCrlDir(crl_dir_);
  // Lengths first, so that no two different sets of texts give the same string.
  std::string texts = absl::StrCat(
      ca.ok() ? ca->size() : 0, ":", cert.ok() ? cert->size() : 0, ":", key.ok() ? key->size() : 0,
      ":", client_ca.ok() ? client_ca->size() : 0, ":", crls.ok() ? crls->size() : 0, ":",
      ca.ok() ? *ca : "", cert.ok() ? *cert : "", key.ok() ? *key : "",
      client_ca.ok() ? *client_ca : "", crls.ok() ? *crls : "");
  if (texts == loaded_ || texts == last_error_) return std::nullopt;
  absl::StatusOr<std::shared_ptr<TlsContext>> context =
      !ca.ok() ? absl::StatusOr<std::shared_ptr<TlsContext>>(ca.status())
      : !cert.ok() ? absl::StatusOr<std::shared_ptr<TlsContext>>(cert.status())
      : !key.ok() ? absl::StatusOr<std::shared_ptr<TlsContext>>(key.status())
      : !client_ca.ok() ? absl::StatusOr<std::shared_ptr<TlsContext>>(client_ca.status())
      : !crls.ok() ? absl::StatusOr<std::shared_ptr<TlsContext>>(crls.status())
                  : TlsContext::Create(*ca, *cert, *key, *crls);
  if (context.ok() && !client_ca_file_.empty()) {
    if (absl::Status usable = CheckCaBundle("auth.client_ca_file", *client_ca); !usable.ok()) {
      context = usable;
    }
  }
  if (context.ok()) {
    loaded_ = std::move(texts);
    last_error_.clear();
    ca_ = *std::move(ca);
    cert_ = *std::move(cert);
    key_ = *std::move(key);
    client_ca_ = *std::move(client_ca);
    crl_ = *std::move(crls);
  } else {
    last_error_ = std::move(texts);
  }
  return context;
}

namespace {

// A memory file holding `text`, or -1 (errno set).
int MemoryFile(const char* name, const std::string& text) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < text.size()) {
    ssize_t wrote = write(fd, text.data() + done, text.size() - done);
    if (wrote <= 0) {
      close(fd);
      return -1;
    }
    done += wrote;
  }
  return fd;
}

// Makes *fixed refer to a memory file holding `text`: the first time, that file's descriptor;
// afterwards the same descriptor number, swapped atomically (dup2).
absl::Status Place(const char* name, const std::string& text, int* fixed) {
  int fd = MemoryFile(name, text);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd for ", name, ": ", std::strerror(errno)));
  if (*fixed < 0) {
    *fixed = fd;
    return absl::OkStatus();
  }
  int placed = dup3(fd, *fixed, O_CLOEXEC);
  close(fd);
  if (placed < 0) return absl::InternalError(absl::StrCat("dup3 for ", name, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace

PublishedTls::~PublishedTls() {
  if (ca_fd_ >= 0) close(ca_fd_);
  if (identity_fd_ >= 0) close(identity_fd_);
  if (client_ca_fd_ >= 0) close(client_ca_fd_);
}

absl::Status PublishedTls::Publish(const std::string& ca_pem, const std::string& cert_pem,
                                   const std::string& key_pem, const std::string& client_ca_pem) {
  if (absl::Status ca = Place("cohort-tls-ca", ca_pem, &ca_fd_); !ca.ok()) return ca;
  if (absl::Status clients = Place("cohort-tls-client-ca", client_ca_pem, &client_ca_fd_);
      !clients.ok()) {
    return clients;
  }
  return Place("cohort-tls-identity", absl::StrCat(cert_pem, "\n", key_pem), &identity_fd_);
}

std::string PublishedTls::ca_path() const { return absl::StrCat("/proc/self/fd/", ca_fd_); }

std::string PublishedTls::client_ca_path() const {
  return absl::StrCat("/proc/self/fd/", client_ca_fd_);
}

std::string PublishedTls::identity_path() const {
  return absl::StrCat("/proc/self/fd/", identity_fd_);
}

}  // namespace cohort::nso
