// Length-prefixed frames on a byte stream (the raw TCP peer transport and the local fast path):
// a 4-byte little-endian length, then that many bytes of one protobuf message.
#ifndef COHORT_NSO_FRAMING_H_
#define COHORT_NSO_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace cohort::nso {

constexpr size_t kFrameLengthBytes = 4;

// A frame of peer envelopes holds at most this many bytes of them (one envelope larger than it
// goes alone). Batching many envelopes per frame (004 section 3.2) without a byte bound once made
// frames of more than 64 MiB out of a backlog of 16 KiB requests: over the raw TCP transport's
// write buffer bound (dropped whole) or gRPC's message size limit (the stream failed).
constexpr size_t kFrameBytesTarget = 4 << 20;

// The longest peer frame (or gRPC peer message) a daemon reads: one envelope may hold a managed
// call's replies (an open group's wait-for-all: up to limits.max_payload_bytes from each member).
constexpr size_t kPeerFrameBytesMax = 256 << 20;

inline void PutFrameLength(uint32_t length, std::string* out) {
  char bytes[kFrameLengthBytes] = {static_cast<char>(length & 0xff),
                                   static_cast<char>((length >> 8) & 0xff),
                                   static_cast<char>((length >> 16) & 0xff),
                                   static_cast<char>((length >> 24) & 0xff)};
  out->append(bytes, kFrameLengthBytes);
}

inline uint32_t GetFrameLength(const char* bytes) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 |
         static_cast<uint32_t>(b[2]) << 16 | static_cast<uint32_t>(b[3]) << 24;
}

// The bytes at `data` (`size` of them) start with a whole frame: its length and all its bytes.
inline bool WholeFrame(const char* data, size_t size) {
  return size >= kFrameLengthBytes && size - kFrameLengthBytes >= GetFrameLength(data);
}

// Appends the message as one frame (M: a protobuf message).
template <typename M>
void AppendFrame(const M& message, std::string* out) {
  PutFrameLength(static_cast<uint32_t>(message.ByteSizeLong()), out);
  message.AppendToString(out);
}

// After a write of `out` from `*offset` on: drops what was sent, all of it once everything went,
// else the sent half once it is over half the buffer (one move per many partial writes).
inline void DropSent(std::string* out, size_t* offset) {
  if (*offset == out->size()) {
    out->clear();
    *offset = 0;
  } else if (*offset > out->size() / 2) {
    out->erase(0, *offset);
    *offset = 0;
  }
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_FRAMING_H_
