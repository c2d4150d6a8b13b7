// demo-client: invokes the replicated counter in every mode and prints each result and latency,
// then keeps 100 asynchronous calls in flight from one thread (Client::InvokeAsyncInto).
//   demo-client --daemon 127.0.0.1:7201 [--group counter]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "invocation/client.h"
#include "invocation/steady_time.h"

int main(int argc, char** argv) {
  std::string daemon = "127.0.0.1:7201", group = "counter";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--daemon") daemon = argv[i + 1];
    else if (flag == "--group") group = argv[i + 1];
  }
  auto client = cohort::Client::Connect(daemon, "demo-client");
  if (!client.ok()) {
    std::fprintf(stderr, "demo-client: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto view = (*client)->GroupDetails(group);
  if (!view.ok()) {
    std::fprintf(stderr, "demo-client: %s\n", view.status().ToString().c_str());
    return 1;
  }
  std::printf("group %s, view %lu, %s ordering, members:", view->group.c_str(), view->view_id,
              view->ordering.c_str());
  for (const auto& member : view->members) std::printf(" %s", member.name.c_str());
  std::printf("\n\n");
  int failures = 0;
  struct Step { cohort::Mode mode; const char* method; const char* payload; };
  const Step steps[] = {{cohort::Mode::kOneWay, "add", "1"},
                        {cohort::Mode::kFirst, "add", "10"},
                        {cohort::Mode::kMajority, "add", "100"},
                        {cohort::Mode::kAll, "add", "1000"},
                        {cohort::Mode::kAll, "get", ""}};
  for (const Step& step : steps) {
    auto start = std::chrono::steady_clock::now();
    auto result = (*client)->Invoke(group, step.method, step.payload, step.mode,
                                    absl::Seconds(5));
    double latency_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count();
    std::printf("%-18s %s(%s): ", cohort::invocation::ModeName(step.mode), step.method,
                step.payload);
    if (!result.ok()) {
      std::printf("FAILED %s  [%.2f ms]\n", result.status().ToString().c_str(), latency_ms);
      failures++;
      continue;
    }
    std::printf("%zu of %u replies wanted  [%.2f ms]\n", result->replies.size(), result->wanted,
                latency_ms);
    for (const cohort::Reply& reply : result->replies) {
      std::printf("    %-4s -> %s\n", reply.member.c_str(),
                  reply.status.ok() ? reply.payload.c_str() : reply.status.ToString().c_str());
    }
  }
  // 1,000 wait-for-all adds from this one thread, 100 in flight at a time: 100 calls kept by
  // this program (AsyncCall: request, replies and completion reused), each started again by
  // its own completion until 1,000 have started.
  constexpr int kCalls = 1000, kInFlight = 100;
  int started = 0, finished = 0, failed = 0;  // on the Client's callbacks thread once started
  cohort::internal::SteadyNotification all_done;  // its 60 s wait: the monotonic clock
  std::vector<std::unique_ptr<cohort::AsyncCall>> calls;
  for (int i = 0; i < kInFlight; ++i) {
    calls.push_back(std::make_unique<cohort::AsyncCall>([&](cohort::AsyncCall& call) {
      if (!call.status().ok() || call.replies().replies.size() < call.replies().wanted) failed++;
      if (started < kCalls) {
        started++;
        (*client)->InvokeAsyncInto(group, "add", "1", cohort::Mode::kAll, &call);
      }
      if (++finished == kCalls) all_done.Notify();  // last: main may go on
    }));
  }
  auto start = std::chrono::steady_clock::now();
  started = kInFlight;  // (before the first completion can run)
  for (auto& call : calls) {
    (*client)->InvokeAsyncInto(group, "add", "1", cohort::Mode::kAll, call.get());
  }
  bool done = all_done.WaitForNotificationWithTimeout(absl::Seconds(60));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!done) {
    // Calls still pending refer to `calls`: leave without unwinding.
    std::printf("\n%d asynchronous wait-for-all adds: NOT done in 60 s\n", kCalls);
    std::fflush(stdout);
    std::_Exit(1);
  }
  std::printf("\n%d asynchronous wait-for-all adds from one thread, %d in flight: done in %.0f ms "
              "(%.0f calls/s), %d failed\n", kCalls, kInFlight, seconds * 1000,
              kCalls / seconds, failed);
  if (failed > 0) failures++;
  auto total = (*client)->Invoke(group, "get", "", cohort::Mode::kAll, absl::Seconds(5));
  if (total.ok()) {
    for (const cohort::Reply& reply : total->replies) {
      std::printf("    %-4s -> %s\n", reply.member.c_str(), reply.payload.c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}
