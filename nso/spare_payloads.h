// Payload strings whose memory is reused on the thread that serves the daemon's sockets (its
// protocol thread): a result's reply payloads, once written to the client, and a servant's
// delivery, once written to the servant, hold the next payloads read (a peer's reply, a client's
// call, a servant's answer, a delivered request). Without it each of them allocated its
// characters once per call (issue 7: no per-message allocation, omniORB2, 001 sections 5-6).
#ifndef COHORT_NSO_SPARE_PAYLOADS_H_
#define COHORT_NSO_SPARE_PAYLOADS_H_

#include "consensus/spare.h"

namespace cohort::nso {

// This thread's spare payloads (at most 32, each of at most consensus::kSpareBytesMax).
inline consensus::SpareStrings& SparePayloads() {
  thread_local consensus::SpareStrings spare(32);
  return spare;
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_SPARE_PAYLOADS_H_
