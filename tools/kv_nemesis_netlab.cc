// kv-nemesis: the lab's hosts with --netlab (tools/kv_nemesis_run.h): setting the lab up (the
// driver moves into the clients' host), one netlab command, and tearing the lab down.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/kv_nemesis_run.h"
#include "tools/kv_nemesis_util.h"

namespace cohort::kv_nemesis {

bool Run::SetUpLab() {
  setenv("NETLAB_PREFIX", lab_prefix_.c_str(), 1);
  setenv("NETLAB_NET", lab_net_.c_str(), 1);
  setenv("NETLAB_STATE", (o_.dir + "/netlab").c_str(), 0);  // unless given
  lab_up_ = true;
  if (Lab({"up", std::to_string(o_.nodes + 1)}) != 0) return false;
  std::string clients_ns = absl::StrCat("/run/netns/", lab_prefix_, "-h", o_.nodes + 1);
  int fd = open(clients_ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "kv-nemesis: cannot enter %s: %s\n", clients_ns.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return false;
  }
  close(fd);
  return true;
}

int Run::Lab(std::vector<std::string> args) {
  args.insert(args.begin(), o_.netlab);
  int rc = RunCommand(args, o_.dir + "/netlab.log");
  if (rc != 0) Note(absl::StrCat("netlab ", absl::StrJoin(args.begin() + 1, args.end(), " "),
                                 " FAILED (exit ", rc, ")"));
  return rc;
}

void Run::TearDownLab() {
  if (!lab_up_) return;
  lab_up_ = false;
  Lab({"down"});
}

}  // namespace cohort::kv_nemesis
