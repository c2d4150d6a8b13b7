// A tiny blocking HTTP/1.0 server for the metrics endpoint: an accepting thread, and a thread per
// connection (at most kMaxConnections at once; more are answered 503 at once), GET only, bounded
// request size, 2 s to send the whole request and 2 s per write, `Connection: close` after every
// response. The handler runs for one request at a time. (Until session 53 one connection was
// served at a time, and one that sent a byte every 2 s held every scrape back for as long.)
#ifndef COHORT_NSO_HTTP_SERVER_H_
#define COHORT_NSO_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <list>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
  // Closes the socket and joins the threads (within about 2 s: a connection's deadline).
  void Stop();
  int port() const { return port_; }

  static constexpr int kMaxConnections = 8;
  static constexpr int kRequestDeadlineMs = 2000;

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  void Run();
  void ServeConnection(int fd);
  // Joins the connection threads that are done (all: also waits for the others).
  void Reap(bool all);

  Handler handler_;
  absl::Mutex handler_mu_;  // one request in the handler at a time
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::list<Connection> connections_;  // the accepting thread's
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_HTTP_SERVER_H_
