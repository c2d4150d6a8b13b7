#include "nso/metrics.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"

namespace cohort::nso {
namespace {

std::string FormatValue(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  return buffer;
}

}  // namespace

std::string PromWriter::EscapeLabel(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PromWriter::Family(absl::string_view name, absl::string_view type, absl::string_view help) {
  absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

void PromWriter::Sample(absl::string_view name, const Labels& labels, double value) {
  absl::StrAppend(&text_, name);
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      absl::StrAppend(&text_, labels[i].first, "=\"", EscapeLabel(labels[i].second), "\"");
    }
    text_ += '}';
  }
  absl::StrAppend(&text_, " ", FormatValue(value), "\n");
}

void InvocationMetrics::RecordInvocation(absl::string_view mode, absl::string_view code,
                                         double seconds) {
  absl::MutexLock lock(&mu_);
  calls_[{std::string(mode), std::string(code)}]++;
  Histogram& h = latency_[std::string(mode)];
  h.count++;
  h.sum += seconds;
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      h.buckets[i]++;
      break;
    }
  }
}

void InvocationMetrics::RecordMulticast(absl::string_view code) {
  absl::MutexLock lock(&mu_);
  multicasts_[std::string(code)]++;
}

void InvocationMetrics::RecordClientCutOff(absl::string_view path) {
  absl::MutexLock lock(&mu_);
  clients_cut_off_[std::string(path)]++;
}

uint64_t InvocationMetrics::invocations() const {
  absl::MutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& [key, count] : calls_) total += count;
  return total;
}

void InvocationMetrics::Render(PromWriter* out) const {
  absl::MutexLock lock(&mu_);
  out->Family("cohort_invocations_total", "counter",
              "Group invocations through the client API, by mode and final gRPC status.");
  for (const auto& [key, count] : calls_) {
    out->Sample("cohort_invocations_total", {{"mode", key.first}, {"code", key.second}},
                static_cast<double>(count));
  }
  out->Family("cohort_invocation_duration_seconds", "histogram",
              "Latency of group invocations as seen by the daemon, by mode.");
  for (const auto& [mode, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      out->Sample("cohort_invocation_duration_seconds_bucket",
                  {{"mode", mode}, {"le", FormatValue(kBuckets[i])}},
                  static_cast<double>(cumulative));
    }
    out->Sample("cohort_invocation_duration_seconds_bucket", {{"mode", mode}, {"le", "+Inf"}},
                static_cast<double>(h.count));
    out->Sample("cohort_invocation_duration_seconds_sum", {{"mode", mode}}, h.sum);
    out->Sample("cohort_invocation_duration_seconds_count", {{"mode", mode}},
                static_cast<double>(h.count));
  }
  out->Family("cohort_multicasts_total", "counter",
              "Totally ordered multicasts through the client API, by gRPC status.");
  for (const auto& [code, count] : multicasts_) {
    out->Sample("cohort_multicasts_total", {{"code", code}}, static_cast<double>(count));
  }
  out->Family("cohort_clients_cut_off_total", "counter",
              "Clients cut off with 64 MiB of results not taken (they do not read), by path.");
  for (const auto& [path, count] : clients_cut_off_) {
    out->Sample("cohort_clients_cut_off_total", {{"path", path}}, static_cast<double>(count));
  }
}

namespace {

// The samples of one family with a `group` label: written as they come, or (not per group)
// summed by the family's other labels and written by Finish.
class GroupFamily {
 public:
  GroupFamily(PromWriter* out, bool per_group, absl::string_view name)
      : out_(out), per_group_(per_group), name_(name) {}
  void Add(const std::string& group, const PromWriter::Labels& others, double value) {
    if (!per_group_) {
      sums_[others] += value;
      return;
    }
    PromWriter::Labels labels = {{"group", group}};
    labels.insert(labels.end(), others.begin(), others.end());
    out_->Sample(name_, labels, value);
  }
  void Finish() {
    for (const auto& [labels, sum] : sums_) out_->Sample(name_, labels, sum);
  }

 private:
  PromWriter* const out_;
  const bool per_group_;
  const std::string name_;
  std::map<PromWriter::Labels, double> sums_;
};

}  // namespace

void RenderSnapshot(const NodeSnapshot& snapshot, PromWriter* out, bool per_group_series) {
  out->Family("cohort_groups", "gauge", "Groups this daemon hosts.");
  out->Sample("cohort_groups", {}, static_cast<double>(snapshot.groups.size()));
  // Summed over the groups without metrics.per_group: a gauge of 0s and 1s counts the groups,
  // and a counter keeps what the groups removed had counted (snapshot.removed_groups), so that
  // it never falls (with a series per group, a removed group's series ends instead).
  const bool keep_removed = !per_group_series;
  auto per_group = [&](absl::string_view name, absl::string_view type, absl::string_view help,
                       auto value_of) {
    out->Family(name, type, help);
    GroupFamily family(out, per_group_series, name);
    for (const GroupSnapshot& g : snapshot.groups) {
      family.Add(g.name, {}, static_cast<double>(value_of(g)));
    }
    if (keep_removed && type == "counter") {
      family.Add("", {}, static_cast<double>(value_of(snapshot.removed_groups)));
    }
    family.Finish();
  };
  if (per_group_series) {  // a sum of view ids would mean nothing
    per_group("cohort_group_view_id", "gauge", "Current view id of the group.",
              [](const GroupSnapshot& g) { return g.view_id; });
  }
  per_group("cohort_group_view_members", "gauge", "Members in the current view.",
            [](const GroupSnapshot& g) { return g.members.size(); });
  per_group("cohort_group_trusted_members", "gauge",
            "View members the failure detector does not suspect.",
            [](const GroupSnapshot& g) { return g.trusted; });
  per_group("cohort_group_has_majority", "gauge",
            "1 when a majority of the configured members is trusted (or this daemon is no member).",
            [](const GroupSnapshot& g) { return g.HasMajority() ? 1 : 0; });
  per_group("cohort_group_is_member", "gauge", "1 when this daemon hosts a replica of the group.",
            [](const GroupSnapshot& g) { return g.is_member ? 1 : 0; });
  per_group("cohort_heartbeats_sent_total", "counter", "I-am-alive messages sent.",
            [](const GroupSnapshot& g) { return g.counters.heartbeats_sent; });
  per_group("cohort_group_envelopes_sent_total", "counter", "Group envelopes sent to members.",
            [](const GroupSnapshot& g) { return g.counters.envelopes_sent; });
  per_group("cohort_view_changes_total", "counter", "Views installed after the first.",
            [](const GroupSnapshot& g) { return g.counters.view_changes; });
  per_group("cohort_order_messages_withheld_total", "counter",
            "Messages that make an order (proposals, ACKs, sequence numbers) not sent in a view "
            "this daemon had heard was over.",
            [](const GroupSnapshot& g) { return g.counters.order_messages_withheld; });
  per_group("cohort_group_refounded_total", "counter",
            "Times this daemon re-founded the group: a majority of its view had restarted and it "
            "held the most state left (what their earlier processes agreed without it is lost).",
            [](const GroupSnapshot& g) { return g.counters.refounded; });
  per_group("cohort_group_restarts_named_total", "counter",
            "Restarted daemons never heard in the view that said which process they follow "
            "(incarnation_file): the view counted that one and re-added them with the state.",
            [](const GroupSnapshot& g) { return g.counters.restarts_named; });
  per_group("cohort_group_all_restarted_total", "counter",
            "Times every member of the configured view was a restarted daemon (incarnation "
            "files): the group started afresh, without the state of their earlier processes.",
            [](const GroupSnapshot& g) { return g.counters.all_restarted; });
  per_group("cohort_group_recovered_from_kept_total", "counter",
            "Times this daemon re-founded a durable group from the state its servant kept on "
            "disk: no member held the group's state but on disk, and its was the most advanced.",
            [](const GroupSnapshot& g) { return g.counters.recovered_from_kept; });
  per_group("cohort_suspicions_total", "counter",
            "Members suspected by the aggressive timeout (OGS s5) or on a closed connection.",
            [](const GroupSnapshot& g) { return g.counters.suspicions; });
  per_group("cohort_suspicions_on_disconnect_total", "counter",
            "Of the suspicions, those because the member's peer connection closed "
            "(failure_detector.suspect_on_disconnect).",
            [](const GroupSnapshot& g) { return g.counters.suspicions_on_disconnect; });
  per_group("cohort_suspect_timeouts_raised_total", "counter",
            "Wrong suspicions (the member was heard again) that doubled its suspicion timeout, "
            "up to 16 x failure_detector.suspect_timeout_ms; it halves back after an exclusion "
            "timeout without one.",
            [](const GroupSnapshot& g) { return g.counters.suspect_timeouts_raised; });
  per_group("cohort_group_flow_held_requests", "gauge",
            "Requests of this daemon's clients waiting for a member's servants to catch up "
            "(flow control, limits.servant_backlog_bytes).",
            [](const GroupSnapshot& g) { return g.flow_held; });
  per_group("cohort_group_flow_holding", "gauge",
            "1 while a member's servants are behind and the group's new requests wait.",
            [](const GroupSnapshot& g) { return g.flow_holding ? 1 : 0; });
  per_group("cohort_group_servants_behind", "gauge",
            "1 while this member's servants are behind its deliveries (it holds the group).",
            [](const GroupSnapshot& g) { return g.servants_behind ? 1 : 0; });
  per_group("cohort_group_servants_behind_total", "counter",
            "Times this member's servants fell behind (limits.servant_backlog_bytes unread).",
            [](const GroupSnapshot& g) { return g.times_behind; });
  per_group("cohort_reply_cache_calls", "gauge",
            "Calls of clients the reply cache keeps here, to answer a copy delivered again "
            "(those their daemons still await, at most 256 per client).",
            [](const GroupSnapshot& g) { return g.reply_cache_calls; });
  per_group("cohort_reply_cache_bytes", "gauge", "Bytes of the replies those calls keep.",
            [](const GroupSnapshot& g) { return g.reply_cache_bytes; });
  per_group("cohort_exclusions_total", "counter",
            "Members excluded from the view by the conservative timeout.",
            [](const GroupSnapshot& g) { return g.counters.exclusions; });

  out->Family("cohort_member_suspected", "gauge", "1 while the member is suspected.");
  GroupFamily suspected(out, per_group_series, "cohort_member_suspected");
  for (const GroupSnapshot& g : snapshot.groups) {
    for (const GroupSnapshot::Member& m : g.members) {
      suspected.Add(g.name, {{"member", m.name}}, m.suspected ? 1 : 0);
    }
  }
  suspected.Finish();
  out->Family("cohort_consensus_messages_sent_total", "counter",
              "Ordering protocol messages sent, by kind.");
  GroupFamily messages(out, per_group_series, "cohort_consensus_messages_sent_total");
  auto add_messages = [&](const GroupSnapshot& g) {
    const consensus::OrderCounters& o = g.order;
    const std::pair<const char*, uint64_t> kinds[] = {
        {"estimate", o.messages_sent_estimate}, {"proposal", o.messages_sent_proposal},
        {"ack", o.messages_sent_ack},           {"nack", o.messages_sent_nack},
        {"decision", o.messages_sent_decision}, {"decided", o.messages_sent_decided},
        {"data", o.messages_sent_data}};
    for (const auto& [kind, count] : kinds) {
      messages.Add(g.name, {{"kind", kind}}, static_cast<double>(count));
    }
  };
  for (const GroupSnapshot& g : snapshot.groups) {
    if (g.has_order_counters) add_messages(g);
  }
  if (keep_removed) add_messages(snapshot.removed_groups);
  messages.Finish();
  auto per_order = [&](absl::string_view name, absl::string_view help, auto value_of) {
    out->Family(name, "counter", help);
    GroupFamily family(out, per_group_series, name);
    for (const GroupSnapshot& g : snapshot.groups) {
      if (g.has_order_counters) family.Add(g.name, {}, static_cast<double>(value_of(g.order)));
    }
    if (keep_removed) {
      family.Add("", {}, static_cast<double>(value_of(snapshot.removed_groups.order)));
    }
    family.Finish();
  };
  per_order("cohort_consensus_instances_total", "Consensus instances decided.",
            [](const consensus::OrderCounters& o) { return o.instances_decided; });
  per_order("cohort_consensus_rounds_total", "Sum over decided instances of the deciding round.",
            [](const consensus::OrderCounters& o) { return o.rounds_total; });
  per_order("cohort_deliveries_total", "Messages delivered in total order.",
            [](const consensus::OrderCounters& o) { return o.messages_delivered; });
  out->Family("cohort_pending_calls", "gauge", "Invocations in flight at this daemon.");
  out->Sample("cohort_pending_calls", {}, static_cast<double>(snapshot.pending_calls));
  out->Family("cohort_unordered_requests", "gauge",
              "Requests of this daemon's clients not yet ordered (each client's bounded by "
              "limits.max_unordered_requests; beyond it its requests wait or are refused).");
  out->Sample("cohort_unordered_requests", {}, static_cast<double>(snapshot.unordered_requests));
  out->Family("cohort_unordered_bytes", "gauge",
              "Payload bytes of those requests (limits.max_unordered_bytes per client).");
  out->Sample("cohort_unordered_bytes", {}, static_cast<double>(snapshot.unordered_bytes));
  out->Family("cohort_nsos_attached", "gauge", "NSOs attached at this daemon (one per client).");
  out->Sample("cohort_nsos_attached", {}, static_cast<double>(snapshot.nsos_attached));
  out->Family("cohort_nsos_detached_idle_total", "counter",
              "NSOs detached after limits.nso_idle_ms unused (clients that went away).");
  out->Sample("cohort_nsos_detached_idle_total", {},
              static_cast<double>(snapshot.nsos_detached_idle));
  out->Family("cohort_nsos_detached_total", "counter",
              "NSOs detached by their clients (Cohort.Detach, e.g. a Client destroyed).");
  out->Sample("cohort_nsos_detached_total", {}, static_cast<double>(snapshot.nsos_detached));
  out->Family("cohort_clients_retired_total", "counter",
              "Departed clients whose replies every member of their groups was told to forget "
              "(result=\"retired\"), or that left with requests not yet ordered, whose replies "
              "stay (result=\"kept\").");
  out->Sample("cohort_clients_retired_total", {{"result", "retired"}},
              static_cast<double>(snapshot.clients_retired));
  out->Sample("cohort_clients_retired_total", {{"result", "kept"}},
              static_cast<double>(snapshot.clients_not_retired));
  out->Family("cohort_outside_unordered", "gauge",
              "One-way calls and multicasts this daemon sent to a group it is not a member of, "
              "not yet reported ordered (kept to be resent).");
  out->Sample("cohort_outside_unordered", {}, static_cast<double>(snapshot.outside_unordered));
  out->Family("cohort_outside_resent_total", "counter",
              "Such requests sent again (their request manager down or silent).");
  out->Sample("cohort_outside_resent_total", {}, static_cast<double>(snapshot.outside_resent));
  out->Family("cohort_outside_given_up_total", "counter",
              "Such requests no longer resent: not reported ordered by their deadline.");
  out->Sample("cohort_outside_given_up_total", {}, static_cast<double>(snapshot.outside_given_up));
  out->Family("cohort_standby_takeovers_total", "counter",
              "Closed calls from outside ordered by this member because the member named to "
              "order them was suspected or gone.");
  out->Sample("cohort_standby_takeovers_total", {}, static_cast<double>(snapshot.standby_takeovers));
  out->Family("cohort_outside_fifo_held_total", "counter",
              "Requests from outside that this member held until their client's previous request "
              "was ordered (FIFO per client across routes, after a failover).");
  out->Sample("cohort_outside_fifo_held_total", {}, static_cast<double>(snapshot.fifo_held));
  out->Family("cohort_outside_fifo_gave_up_total", "counter",
              "Of them, ordered without it: the previous request did not come in time.");
  out->Sample("cohort_outside_fifo_gave_up_total", {}, static_cast<double>(snapshot.fifo_gave_up));
  out->Family("cohort_outside_fifo_asked_total", "counter",
              "Of them, held for a previous request never seen here, which this member asked "
              "the client's daemon to send again (its forward was lost).");
  out->Sample("cohort_outside_fifo_asked_total", {}, static_cast<double>(snapshot.fifo_asked));
  out->Family("cohort_fifo_refused_total", "counter",
              "Requests delivered after a later request of the same client (one whose wait for "
              "it ran out, above) and refused with ABORTED at every member, not executed: FIFO "
              "per client holds.");
  out->Sample("cohort_fifo_refused_total", {}, static_cast<double>(snapshot.fifo_refused));
  out->Family("cohort_managers_silent_total", "counter",
              "Members this daemon sends requests through from outside their group found silent "
              "(no answer to probes for 2 x suspect_timeout_ms): their requests went to the next "
              "member.");
  out->Sample("cohort_managers_silent_total", {}, static_cast<double>(snapshot.managers_silent));
  out->Family("cohort_servants_cut_off_total", "counter",
              "Servants cut off for not reading what they are sent "
              "(limits.servant_cutoff_bytes unread).");
  out->Sample("cohort_servants_cut_off_total", {}, static_cast<double>(snapshot.servants_cut_off));
}

}  // namespace cohort::nso
