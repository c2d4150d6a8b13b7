// demo-client: invokes the replicated counter in every mode and prints each result and latency.
//   demo-client --daemon 127.0.0.1:7201 [--group counter]
#include <chrono>
#include <cstdio>
#include <string>

#include "invocation/client.h"

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
  return failures == 0 ? 0 : 1;
}
