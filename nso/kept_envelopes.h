// Envelopes the raw TCP transport reads into, kept from one envelope to the next for the kinds on
// every call's path: a peer's reply, a request manager's managed reply, a request from outside, a
// consensus or a sequencer message (with its batch). Their objects and strings keep their memory, and a reply's payload,
// moved on to its call, is refilled from this thread's spare payloads (spare_payloads.h), so
// reading one allocates nothing once warm (issue 7: no per-message allocation, omniORB2, 001
// sections 5-6). Other kinds are parsed into an arena by the transport, as before.
#ifndef COHORT_NSO_KEPT_ENVELOPES_H_
#define COHORT_NSO_KEPT_ENVELOPES_H_

#include <cstdint>

#include "proto/wire.pb.h"

namespace cohort::nso {

class KeptEnvelopes {
 public:
  // The kept envelope for a body of field `body_field` (wire::Envelope's oneof), emptied for a
  // merge of one whose bytes have that body field; nullptr for other kinds. What it returned last
  // is emptied by the call (a receiver may have moved parts of it away: those are made again).
  wire::Envelope* For(uint32_t body_field);

 private:
  wire::Envelope reply_;
  wire::Envelope consensus_;
  wire::Envelope sequencer_;
  wire::Envelope managed_reply_;
  wire::Envelope forward_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_KEPT_ENVELOPES_H_
