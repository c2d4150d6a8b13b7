// Systematic perturbation of the whole-stack simulation (test/stack_sim.h): every message of one
// run, in turn, is lost, delayed or delivered again late, one message per run. It is delay
// bounding with a bound of one (Emmi, Qadeer and Rakamaric, "Delay-bounded scheduling", POPL
// 2011): the seeded run is the default schedule, and each run deviates from it at one point.
// The random runs of cohort-sim --stack draw every delay from a small range; a single message
// that arrives a second late (after a view change that excluded its sender), arrives twice, or
// is the only one lost is rare among them, and is taken here at every point of a run.
//
// Runs are deterministic: a failing one replays with the command in PerturbReport::failures.
#ifndef COHORT_TEST_STACK_PERTURB_H_
#define COHORT_TEST_STACK_PERTURB_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "test/stack_sim.h"

namespace cohort::sim {

struct Perturbation {
  // kCrash: the message's sender crashes right after sending it (the rest of a multicast it was
  // sending is lost), when the run's fault model allows one more crash; it restarts without its
  // state when the faults stop.
  enum class Kind { kDrop, kDelay, kDuplicate, kCrash };
  Kind kind = Kind::kDelay;
  uint64_t ms = 0;  // kDelay: how much later; kDuplicate: how long after the original
  // kDelay, kDuplicate: the sender also crashes right after the message (a message of a dead
  // process that arrives late, maybe after it restarted and was added again).
  bool crash = false;
  // kCrash: the sender restarts (without its state) this long after its crash; 0: when the
  // faults stop.
  uint64_t restart_ms = 0;

  nso::MessagePerturbation At(uint64_t send) const;  // done to the send-th message of a run
};

// A second message singled out in each run (delay bounding with a bound of two, the second
// deviation near the first): the one `offset` sends after the first (1: the next message the
// perturbed run sends), one run per offset in first_offset..last_offset. E.g. a second crash
// in the midst of the view change that excludes the first.
struct ThenPerturbation {
  Perturbation perturbation;
  uint64_t first_offset = 1;
  uint64_t last_offset = 20;
};

// "drop", "crash", "delay:MS" or "duplicate:MS" (MS >= 1), "crash+delay:MS",
// "crash+duplicate:MS", or "restart:MS" (a crash, and a restart MS later).
absl::StatusOr<Perturbation> ParsePerturbation(const std::string& text);

// Which messages of the unperturbed run to single out: sends first..last (1-based; last 0: the
// last sent before the faults stop, StackSimResult::messages_sent_in_chaos; none after it)
// whose kind is in `kinds` (wire::Envelope's body field names: "consensus", "membership",
// "data", "heartbeat", "sequencer", "reply", "forward", "managed_reply"; empty: every kind),
// every `every`-th of those.
struct SendRange {
  uint64_t first = 1;
  uint64_t last = 0;
  uint64_t every = 1;
  std::vector<std::string> kinds;
};

// "consensus,membership,..." -> SendRange::kinds, each checked against wire::Envelope's bodies.
absl::StatusOr<std::vector<std::string>> ParseKinds(const std::string& text);

struct PerturbReport {
  uint64_t base_messages = 0;  // messages the unperturbed run sent before its faults stopped
  uint64_t runs = 0;
  uint64_t perturbed = 0;      // runs that sent the message singled out (a run may end sooner)
  uint64_t crashes = 0;        // runs in which a message's sender crashed after it
  uint64_t double_crashes = 0;  // runs in which both messages' senders crashed
  uint64_t diverged = 0;       // runs whose deliveries differ from the unperturbed run's
  uint64_t violations = 0;     // runs whose checks failed
  uint64_t one_way_lost = 0;   // one-way calls accepted by a daemon that stayed up, never applied
  // Runs that lost more such calls than the unperturbed run. With faults that cut a caller off
  // for most of its calls' deadline this is the documented limit; in a fault-free run, a bug.
  uint64_t lost_runs = 0;
  uint64_t calls_refused = 0;  // calls refused while their caller waited (out of client order)
  uint64_t views_max = 0;      // the most views any run installed
  // Runs in which a member counted a restarted process's predecessor by its incarnation file
  // (StackSimResult::restarts_named; StackSimOptions::incarnation_files).
  uint64_t named_runs = 0;
  std::map<std::string, uint64_t> kinds;  // runs by the kind of message singled out
  std::vector<std::string> failures;      // the first few: what broke, and the replay command
};

// The unperturbed run of `base`, then one run per message of `range`, each with that message
// perturbed (and, with `then`, one run per offset of the second message). `base.perturbations`
// is ignored.
PerturbReport RunPerturbations(StackSimOptions base, const Perturbation& perturbation,
                               const SendRange& range, const ThenPerturbation* then = nullptr);

}  // namespace cohort::sim

#endif  // COHORT_TEST_STACK_PERTURB_H_
