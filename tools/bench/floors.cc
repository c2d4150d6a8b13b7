#include "tools/bench/floors.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tools/bench/echo.grpc.pb.h"
#include "tools/subprocess.h"

namespace cohort::bench {
namespace {

class EchoService final : public Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const EchoMessage* request, EchoMessage* reply) override {
    reply->set_payload(request->payload());
    return grpc::Status::OK;
  }
};

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void ServeConnection(int fd) {
  std::string buffer;
  while (true) {
    uint32_t length = 0;
    if (!ReadAll(fd, reinterpret_cast<char*>(&length), sizeof(length))) break;
    uint32_t size = ntohl(length);
    if (size > (64u << 20)) break;
    buffer.resize(sizeof(length) + size);
    std::memcpy(buffer.data(), &length, sizeof(length));
    if (!ReadAll(fd, buffer.data() + sizeof(length), size)) break;
    if (!WriteAll(fd, buffer.data(), buffer.size())) break;
  }
  close(fd);
}

// A connected TCP ping-pong caller.
class TcpCaller {
 public:
  explicit TcpCaller(int port, const std::string& payload) : frame_(PingPongFrame(payload)) {
    reply_.resize(frame_.size());
    fd_ = ConnectLoopbackNoDelay(port, &error_);
  }
  ~TcpCaller() {
    if (fd_ >= 0) close(fd_);
  }
  bool Call(std::string* error) {
    if (fd_ < 0) {
      *error = error_;
      return false;
    }
    if (!WriteAll(fd_, frame_.data(), frame_.size()) ||
        !ReadAll(fd_, reply_.data(), reply_.size())) {
      *error = "tcp ping-pong: connection broken";
      close(fd_);
      fd_ = -1;
      error_ = *error;
      return false;
    }
    return true;
  }

 private:
  int fd_ = -1;
  std::string frame_;
  std::string reply_;
  std::string error_;
};

}  // namespace

int RunGrpcEchoServer(int port) {
  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  server->Wait();
  return 0;
}

int RunTcpEchoServer(int port) { return ServeLoopback(port, ServeConnection); }

int ServeLoopback(int port, std::function<void(int fd)> serve) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 512) != 0) {
    return 1;
  }
  while (true) {
    int fd = accept(listener, nullptr, nullptr);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    NoDelay(fd);
    std::thread(serve, fd).detach();  // one blocking thread per connection
  }
}

int ConnectLoopbackNoDelay(int port, std::string* error) {
  int fd = subprocess::ConnectLoopback(port);
  if (fd < 0) {
    *error = absl::StrCat("connect: ", std::strerror(errno));
    return -1;
  }
  NoDelay(fd);
  return fd;
}

std::string PingPongFrame(const std::string& payload) {
  uint32_t length = htonl(static_cast<uint32_t>(payload.size()));
  return std::string(reinterpret_cast<const char*>(&length), sizeof(length)) + payload;
}

CallFactory GrpcEchoCalls(std::shared_ptr<grpc::Channel> channel, std::string payload) {
  auto stub = std::shared_ptr<Echo::Stub>(Echo::NewStub(channel));
  return [stub, payload](int) -> CallFn {
    return [stub, payload](std::string* error) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      EchoMessage request;
      request.set_payload(payload);
      EchoMessage reply;
      grpc::Status status = stub->Echo(&context, request, &reply);
      if (!status.ok()) {
        *error = absl::StrCat("grpc echo: ", status.error_message());
        return false;
      }
      return true;
    };
  };
}

CallFactory TcpEchoCalls(int port, std::string payload) {
  return [port, payload](int) -> CallFn {
    auto caller = std::make_shared<TcpCaller>(port, payload);
    return [caller](std::string* error) { return caller->Call(error); };
  };
}

}  // namespace cohort::bench
