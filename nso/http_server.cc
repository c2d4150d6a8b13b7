#include "nso/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace cohort::nso {
namespace {

constexpr size_t kMaxRequestBytes = 8192;

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 400: return "Bad Request";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

absl::Status HttpServer::Start(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("metrics.listen: host:port");
  std::string host = address.substr(0, colon);
  std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host == "*" || host == "0.0.0.0" ? nullptr : host.c_str(), port.c_str(),
                         &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.listen ", address, ": ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 16) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = ntohs(bound.ss_family == AF_INET6
                        ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      listen_fd_ = fd;
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on metrics.listen ", address, ": ", last_error));
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();  // it joins the connections' threads
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

void HttpServer::Run() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, 200);
    if (ready <= 0) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
      // Out of descriptors: the connection stays pending and poll says so at once; wait rather
      // than spin (until session 52 this thread took a core until a descriptor was free).
      ::poll(nullptr, 0, 100);
      continue;
    }
    if (fd < 0) continue;
    timeval timeout{kRequestDeadlineMs / 1000, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    Reap(/*all=*/false);
    if (connections_.size() >= static_cast<size_t>(kMaxConnections)) {
      WriteAll(fd, "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 5\r\n"
                   "Connection: close\r\n\r\nbusy\n");
      ::close(fd);
      continue;
    }
    Connection& connection = connections_.emplace_back();
    connection.thread = std::thread([this, fd, &connection] {
      ServeConnection(fd);
      ::close(fd);
      connection.done = true;
    });
  }
  Reap(/*all=*/true);
}

void HttpServer::Reap(bool all) {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!all && !it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    it = connections_.erase(it);
  }
}

void HttpServer::ServeConnection(int fd) {
  std::string request;
  char buffer[1024];
  // The whole request within the deadline (not each read: a client sending a byte at a time).
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestDeadlineMs);
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes || stopping_) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 200)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return;
    if (ready == 0) continue;
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  HttpResponse response;
  size_t line_end = request.find_first_of("\r\n");
  std::string line = request.substr(0, line_end);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos) {
    response = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else if (line.substr(0, sp1) != "GET" && line.substr(0, sp1) != "HEAD") {
    response = {405, "text/plain; charset=utf-8", "only GET\n"};
  } else {
    std::string path = line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos
                                                                      : sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    absl::MutexLock lock(&handler_mu_);
    response = handler_(path);
  }
  std::string head = absl::StrCat("HTTP/1.0 ", response.status, " ", Reason(response.status),
                                   "\r\nContent-Type: ", response.content_type,
                                   "\r\nContent-Length: ", response.body.size(),
                                   "\r\nConnection: close\r\n\r\n");
  WriteAll(fd, line.rfind("HEAD", 0) == 0 ? head : head + response.body);
}

}  // namespace cohort::nso
