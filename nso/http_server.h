// A tiny blocking HTTP/1.0 server for the metrics endpoint: one thread, one connection at a time,
// GET only, bounded request size and I/O timeouts, `Connection: close` after every response.
#ifndef COHORT_NSO_HTTP_SERVER_H_
#define COHORT_NSO_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace cohort::nso {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HttpServer {
 public:
  // `handler` gets the request path (query string stripped) of every GET.
  using Handler = std::function<HttpResponse(const std::string& path)>;

  explicit HttpServer(Handler handler) : handler_(std::move(handler)) {}
  ~HttpServer() { Stop(); }

  // Binds `address` (host:port) and starts the serving thread.
  absl::Status Start(const std::string& address);
  // Closes the socket and joins the thread (within about 200 ms).
  void Stop();
  int port() const { return port_; }

 private:
  void Run();
  void ServeConnection(int fd);

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_HTTP_SERVER_H_
