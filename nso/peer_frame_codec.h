// A peer frame of envelopes, written and read without building a wire::PeerFrame. The bytes are
// those of wire::PeerFrame{frame: Frame{envelopes}} (proto/wire.proto), so either end may still
// use the generated classes; the raw TCP transport (tcp_transport.cc) writes each queued envelope
// straight into its write buffer and parses each envelope it reads into one reused object: no
// Frame, no repeated field, no per-envelope object on the hot path (omniORB2, 001 sections 5-6).
#ifndef COHORT_NSO_PEER_FRAME_CODEC_H_
#define COHORT_NSO_PEER_FRAME_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/wire.pb.h"

namespace cohort::nso {

// Bytes an envelope of `envelope_bytes` takes inside a frame (its field tag and length too).
size_t EnvelopeFieldBytes(size_t envelope_bytes);

// Appends the start of a length-prefixed peer frame (framing.h) whose envelopes take
// `body_bytes` in all (the sum of their EnvelopeFieldBytes); AppendEnvelope then adds each, in
// order. Returns the frame's length (without its 4-byte prefix).
size_t BeginEnvelopeFrame(size_t body_bytes, std::string* out);

// A batch written after an envelope's own bytes as a second occurrence of the envelope's field
// `envelope_field`, a message whose field `batch_field` is the batch; the parser merges it into
// the first occurrence (consensus::SharedBatch, transport.h SendWithBatch). Field numbers below
// 16 (one-byte tags).
struct AppendedBatch {
  const wire::MessageBatch* batch = nullptr;
  size_t bytes = 0;  // batch->ByteSizeLong(), cached in it
  uint32_t envelope_field = 0;
  uint32_t batch_field = 0;
};

// Bytes an appended batch of `batch_bytes` adds to an envelope.
size_t AppendedBatchBytes(size_t batch_bytes);

// Appends one envelope of the frame begun, given serialised (`envelope`, its bytes). With
// `appended`, the envelope read is `envelope` with the batch in it; its EnvelopeFieldBytes are
// then those of envelope.size() + AppendedBatchBytes(appended->bytes).
void AppendEnvelope(absl::string_view envelope, std::string* out,
                    const AppendedBatch* appended = nullptr);
// The same from the message: `envelope_bytes` is its ByteSizeLong(), called on this object after
// its last change (the serialisation uses the sizes that call cached).
void AppendEnvelope(const wire::Envelope& envelope, size_t envelope_bytes, std::string* out,
                    const AppendedBatch* appended = nullptr);

// Where one envelope read is parsed: an empty message (it may reuse or replace the last one,
// e.g. reset an arena), or `kept`: a message kept from earlier envelopes and emptied by hand for
// this one (KeptEnvelopes), which is merged into, not parsed into (a parse would Clear() it and
// free the objects it keeps).
struct EnvelopeTarget {
  wire::Envelope* envelope = nullptr;
  bool kept = false;
};

// Reads one peer frame's bytes (without its length prefix). Each envelope is parsed into the
// target `scratch` returns for it, given the number of the first field of the envelope's body
// (its oneof) in its bytes (0: none), and handed to `each`. A hello in the frame is skipped (the
// handshake parses its frame as a wire::PeerFrame), as are fields this version does not know.
// Returns an error naming what is malformed; the envelopes before it were handed on.
absl::Status ReadEnvelopeFrame(const char* data, size_t size,
                               absl::FunctionRef<EnvelopeTarget(uint32_t body_field)> scratch,
                               absl::FunctionRef<void(wire::Envelope&)> each);

}  // namespace cohort::nso

#endif  // COHORT_NSO_PEER_FRAME_CODEC_H_
