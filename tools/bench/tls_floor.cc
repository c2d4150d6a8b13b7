#include "tools/bench/tls_floor.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "nso/tls_channel.h"
#include "nso/tls_files.h"
#include "tools/bench/floors.h"

namespace cohort::bench {
namespace {

absl::StatusOr<std::shared_ptr<nso::TlsContext>> Context(const std::string& ca_dir) {
  absl::StatusOr<std::string> ca = nso::ReadPem("ca", ca_dir + "/ca.pem");
  absl::StatusOr<std::string> cert = nso::ReadPem("certificate", ca_dir + "/daemon.pem");
  absl::StatusOr<std::string> key = nso::ReadPem("key", ca_dir + "/daemon.key");
  if (!ca.ok()) return ca.status();
  if (!cert.ok()) return cert.status();
  if (!key.ok()) return key.status();
  return nso::TlsContext::Create(*ca, *cert, *key);
}

// Blocking reads and writes through a channel (its socket is blocking: no wait is ever asked).
bool ReadAll(nso::TlsChannel* channel, char* data, size_t size) {
  while (size > 0) {
    nso::TlsWait wait;
    std::string error;
    ssize_t n = channel->Read(data, size, &wait, &error);
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

bool WriteAll(nso::TlsChannel* channel, const char* data, size_t size) {
  while (size > 0) {
    nso::TlsWait wait;
    std::string error;
    ssize_t n = channel->Write(data, size, &wait, &error);
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

void ServeConnection(std::shared_ptr<nso::TlsContext> context, int fd) {
  absl::StatusOr<std::unique_ptr<nso::TlsChannel>> channel =
      nso::TlsChannel::Create(*context, fd, /*dialer=*/false, "");
  std::string buffer;
  while (channel.ok()) {
    uint32_t length = 0;
    if (!ReadAll(channel->get(), reinterpret_cast<char*>(&length), sizeof(length))) break;
    uint32_t size = ntohl(length);
    if (size > (64u << 20)) break;
    buffer.resize(sizeof(length) + size);
    std::memcpy(buffer.data(), &length, sizeof(length));
    if (!ReadAll(channel->get(), buffer.data() + sizeof(length), size)) break;
    if (!WriteAll(channel->get(), buffer.data(), buffer.size())) break;
  }
  close(fd);
}

class TlsCaller {
 public:
  TlsCaller(int port, const std::string& payload, const std::string& ca_dir)
      : frame_(PingPongFrame(payload)) {
    reply_.resize(frame_.size());
    absl::StatusOr<std::shared_ptr<nso::TlsContext>> context = Context(ca_dir);
    if (!context.ok()) {
      error_ = std::string(context.status().message());
      return;
    }
    context_ = *std::move(context);
    fd_ = ConnectLoopbackNoDelay(port, &error_);
    if (fd_ < 0) return;
    absl::StatusOr<std::unique_ptr<nso::TlsChannel>> channel =
        nso::TlsChannel::Create(*context_, fd_, /*dialer=*/true, "127.0.0.1");
    if (!channel.ok()) {
      error_ = std::string(channel.status().message());
      return;
    }
    channel_ = *std::move(channel);
  }
  ~TlsCaller() {
    channel_.reset();
    if (fd_ >= 0) close(fd_);
  }
  bool Call(std::string* error) {
    if (!channel_) {
      *error = absl::StrCat("tls ping-pong: ", error_);
      return false;
    }
    if (!WriteAll(channel_.get(), frame_.data(), frame_.size()) ||
        !ReadAll(channel_.get(), reply_.data(), reply_.size())) {
      channel_.reset();
      error_ = "connection broken";
      *error = "tls ping-pong: connection broken";
      return false;
    }
    return true;
  }

 private:
  int fd_ = -1;
  std::shared_ptr<nso::TlsContext> context_;
  std::unique_ptr<nso::TlsChannel> channel_;
  std::string frame_;
  std::string reply_;
  std::string error_;
};

}  // namespace

int RunTlsEchoServer(int port, const std::string& ca_dir) {
  absl::StatusOr<std::shared_ptr<nso::TlsContext>> context = Context(ca_dir);
  if (!context.ok()) return 1;
  return ServeLoopback(port, [context = *context](int fd) { ServeConnection(context, fd); });
}

CallFactory TlsEchoCalls(int port, std::string payload, std::string ca_dir) {
  return [port, payload, ca_dir](int) -> CallFn {
    auto caller = std::make_shared<TlsCaller>(port, payload, ca_dir);
    return [caller](std::string* error) { return caller->Call(error); };
  };
}

}  // namespace cohort::bench
