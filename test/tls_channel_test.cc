// TlsChannel (nso/tls_channel.h) on its own: two channels over a socket pair in this process,
// driven by hand, as the raw TCP transport drives them on its protocol thread.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "nso/tls_channel.h"
#include "nso/tls_files.h"
#include "nso/peer_names.h"
#include "test/tls_test_util.h"

namespace cohort::nso {
namespace {

using test::MakeCa;
using test::Tls;

// A dialer and an acceptor over a non-blocking socket pair.
struct Pair {
  Pair(const TlsContext& dialer_context, const TlsContext& acceptor_context,
       const std::string& name) {
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    auto d = TlsChannel::Create(dialer_context, fds[0], /*dialer=*/true, name);
    auto a = TlsChannel::Create(acceptor_context, fds[1], /*dialer=*/false, "");
    REQUIRE(d.ok());
    REQUIRE(a.ok());
    dialer = *std::move(d);
    acceptor = *std::move(a);
  }
  ~Pair() {
    dialer.reset();
    acceptor.reset();
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }

  // The dialer writes `text`; both sides are driven until the acceptor has read it all. False,
  // with *error, if either side fails.
  bool Send(const std::string& text, std::string* error) {
    std::string got;
    size_t written = 0;
    for (int round = 0; round < 1000 && got.size() < text.size(); ++round) {
      TlsWait wait;
      if (written < text.size()) {
        ssize_t n = dialer->Write(text.data() + written, text.size() - written, &wait, error);
        if (n > 0) written += n;
        if (n < 0 && wait == TlsWait::kNone) return false;
      }
      char buffer[4096];
      ssize_t n = acceptor->Read(buffer, sizeof(buffer), &wait, error);
      if (n > 0) got.append(buffer, n);
      if (n == 0 || (n < 0 && wait == TlsWait::kNone)) return false;
      // The dialer's side of the handshake goes on as it reads.
      char none[1];
      if (dialer->Read(none, sizeof(none), &wait, error) < 0 && wait == TlsWait::kNone) return false;
    }
    *error = got == text ? "" : "got \"" + got + "\"";
    return got == text;
  }

  int fds[2] = {-1, -1};
  std::unique_ptr<TlsChannel> dialer;
  std::unique_ptr<TlsChannel> acceptor;
};

}  // namespace

TEST_CASE("TLS channel: a handshake and data over a socket pair; the peer's close; no SIGPIPE",
          "[tls]") {
  const std::string ca = MakeCa();
  std::shared_ptr<TlsContext> daemon = Tls(ca, "daemon");
  Pair pair(*daemon, *daemon, "127.0.0.1");
  std::string error;
  REQUIRE(pair.Send("hello over TLS", &error));
  CHECK(error.empty());
  std::string big(100000, 'x');  // several records
  REQUIRE(pair.Send(big, &error));

  // The acceptor goes away: the dialer reads the end of the stream...
  pair.acceptor.reset();
  close(pair.fds[1]);
  pair.fds[1] = -1;
  TlsWait wait;
  char buffer[64];
  CHECK(pair.dialer->Read(buffer, sizeof(buffer), &wait, &error) == 0);
  // ...and its writes fail as a connection failure (errno EPIPE), not a TLS one, and without a
  // SIGPIPE: this process does not ignore SIGPIPE, so the signal would end the test here.
  ssize_t n = 0;
  for (int i = 0; i < 5 && n >= 0; ++i) n = pair.dialer->Write("more", 4, &wait, &error);
  CHECK(n == -1);
  CHECK(wait == TlsWait::kNone);
  CHECK(error.empty());
}

TEST_CASE("TLS channel: certificates from another CA or for another name fail the handshake, "
          "saying why",
          "[tls]") {
  const std::string ca = MakeCa();
  std::shared_ptr<TlsContext> daemon = Tls(ca, "daemon");
  std::shared_ptr<TlsContext> rogue = Tls(ca, "rogue");
  std::string error;
  SECTION("the acceptor's certificate is from another CA") {
    Pair pair(*daemon, *rogue, "127.0.0.1");
    CHECK_FALSE(pair.Send("hello", &error));
    CHECK_THAT(error, Catch::Contains("certificate"));
  }
  SECTION("the dialer's certificate is from another CA") {
    Pair pair(*rogue, *daemon, "127.0.0.1");
    CHECK_FALSE(pair.Send("hello", &error));
    CHECK_FALSE(error.empty());
  }
  SECTION("the name is not in the acceptor's certificate") {
    Pair pair(*daemon, *daemon, "elsewhere.example");
    CHECK_FALSE(pair.Send("hello", &error));
    CHECK_THAT(error, Catch::Contains("hostname mismatch"));
  }
  SECTION("a DNS name that is") {
    Pair pair(*daemon, *daemon, "cohort");
    CHECK(pair.Send("hello", &error));
  }
}

TEST_CASE("TLS files: read again, a change makes a new context only when the three files fit "
          "together; a broken one is named once and retried when it changes", "[tls]") {
  const std::string dir = test::MakeCa();
  const std::string cert = dir + "/node.pem", key = dir + "/node.key";
  auto write = [](const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  };
  using cohort::test::ReadText;
  write(cert, ReadText(dir + "/daemon.pem"));
  write(key, ReadText(dir + "/daemon.key"));
  TlsFiles files(dir + "/ca.pem", cert, key);
  absl::StatusOr<std::shared_ptr<TlsContext>> first = files.Load();
  REQUIRE(first.ok());
  CHECK_FALSE(files.Reload().has_value());  // unchanged

  // Half a rotation: the new certificate, the old key. Refused, named, and not retried as is.
  write(cert, ReadText(dir + "/rogue.pem"));
  auto half = files.Reload();
  REQUIRE(half.has_value());
  REQUIRE_FALSE(half->ok());
  CHECK_THAT(std::string(half->status().message()), Catch::Contains("key"));
  CHECK_FALSE(files.Reload().has_value());
  // The key follows: a new context.
  write(key, ReadText(dir + "/rogue.key"));
  auto whole = files.Reload();
  REQUIRE(whole.has_value());
  REQUIRE(whole->ok());
  CHECK(whole->value() != *first);
  CHECK_FALSE(files.Reload().has_value());

  // A file that is not PEM, or gone, is named.
  write(key, "not a key\n");
  auto broken = files.Reload();
  REQUIRE(broken.has_value());
  CHECK_THAT(std::string(broken->status().message()), Catch::Contains("tls.key_file"));
  std::remove(cert.c_str());
  auto gone = files.Reload();
  REQUIRE(gone.has_value());
  CHECK_THAT(std::string(gone->status().message()), Catch::Contains("tls.cert_file: cannot read"));
}

TEST_CASE("TLS files: the applications' CA (auth.client_ca_file) is read and reloaded with the "
          "others; one without a CA certificate is named", "[tls]") {
  const std::string dir = test::MakeCa();
  const std::string clients = dir + "/clients-ca.pem";
  std::ofstream(clients, std::ios::trunc) << cohort::test::ReadText(dir + "/rogue-ca.pem");
  TlsFiles files(dir + "/ca.pem", dir + "/daemon.pem", dir + "/daemon.key", clients);
  REQUIRE(files.Load().ok());
  CHECK(files.client_ca_pem() == cohort::test::ReadText(dir + "/rogue-ca.pem"));
  CHECK(files.ca_pem() == cohort::test::ReadText(dir + "/ca.pem"));
  // A change of that file alone is a change: a new context, the new text.
  std::ofstream(clients, std::ios::trunc) << cohort::test::ReadText(dir + "/ca.pem");
  auto changed = files.Reload();
  REQUIRE(changed.has_value());
  REQUIRE(changed->ok());
  CHECK(files.client_ca_pem() == cohort::test::ReadText(dir + "/ca.pem"));
  // PEM without a certificate: refused, named, and the last good text kept.
  std::ofstream(clients, std::ios::trunc) << cohort::test::ReadText(dir + "/daemon.key");
  auto broken = files.Reload();
  REQUIRE(broken.has_value());
  REQUIRE_FALSE(broken->ok());
  CHECK_THAT(std::string(broken->status().message()),
             Catch::Contains("auth.client_ca_file: no CA certificate in it"));
  CHECK(files.client_ca_pem() == cohort::test::ReadText(dir + "/ca.pem"));
  // Without the file the applications' CA is the daemons'.
  TlsFiles plain(dir + "/ca.pem", dir + "/daemon.pem", dir + "/daemon.key");
  REQUIRE(plain.Load().ok());
  CHECK(plain.client_ca_pem() == plain.ca_pem());
}

TEST_CASE("peer names: the name a peer's certificate must carry, and whether a gRPC auth "
          "context's names carry it", "[tls]") {
  CHECK(PeerCertificateName("10.0.0.7:7101", "") == "10.0.0.7");
  CHECK(PeerCertificateName("[::1]:7103", "") == "::1");
  CHECK(PeerCertificateName("cohort-1.cohort.svc:7101", "") == "cohort-1.cohort.svc");
  CHECK(PeerCertificateName("10.0.0.7:7101", "cohort") == "cohort");
  const std::vector<std::string> names = {"127.0.0.1", "localhost", "*.cohort.svc"};
  CHECK(CertificateCarries(names, "127.0.0.1"));
  CHECK(CertificateCarries(names, "LocalHost"));
  CHECK(CertificateCarries(names, "cohort-1.cohort.svc"));
  CHECK_FALSE(CertificateCarries(names, "127.0.0.2"));
  CHECK_FALSE(CertificateCarries(names, "a.b.cohort.svc"));  // one label only
  CHECK_FALSE(CertificateCarries(names, ".cohort.svc"));
  CHECK_FALSE(CertificateCarries({}, "127.0.0.1"));
}

}  // namespace cohort::nso
