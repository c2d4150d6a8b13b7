#include "test/stack_perturb.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "proto/wire.pb.h"

namespace cohort::sim {

absl::StatusOr<Perturbation> ParsePerturbation(const std::string& full_text) {
  Perturbation perturbation;
  std::string text = full_text;
  if (absl::StartsWith(text, "crash+")) {
    perturbation.crash = true;
    text = text.substr(6);
  }
  if (perturbation.crash && !absl::StartsWith(text, "delay:") &&
      !absl::StartsWith(text, "duplicate:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "perturbation \"", full_text, "\": crash+ goes with delay:MS or duplicate:MS"));
  }
  if (text == "drop" || text == "crash") {
    perturbation.kind = text == "drop" ? Perturbation::Kind::kDrop : Perturbation::Kind::kCrash;
    return perturbation;
  }
  std::string ms;
  if (absl::StartsWith(text, "delay:")) {
    perturbation.kind = Perturbation::Kind::kDelay;
    ms = text.substr(6);
  } else if (absl::StartsWith(text, "duplicate:")) {
    perturbation.kind = Perturbation::Kind::kDuplicate;
    ms = text.substr(10);
  } else if (absl::StartsWith(text, "restart:") && !perturbation.crash) {
    perturbation.kind = Perturbation::Kind::kCrash;
    ms = text.substr(8);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("perturbation \"", full_text,
                     "\": expected drop, crash, delay:MS, duplicate:MS, crash+delay:MS, "
                     "crash+duplicate:MS or restart:MS"));
  }
  uint64_t* value = perturbation.kind == Perturbation::Kind::kCrash ? &perturbation.restart_ms
                                                                    : &perturbation.ms;
  if (!absl::SimpleAtoi(ms, value) || *value < 1 || *value > 3600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("perturbation \"", full_text, "\": MS must be 1 to 3600000"));
  }
  return perturbation;
}

absl::StatusOr<std::vector<std::string>> ParseKinds(const std::string& text) {
  std::vector<std::string> kinds = absl::StrSplit(text, ',', absl::SkipEmpty());
  const google::protobuf::OneofDescriptor* body =
      wire::Envelope::descriptor()->FindOneofByName("body");
  for (const std::string& kind : kinds) {
    bool known = false;
    for (int i = 0; i < body->field_count(); ++i) known |= body->field(i)->name() == kind;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "message kind \"", kind, "\": expected ", "one of wire::Envelope's bodies (consensus, "
          "membership, data, heartbeat, sequencer, reply, forward, managed_reply)"));
    }
  }
  if (kinds.empty()) return absl::InvalidArgumentError("no message kind given");
  return kinds;
}

nso::MessagePerturbation Perturbation::At(uint64_t send) const {
  nso::MessagePerturbation message;
  message.send = send;
  message.drop = kind == Kind::kDrop;
  message.delay_ms = kind == Kind::kDelay ? ms : 0;
  message.duplicate_ms = kind == Kind::kDuplicate ? ms : 0;
  message.crash = kind == Kind::kCrash || crash;
  message.restart_ms = restart_ms;
  return message;
}

PerturbReport RunPerturbations(StackSimOptions base, const Perturbation& perturbation,
                               const SendRange& range, const ThenPerturbation* then) {
  base.perturbations.clear();
  base.record_send_kinds = true;
  PerturbReport report;
  const StackSimResult unperturbed = RunStackSimulation(base);
  report.base_messages = unperturbed.messages_sent_in_chaos;
  if (!unperturbed.ok) {
    ++report.violations;
    report.failures.push_back(absl::StrCat("the unperturbed run: ", unperturbed.violation,
                                           "\n  replay: ", ReplayCommand(base)));
    return report;
  }
  // Only messages sent while faults may happen: the liveness checks after them ask every call
  // to succeed over a network that loses nothing.
  const uint64_t sent = unperturbed.messages_sent_in_chaos;
  const uint64_t last = range.last == 0 ? sent : std::min(range.last, sent);
  // The sends to single out: those of the chosen kinds, every `every`-th.
  std::set<int> kinds;
  for (const std::string& kind : range.kinds) {
    kinds.insert(wire::Envelope::descriptor()->FindFieldByName(kind)->number());
  }
  std::vector<uint64_t> sends;
  for (uint64_t send = std::max<uint64_t>(range.first, 1); send <= last; ++send) {
    if (kinds.empty() || kinds.count(unperturbed.send_kinds[send - 1])) sends.push_back(send);
  }
  base.record_send_kinds = false;
  // Each run's perturbations: the first message alone, or with each offset of the second.
  std::vector<std::vector<nso::MessagePerturbation>> runs;
  const uint64_t every = std::max<uint64_t>(range.every, 1);
  for (size_t k = 0; k < sends.size(); k += every) {
    if (then == nullptr) {
      runs.push_back({perturbation.At(sends[k])});
      continue;
    }
    for (uint64_t offset = std::max<uint64_t>(then->first_offset, 1);
         offset <= then->last_offset; ++offset) {
      runs.push_back({perturbation.At(sends[k]), then->perturbation.At(sends[k] + offset)});
    }
  }
  for (std::vector<nso::MessagePerturbation>& perturbations : runs) {
    StackSimOptions options = base;
    options.perturbations = std::move(perturbations);
    const StackSimResult result = RunStackSimulation(options);
    ++report.runs;
    if (!result.perturbed.empty()) {
      ++report.perturbed;
      ++report.kinds[result.perturbed_kind];
    }
    if (result.perturb_crashes > 0) ++report.crashes;
    if (result.perturb_crashes > 1) ++report.double_crashes;
    if (result.trace_hash != unperturbed.trace_hash) ++report.diverged;
    report.one_way_lost += result.one_way_lost;
    report.calls_refused += result.calls_refused;
    report.views_max = std::max(report.views_max, result.views_installed);
    if (result.restarts_named > 0) ++report.named_runs;
    const bool lost = result.one_way_lost > unperturbed.one_way_lost;
    if (result.ok && !lost) continue;
    if (!result.ok) ++report.violations;
    if (lost) ++report.lost_runs;
    if (report.failures.size() < 10) {
      report.failures.push_back(absl::StrCat(
          result.perturbed, ": ",
          result.ok ? absl::StrCat(result.one_way_lost, " one-way calls lost (first: ",
                                   result.one_way_lost_example, ")")
                    : result.violation,
          "\n  replay: ", ReplayCommand(options), " --verbose"));
    }
  }
  return report;
}

}  // namespace cohort::sim
