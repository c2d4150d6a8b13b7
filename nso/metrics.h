// Operational metrics of one daemon in the Prometheus text exposition format (version 0.0.4).
//
// Two kinds of numbers: counters the gRPC threads update as calls finish (InvocationMetrics, lock
// protected, cheap), and a snapshot of the protocol state (groups, views, consensus counters) that
// the daemon samples on the protocol thread. PromWriter renders both.
#ifndef COHORT_NSO_METRICS_H_
#define COHORT_NSO_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "nso/group.h"

namespace cohort::nso {

// Builds the text format: one HELP/TYPE header per family, then its samples.
class PromWriter {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family; `type` is counter, gauge or histogram.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  void Sample(absl::string_view name, const Labels& labels, double value);
  const std::string& text() const { return text_; }

  static std::string EscapeLabel(absl::string_view value);

 private:
  std::string text_;
};

// Invocations through the client API, by mode and final status, with a latency histogram.
class InvocationMetrics {
 public:
  // Upper bounds of the latency buckets, seconds.
  static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                      0.025,  0.05,  0.1,    0.25,  0.5,
                                                      1,      2.5,   5,      10};

  // `mode`: one_way|first|majority|all|default; `code`: the gRPC status name (OK, UNAVAILABLE...).
  void RecordInvocation(absl::string_view mode, absl::string_view code, double seconds);
  void RecordMulticast(absl::string_view code);
  // A client cut off for not taking its results (ResultsCutoff, nso/api_service.h);
  // `path`: "grpc" or "local".
  void RecordClientCutOff(absl::string_view path);
  void Render(PromWriter* out) const;
  uint64_t invocations() const;  // total, for tests

 private:
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Histogram> latency_ ABSL_GUARDED_BY(mu_);  // by mode
  std::map<std::string, uint64_t> multicasts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> clients_cut_off_ ABSL_GUARDED_BY(mu_) = {{"grpc", 0},
                                                                          {"local", 0}};
};

// The protocol state of one hosted group, sampled on the protocol thread.
struct GroupSnapshot {
  std::string name;
  std::string ordering;
  bool durable = false;   // GroupConfig::durable
  bool resuming = false;  // Group::durable_claim: a restarted member waiting to resume
  uint64_t view_id = 0;
  bool is_member = false;
  uint32_t configured_members = 0;  // groups[].members in the YAML
  uint32_t trusted = 0;             // view members not suspected
  struct Member {
    std::string name;
    uint32_t node = 0;
    bool suspected = false;
  };
  std::vector<Member> members;      // the current view
  GroupCounters counters;
  // Flow control (nso/group_flow.h): requests of this daemon held, whether the group holds them
  // now, whether this member's servants are behind, and how often they fell behind.
  uint64_t flow_held = 0;
  bool flow_holding = false;
  bool servants_behind = false;
  uint64_t times_behind = 0;
  // The group's reply cache here (Node::reply_cache_size): calls kept, bytes of their replies.
  uint64_t reply_cache_calls = 0;
  uint64_t reply_cache_bytes = 0;
  bool has_order_counters = false;
  consensus::OrderCounters order;

  // A majority of the configured members is trusted (a non-member always has one).
  bool HasMajority() const { return !is_member || trusted >= configured_members / 2 + 1; }
};

struct NodeSnapshot {
  std::vector<GroupSnapshot> groups;
  // The counters of the groups the node removed (Node::removed_group_totals; its gauges unset):
  // added to the counter families summed over the groups (RenderSnapshot, per_group false).
  GroupSnapshot removed_groups;
  uint64_t pending_calls = 0;
  uint64_t unordered_requests = 0;  // clients' requests not yet ordered (Node::unordered_requests)
  uint64_t unordered_bytes = 0;
  uint64_t nsos_attached = 0;       // clients' NSOs now (Node::attached_nsos; Admin.Status)
  uint64_t nsos_detached_idle = 0;  // detached after limits.nso_idle_ms unused
  uint64_t nsos_detached = 0;       // detached by their clients (Cohort.Detach)
  uint64_t clients_retired = 0;     // Node::clients_retired, clients_not_retired
  uint64_t clients_not_retired = 0;
  // Requests from outside a group (Node::outside_counters, outside_unordered).
  uint64_t outside_unordered = 0;
  uint64_t outside_resent = 0;
  uint64_t outside_given_up = 0;
  uint64_t standby_takeovers = 0;
  uint64_t fifo_held = 0;      // requests from outside that waited for their predecessor here
  uint64_t fifo_gave_up = 0;   // ... and were ordered without it (it did not come in time)
  uint64_t fifo_asked = 0;     // ... whose predecessor, never seen here, was asked for
  uint64_t servants_cut_off = 0;  // Node::servants_cut_off
  uint64_t fifo_refused = 0;   // delivered after a later request of their client: not executed
  uint64_t managers_silent = 0;
};

// The per-group and consensus families of a snapshot.
// `per_group`: a series per group in each group family (label `group`); false: each such
// family summed over the groups, by its other labels (the view id is then left out), for a
// daemon hosting thousands of groups. cohort_groups counts them either way.
void RenderSnapshot(const NodeSnapshot& snapshot, PromWriter* out, bool per_group = true);

}  // namespace cohort::nso

#endif  // COHORT_NSO_METRICS_H_
