// Payload strings whose memory is reused on the thread that serves the daemon's sockets (its
// protocol thread): a result's reply payloads, once written to the client, and a servant's
// delivery, once written to the servant, hold the next payloads read (a peer's reply, a client's
// call, a servant's answer, a delivered request). Without it each of them allocated its
// characters once per call (issue 7: no per-message allocation, omniORB2, 001 sections 5-6).
// Requests from outside are reused the same way (SpareOutsideRequests).
#ifndef COHORT_NSO_SPARE_PAYLOADS_H_
#define COHORT_NSO_SPARE_PAYLOADS_H_

#include <string>
#include <utility>
#include <vector>

#include "consensus/spare.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

// This thread's spare payloads (at most 32, each of at most consensus::kSpareBytesMax).
inline consensus::SpareStrings& SparePayloads() {
  thread_local consensus::SpareStrings spare(32);
  return spare;
}

// A payload written out (into a frame or an envelope, which may be on an arena: its characters
// are taken from the string, which the arena's reset then drops empty) kept for a later read.
inline void KeepWrittenPayload(std::string* written) {
  if (!written->empty()) SparePayloads().Keep(std::move(*written));
}

// Requests whose objects and strings are reused the same way: a request from outside, once its
// member has ordered it (Node::ProposeFromOutside), holds the next one read (KeptEnvelopes): a
// request read allocated its method's and payload's strings, and the payload's characters.
class SpareRequests {
 public:
  static constexpr size_t kKept = 8;
  // Takes `*used`'s contents (it is left empty) unless kKept are kept or its payload is large.
  void Keep(wire::Request* used) {
    if (kept_.size() == kKept || used->payload().capacity() > consensus::kSpareBytesMax) return;
    if (kept_.capacity() == 0) kept_.reserve(kKept);
    kept_.emplace_back().Swap(used);
  }
  // Gives `*target`, a request about to be refilled, a kept one's objects if its payload has no
  // memory of its own (its contents are dropped).
  void Refill(wire::Request* target) {
    if (kept_.empty() || target->payload().capacity() > std::string().capacity()) return;
    target->Swap(&kept_.back());
    kept_.pop_back();
  }

 private:
  std::vector<wire::Request> kept_;
};

inline SpareRequests& SpareOutsideRequests() {
  thread_local SpareRequests spare;
  return spare;
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_SPARE_PAYLOADS_H_
