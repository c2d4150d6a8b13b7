#include "tools/bench/embedded_rows.h"

#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "invocation/client.h"
#include "nso/embedded.h"
#include "tools/bench/daemons.h"
#include "tools/bench/group_calls.h"
#include "tools/bench/measure.h"
#include "tools/bench/process.h"

namespace cohort::bench {

// ---- embedded mode ------------------------------------------------------------------------------

void MeasureEmbedded(const Options& options, const std::string& cohortd, const std::string& dir,
                     Report* report) {
  const std::string group = "bench";
  const int n = 3;
  const int embedded = 2;
  for (const char* ordering : {"consensus", "sequencer"}) {
    if (!options.WantOrdering(ordering)) continue;
    std::string cluster_dir = absl::StrCat(dir, "/embedded-", ordering);
    std::filesystem::create_directories(cluster_dir);
    Daemons daemons(cohortd, cluster_dir, n, GroupsYaml(group, n, ordering));
    std::string error;
    Progress(absl::StrCat("embedded n=3 ", ordering, ": 2 daemons + n2 in this process"));
    if (!daemons.Start(&error, embedded)) {
      Progress("cluster failed: " + error);
      continue;
    }
    auto node = EmbeddedNode::StartFromFile(daemons.ConfigPath(embedded));
    if (!node.ok()) {
      Progress("embedded node: " + node.status().ToString());
      continue;
    }
    std::vector<std::unique_ptr<EchoReplica>> replicas;
    bool ok = true;
    for (int i = 1; i <= n && ok; ++i) {
      replicas.push_back(std::make_unique<EchoReplica>());
      absl::Status started = i == embedded
                                 ? replicas.back()->StartEmbedded(node->get(), group)
                                 : replicas.back()->Start(daemons.ClientAddress(i), group, i);
      if (!started.ok()) {
        Progress(absl::StrCat("servant at n", i, ": ", started.ToString()));
        ok = false;
      }
    }
    auto client = (*node)->Connect("bench-embedded-client");
    if (ok && client.ok()) {
      MeasureReplyModes(options, {client->get()}, {n, ordering, "embed", "n2 (in-process)"},
                        Style::kClosed, report);
    }
    if (client.ok()) client->reset();
    replicas.clear();  // servants before the node
    (*node)->Shutdown();
    daemons.KillAll();
  }
}

// ---- application processes (every NSO embedded) -------------------------------------------------

int RunAppMember(const std::string& config, const std::string& group) {
  auto node = EmbeddedNode::StartFromFile(config);
  if (!node.ok()) {
    std::cerr << "app-member: " << node.status() << "\n";
    return 1;
  }
  EchoReplica replica;
  absl::Status started = replica.StartEmbedded(node->get(), group, /*dispatch_inline=*/true);
  if (!started.ok()) {
    std::cerr << "app-member: servant: " << started << "\n";
    return 1;
  }
  return replica.servant->Wait().ok() ? 0 : 1;
}

void MeasureApps(const Options& options, const std::string& dir, Report* report) {
  const std::string group = "bench";
  const std::string self = SelfExe();
  for (int n : options.sizes) {
    for (const char* ordering : {"consensus", "sequencer"}) {
    if (!options.WantOrdering(ordering)) continue;
      std::string cluster_dir = absl::StrCat(dir, "/apps-n", n, "-", ordering);
      std::filesystem::create_directories(cluster_dir);
      const int member = 2, outsider = n + 1;
      Daemons nodes("", cluster_dir, n + 1, GroupsYaml(group, n, ordering));
      std::string error;
      Progress(absl::StrCat("applications n=", n, " ", ordering, ": ", n - 1,
                            " member processes + n2 and n", outsider, " in this process"));
      bool started = nodes.StartWith(&error, {member, outsider}, [&](int i) -> std::vector<std::string> {
        return {self, "--role", "app-member", "--config", nodes.ConfigPath(i), "--group", group};
      });
      if (!started) {
        Progress("cluster failed: " + error);
        continue;
      }
      auto inside = EmbeddedNode::StartFromFile(nodes.ConfigPath(member));
      auto outside = EmbeddedNode::StartFromFile(nodes.ConfigPath(outsider));
      if (!inside.ok() || !outside.ok()) {
        Progress("embedded node: " + (inside.ok() ? outside.status() : inside.status()).ToString());
        continue;
      }
      EchoReplica replica;
      absl::Status served = replica.StartEmbedded(inside->get(), group, /*dispatch_inline=*/true);
      if (!served.ok()) {
        Progress("servant at n2: " + served.ToString());
        continue;
      }
      for (const char* style : {"app-closed", "app-open"}) {
        bool closed = std::string(style) == "app-closed";
        Style call_style = closed ? Style::kClosed : Style::kOpen;
        auto client = (closed ? *inside : *outside)->Connect("bench-app-client");
        if (!client.ok()) {
          Progress("connect: " + client.status().ToString());
          continue;
        }
        // One-way too: the servant of n2, in this process, counts what is delivered.
        MeasureReplyModes(options, {client->get()},
                          {n, ordering, style, absl::StrCat("n", closed ? member : outsider, " (in-process)")},
                          call_style, report, &replica);
      }
      replica.servant.reset();  // the servant before its node
      (*inside)->Shutdown();
      (*outside)->Shutdown();
      nodes.KillAll();
    }
  }
}

}  // namespace cohort::bench
