// counter-servant: the replicated counter of the demo. Attaches to one daemon and serves group
// `counter`: "add N" adds N and answers the new value, "get" answers the value.
//   counter-servant --daemon 127.0.0.1:7201 [--group counter] [--name replica-1]
//                   [--keep-state FILE]   (a durable group: Servant::KeepStateIn)
//                   [--views-to FILE]     (appends each view it gets: Servant::OnViewChange)
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "invocation/servant.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  std::string daemon = "127.0.0.1:7201", group = "counter", name = "counter", keep_state,
              views_to;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--daemon") daemon = argv[i + 1];
    else if (flag == "--group") group = argv[i + 1];
    else if (flag == "--name") name = argv[i + 1];
    else if (flag == "--keep-state") keep_state = argv[i + 1];
    else if (flag == "--views-to") views_to = argv[i + 1];
    else {
      std::fprintf(stderr, "counter-servant: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto servant = cohort::Servant::Create(daemon, group, name);
  if (!servant.ok()) {
    std::fprintf(stderr, "counter-servant: %s\n", servant.status().ToString().c_str());
    return 1;
  }
  int64_t value = 0;  // touched only by the servant's delivery thread
  (*servant)->Serve("add", [&](const std::string& payload) -> absl::StatusOr<std::string> {
    int64_t delta = 0;
    if (!absl::SimpleAtoi(payload, &delta)) {
      return absl::InvalidArgumentError(absl::StrCat("add: \"", payload, "\" is not an integer"));
    }
    value += delta;
    return absl::StrCat(value);
  });
  (*servant)->Serve("get", [&](const std::string&) -> absl::StatusOr<std::string> {
    return absl::StrCat(value);
  });
  // State transfer to a joining replica (membership): the counter is its whole state.
  (*servant)->OnGetState([&]() -> absl::StatusOr<std::string> { return absl::StrCat(value); });
  (*servant)->OnSetState([&](const std::string& state) -> absl::Status {
    if (!absl::SimpleAtoi(state, &value)) return absl::InvalidArgumentError("bad counter state");
    return absl::OkStatus();
  });
  // The group's views, in the delivery order: each comes after the same calls at every replica.
  if (!views_to.empty()) {
    (*servant)->OnViewChange([&](const cohort::GroupView& view) {
      std::vector<std::string> members;
      for (const cohort::ViewMember& member : view.members) members.push_back(member.name);
      const std::string line = absl::StrCat(
          name, ": view ", view.view_id, " [", absl::StrJoin(members, ","), "]",
          view.in_view ? "" : " (without this replica)", " after ", view.position,
          " deliveries, counter ", value, "\n");
      if (std::FILE* out = std::fopen(views_to.c_str(), "a")) {
        std::fputs(line.c_str(), out);
        std::fclose(out);
      }
    });
  }
  // A restart of the daemon (an upgrade, a crash) does not end this replica: it registers again
  // and gets the group's state.
  (*servant)->RejoinAfterDaemonRestart();
  // A durable group: the counter is kept on disk after every call, and a restart of every
  // member resumes from the most advanced value kept.
  if (!keep_state.empty()) (*servant)->KeepStateIn(keep_state);
  if (absl::Status status = (*servant)->Start(); !status.ok()) {
    std::fprintf(stderr, "counter-servant: %s\n", status.ToString().c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::printf("counter-servant %s serving group %s at %s\n", name.c_str(), group.c_str(),
              daemon.c_str());
  std::fflush(stdout);
  while (!g_stop) absl::SleepFor(absl::Milliseconds(50));
  (*servant)->Stop();
  return 0;
}
