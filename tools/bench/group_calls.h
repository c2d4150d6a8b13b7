// The building blocks of the group rows (group_rows.h, embedded_rows.h) and of failover
// (failover.h): how the bench connects, its echo servants, the groups' YAML, waiting for a group
// to be ready, group calls as a workload, and one client's rows in every reply mode.
#ifndef COHORT_TOOLS_BENCH_GROUP_CALLS_H_
#define COHORT_TOOLS_BENCH_GROUP_CALLS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "invocation/client.h"
#include "invocation/servant.h"
#include "nso/embedded.h"
#include "tools/bench/options.h"
#include "tools/bench/report.h"
#include "tools/bench/workload.h"

namespace cohort::bench {

// How the bench's clients and servants connect to a daemon (TLS with --tls).
ConnectOptions BenchConnect(const std::string& name);

// An echo servant attached to one member daemon; counts what it is delivered.
struct EchoReplica {
  std::unique_ptr<Servant> servant;
  std::atomic<int64_t> delivered{0};

  absl::Status Start(const std::string& address, const std::string& group, int index);
  // Hosted by an embedded node of this process.
  absl::Status StartEmbedded(EmbeddedNode* node, const std::string& group,
                             bool dispatch_inline = false);

  absl::Status Serve(absl::StatusOr<std::unique_ptr<Servant>> created,
                     bool dispatch_inline = false);
};

// The daemons' groups section (daemons.h): `group` with members n1..nN and `ordering`, after
// --peer-transport's peer_transport line if it was given.
std::string GroupsYaml(const std::string& group, int n, const std::string& ordering);

// Waits until `client`'s daemon suspects nobody in `group` and a wait-for-all call succeeds.
absl::Status WaitReady(Client* client, const std::string& group, Style style,
                       absl::Duration timeout);

// A group call's result: true when the mode was met and every reply is OK, else why not.
bool RepliesOk(const absl::StatusOr<GroupReplies>& result, std::string* error);
bool RepliesOk(const GroupReplies& result, std::string* error);  // (as many as wanted, all OK)

// Caller i calls through clients[i % clients.size()] (one client: every caller through it).
CallFactory GroupCalls(std::vector<Client*> clients, const std::string& group, Mode mode,
                       Style style, std::string payload);

// Which rows a series of calls fills (GroupResult's key).
struct RowKey {
  int n;
  std::string ordering;
  std::string style;
  std::string attached_to;
};

// Once the group "bench" is ready for `call_style` calls from every client: one row per mode of
// `modes` that waits for replies, and a one-way row when `probe` (an in-process servant of the
// group, which counts deliveries) is given. Caller i calls through clients[i % clients.size()].
void MeasureReplyModes(const Options& options, const std::vector<Client*>& clients,
                       const RowKey& key, Style call_style, Report* report,
                       const EchoReplica* probe = nullptr,
                       const std::vector<Mode>& modes = {Mode::kFirst, Mode::kMajority, Mode::kAll,
                                                         Mode::kOneWay});

}  // namespace cohort::bench

#endif  // COHORT_TOOLS_BENCH_GROUP_CALLS_H_
