// local-calls-bench: the client stub's local fast path in isolation (invocation/local_calls.h),
// against its floor in the same run. A daemon end in this process (its own thread) answers every
// call frame at once; the floor is a raw round trip on a Unix socket to the same kind of end (one
// send, one blocking read, no stub). Prints p50 / p99 and calls/s for 1 and more callers, and the
// ratio of the stub's sequential p50 to the floor's: the stub's own cost per call.
//
//   bazel-bin/tools/bench/local-calls-bench [--calls N] [--callers LIST]
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "invocation/client.h"
#include "invocation/local_calls.h"
#include "nso/framing.h"
#include "nso/unix_address.h"
#include "proto/api.pb.h"

namespace cohort::internal {
namespace {

// The daemon's end: answers hello and every call frame at once (the call's payload back), in
// one write per read. Serves one connection, then returns.
void ServeEcho(int listen_fd) {
  int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) return;
  std::string in;
  std::string out;
  std::vector<char> chunk(1 << 16);
  api::LocalFrame frame;
  api::LocalFrame answer;
  while (true) {
    ssize_t got = read(fd, chunk.data(), chunk.size());
    if (got <= 0) break;
    in.append(chunk.data(), static_cast<size_t>(got));
    size_t at = 0;
    while (nso::WholeFrame(in.data() + at, in.size() - at)) {
      uint32_t length = nso::GetFrameLength(in.data() + at);
      frame.ParseFromArray(in.data() + at + nso::kFrameLengthBytes, static_cast<int>(length));
      at += nso::kFrameLengthBytes + length;
      answer.Clear();
      if (frame.has_hello()) {
        answer.mutable_hello()->set_version(frame.hello().version());
      } else {
        answer.mutable_result()->set_call(frame.call().call());
        answer.mutable_result()->mutable_reply()->add_replies()->set_payload(
            frame.call().invoke().payload());
      }
      nso::AppendFrame(answer, &out);
    }
    in.erase(0, at);
    if (!out.empty() && send(fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) break;
    out.clear();
  }
  close(fd);
}

// An abstract Unix socket of this process with an echo end serving one connection.
class EchoEnd {
 public:
  EchoEnd() {
    name_ = absl::StrCat("@cohort-local-calls-bench-", getpid(), "-", count_++);
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!nso::UnixAddress(name_, &address_, &length_) ||
        bind(listen_fd_, reinterpret_cast<sockaddr*>(&address_), length_) != 0 ||
        listen(listen_fd_, 4) != 0) {
      std::perror("local-calls-bench: bind");
      std::exit(1);
    }
    server_ = std::thread([this] { ServeEcho(listen_fd_); });
  }
  ~EchoEnd() {
    server_.join();
    close(listen_fd_);
  }
  LocalEndpoint endpoint() const { return LocalEndpoint{absl::StrCat("unix:", name_), 7, ""}; }
  int Connect() const {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address_), length_) != 0) {
      std::perror("local-calls-bench: connect");
      std::exit(1);
    }
    return fd;
  }

 private:
  static inline int count_ = 0;
  std::string name_;
  sockaddr_un address_{};
  socklen_t length_ = 0;
  int listen_fd_ = -1;
  std::thread server_;
};

struct Result {
  double p50_us = 0;
  double p99_us = 0;
  double per_second = 0;
};

Result Summarise(std::vector<double> latencies_us, absl::Duration took) {
  std::sort(latencies_us.begin(), latencies_us.end());
  Result result;
  result.p50_us = latencies_us[latencies_us.size() / 2];
  result.p99_us = latencies_us[latencies_us.size() * 99 / 100];
  result.per_second = static_cast<double>(latencies_us.size()) / absl::ToDoubleSeconds(took);
  return result;
}

api::LocalFrame CallFrame(uint64_t call, const std::string& payload) {
  api::LocalFrame frame;
  frame.mutable_call()->set_call(call);
  frame.mutable_call()->mutable_invoke()->set_payload(payload);
  return frame;
}

// The floor: one caller, one send and one blocking read per call, no stub.
Result RawRoundTrips(int calls, const std::string& payload) {
  EchoEnd end;
  int fd = end.Connect();
  std::string out;
  std::string in;
  std::vector<char> chunk(1 << 16);
  std::vector<double> latencies;
  const absl::Time start = absl::Now();
  for (int i = 0; i < calls; ++i) {
    const absl::Time sent = absl::Now();
    out.clear();
    nso::AppendFrame(CallFrame(i + 1, payload), &out);
    if (send(fd, out.data(), out.size(), MSG_NOSIGNAL) < 0) std::exit(1);
    in.clear();
    while (!nso::WholeFrame(in.data(), in.size())) {
      ssize_t got = read(fd, chunk.data(), chunk.size());
      if (got <= 0) std::exit(1);
      in.append(chunk.data(), static_cast<size_t>(got));
    }
    latencies.push_back(absl::ToDoubleMicroseconds(absl::Now() - sent));
  }
  Result result = Summarise(std::move(latencies), absl::Now() - start);
  close(fd);
  return result;
}

Result StubCalls(int calls, int callers, const std::string& payload) {
  EchoEnd end;
  absl::StatusOr<std::unique_ptr<LocalLink>> link = LocalLink::Open(end.endpoint(), absl::Seconds(5));
  if (!link.ok()) {
    std::fprintf(stderr, "local-calls-bench: %s\n", link.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<double> latencies;
  absl::Duration took;
  {
    LocalCalls stub(end.endpoint(), *std::move(link));
    api::InvokeRequest request;
    request.set_payload(payload);
    std::vector<std::vector<double>> by_caller(callers);
    std::vector<std::thread> threads;
    const absl::Time start = absl::Now();
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&, c] {
        for (int i = 0; i < calls / callers; ++i) {
          const absl::Time sent = absl::Now();
          auto result = stub.Invoke(request, absl::Seconds(10));
          if (!result.has_value() || !result->ok()) {
            std::fprintf(stderr, "local-calls-bench: a call failed\n");
            std::exit(1);
          }
          by_caller[c].push_back(absl::ToDoubleMicroseconds(absl::Now() - sent));
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    took = absl::Now() - start;
    for (const auto& some : by_caller) latencies.insert(latencies.end(), some.begin(), some.end());
  }  // the stub shuts its link: the echo end's connection ends
  return Summarise(std::move(latencies), took);
}

int Main(int argc, char** argv) {
  int calls = 20000;
  std::vector<int> callers = {1, 8, 64};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--calls" && i + 1 < argc && absl::SimpleAtoi(argv[i + 1], &calls) && calls > 0) {
      ++i;
    } else if (arg == "--callers" && i + 1 < argc) {
      callers.clear();
      for (absl::string_view part : absl::StrSplit(argv[++i], ',')) {
        int count = 0;
        if (!absl::SimpleAtoi(part, &count) || count < 1 || count > 256) {
          std::fprintf(stderr, "local-calls-bench: --callers takes numbers 1..256\n");
          return 2;
        }
        callers.push_back(count);
      }
    } else {
      std::fprintf(stderr, "usage: local-calls-bench [--calls N] [--callers LIST]\n");
      return 2;
    }
  }
  const std::string payload(100, 'x');
  Result floor = RawRoundTrips(calls, payload);
  std::printf("local-calls-bench: %d calls of 100 B per run, echo end in this process\n", calls);
  std::printf("%-22s %8s %8s %10s %9s\n", "run", "p50_us", "p99_us", "calls/s", "p50/raw");
  std::printf("%-22s %8.1f %8.1f %10.0f %9.2f\n", "raw unix round trip", floor.p50_us,
              floor.p99_us, floor.per_second, 1.0);
  for (int count : callers) {
    Result stub = StubCalls(calls, count, payload);
    std::printf("%-22s %8.1f %8.1f %10.0f %9.2f\n",
                absl::StrCat("stub, ", count, count == 1 ? " caller" : " callers").c_str(),
                stub.p50_us, stub.p99_us, stub.per_second, stub.p50_us / floor.p50_us);
  }
  return 0;
}

}  // namespace
}  // namespace cohort::internal

int main(int argc, char** argv) { return cohort::internal::Main(argc, argv); }
