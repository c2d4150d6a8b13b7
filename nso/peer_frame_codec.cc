#include "nso/peer_frame_codec.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "nso/framing.h"

namespace cohort::nso {
namespace {

// Protobuf field tags (field number << 3 | wire type) of the fields this codec writes.
constexpr uint8_t kLengthDelimited = 2;
constexpr uint8_t kPeerFrameFrameTag = (2 << 3) | kLengthDelimited;  // PeerFrame.frame = 2
constexpr uint8_t kFrameEnvelopesTag = (1 << 3) | kLengthDelimited;  // Frame.envelopes = 1

// The tag of a length-delimited field numbered below 16: one byte.
char LengthDelimitedTag(uint32_t field) {
  return static_cast<char>((field << 3) | kLengthDelimited);
}

size_t VarintBytes(uint64_t value) {
  size_t bytes = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++bytes;
  }
  return bytes;
}

void PutVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Bytes of one protobuf message being read, field by field.
class FieldReader {
 public:
  FieldReader(const uint8_t* begin, const uint8_t* end) : at_(begin), end_(end) {}

  bool done() const { return at_ == end_; }

  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ == end_) return false;
      const uint8_t byte = *at_++;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }

  // A length-delimited value: its bytes, which must all be there.
  bool Bytes(const uint8_t** begin, size_t* size) {
    uint64_t length = 0;
    if (!Varint(&length) || length > static_cast<uint64_t>(end_ - at_)) return false;
    *begin = at_;
    *size = static_cast<size_t>(length);
    at_ += length;
    return true;
  }

  // Skips the value of a field of this tag's wire type (not the deprecated groups).
  bool Skip(uint64_t tag) {
    if ((tag >> 3) == 0) return false;  // field number 0: protobuf refuses it too
    uint64_t ignored = 0;
    const uint8_t* begin = nullptr;
    size_t size = 0;
    switch (tag & 7) {
      case 0:
        return Varint(&ignored);
      case 1:
        return Advance(8);
      case 2:
        return Bytes(&begin, &size);
      case 5:
        return Advance(4);
      default:
        return false;
    }
  }

 private:
  bool Advance(size_t bytes) {
    if (bytes > static_cast<size_t>(end_ - at_)) return false;
    at_ += bytes;
    return true;
  }

  const uint8_t* at_;
  const uint8_t* end_;
};

}  // namespace

size_t EnvelopeFieldBytes(size_t envelope_bytes) {
  return 1 + VarintBytes(envelope_bytes) + envelope_bytes;
}

size_t BeginEnvelopeFrame(size_t body_bytes, std::string* out) {
  const size_t frame_bytes = 1 + VarintBytes(body_bytes) + body_bytes;
  out->reserve(out->size() + kFrameLengthBytes + frame_bytes);
  PutFrameLength(static_cast<uint32_t>(frame_bytes), out);
  out->push_back(static_cast<char>(kPeerFrameFrameTag));
  PutVarint(body_bytes, out);
  return frame_bytes;
}

size_t AppendedBatchBytes(size_t batch_bytes) {
  const size_t inner = 1 + VarintBytes(batch_bytes) + batch_bytes;
  return 1 + VarintBytes(inner) + inner;
}

namespace {

// The field tag and length of an envelope of `envelope_bytes` (and `appended`).
void BeginEnvelope(size_t envelope_bytes, std::string* out, const AppendedBatch* appended) {
  const size_t extra = appended != nullptr ? AppendedBatchBytes(appended->bytes) : 0;
  out->push_back(static_cast<char>(kFrameEnvelopesTag));
  PutVarint(envelope_bytes + extra, out);
}

// Envelope{<envelope_field>: {<batch_field>: batch}} after the envelope's own bytes.
void AppendBatch(const AppendedBatch& appended, std::string* out) {
  out->push_back(LengthDelimitedTag(appended.envelope_field));
  PutVarint(1 + VarintBytes(appended.bytes) + appended.bytes, out);
  out->push_back(LengthDelimitedTag(appended.batch_field));
  PutVarint(appended.bytes, out);
  const size_t at = out->size();
  out->resize(at + appended.bytes);
  appended.batch->SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + at));
}

}  // namespace

void AppendEnvelope(absl::string_view envelope, std::string* out, const AppendedBatch* appended) {
  BeginEnvelope(envelope.size(), out, appended);
  out->append(envelope.data(), envelope.size());
  if (appended != nullptr) AppendBatch(*appended, out);
}

void AppendEnvelope(const wire::Envelope& envelope, size_t envelope_bytes, std::string* out,
                    const AppendedBatch* appended) {
  BeginEnvelope(envelope_bytes, out, appended);
  const size_t at = out->size();
  out->resize(at + envelope_bytes);
  envelope.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out->data() + at));
  if (appended != nullptr) AppendBatch(*appended, out);
}

namespace {

bool IsBodyField(uint64_t field) {
  switch (field) {
    case wire::Envelope::kConsensusFieldNumber:
    case wire::Envelope::kMembershipFieldNumber:
    case wire::Envelope::kDataFieldNumber:
    case wire::Envelope::kHeartbeatFieldNumber:
    case wire::Envelope::kSequencerFieldNumber:
    case wire::Envelope::kReplyFieldNumber:
    case wire::Envelope::kForwardFieldNumber:
    case wire::Envelope::kManagedReplyFieldNumber:
      return true;
    default:
      return false;
  }
}

// The number of the first body field in an envelope's bytes; 0 if none (or malformed before).
uint32_t FirstBodyField(const uint8_t* begin, size_t size) {
  FieldReader envelope(begin, begin + size);
  uint64_t tag = 0;
  while (!envelope.done() && envelope.Varint(&tag)) {
    if (IsBodyField(tag >> 3)) return static_cast<uint32_t>(tag >> 3);
    if (!envelope.Skip(tag)) return 0;
  }
  return 0;
}

// Parses `size` bytes into `target`: a merge into a kept message, which must take them all.
bool ParseEnvelope(const uint8_t* begin, size_t size, const EnvelopeTarget& target) {
  if (!target.kept) return target.envelope->ParseFromArray(begin, static_cast<int>(size));
  google::protobuf::io::CodedInputStream input(begin, static_cast<int>(size));
  return target.envelope->MergeFromCodedStream(&input) && input.ConsumedEntireMessage() &&
         input.CurrentPosition() == static_cast<int>(size);
}

}  // namespace

absl::Status ReadEnvelopeFrame(const char* data, size_t size,
                               absl::FunctionRef<EnvelopeTarget(uint32_t body_field)> scratch,
                               absl::FunctionRef<void(wire::Envelope&)> each) {
  const auto* begin = reinterpret_cast<const uint8_t*>(data);
  FieldReader frame(begin, begin + size);
  int envelopes = 0;
  while (!frame.done()) {
    uint64_t tag = 0;
    if (!frame.Varint(&tag)) return absl::InvalidArgumentError("malformed field tag in frame");
    if (tag != kPeerFrameFrameTag) {
      if (!frame.Skip(tag)) {
        return absl::InvalidArgumentError(absl::StrCat("malformed field (tag ", tag, ") in frame"));
      }
      continue;
    }
    const uint8_t* body_begin = nullptr;
    size_t body_size = 0;
    if (!frame.Bytes(&body_begin, &body_size)) {
      return absl::InvalidArgumentError("frame body longer than the frame");
    }
    FieldReader body(body_begin, body_begin + body_size);
    while (!body.done()) {
      if (!body.Varint(&tag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed field tag after envelope ", envelopes));
      }
      if (tag != kFrameEnvelopesTag) {
        if (!body.Skip(tag)) {
          return absl::InvalidArgumentError(absl::StrCat("malformed field (tag ", tag,
                                                         ") after envelope ", envelopes));
        }
        continue;
      }
      const uint8_t* envelope_begin = nullptr;
      size_t envelope_size = 0;
      if (!body.Bytes(&envelope_begin, &envelope_size)) {
        return absl::InvalidArgumentError(
            absl::StrCat("envelope ", envelopes + 1, " longer than its frame"));
      }
      const EnvelopeTarget target = scratch(FirstBodyField(envelope_begin, envelope_size));
      if (!ParseEnvelope(envelope_begin, envelope_size, target)) {
        return absl::InvalidArgumentError(
            absl::StrCat("envelope ", envelopes + 1, " of ", envelope_size, " bytes undecodable"));
      }
      ++envelopes;
      each(*target.envelope);
    }
  }
  return absl::OkStatus();
}

}  // namespace cohort::nso
