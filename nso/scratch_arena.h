// Protobuf arenas for messages parsed or built and consumed at once on the hot path: the first
// block is the caller's (on the stack or a member), so a message that fits costs no allocation
// for its objects or short strings, and Reset() makes it ready for the next (omniORB2, 001
// sections 5-6: no per-message allocation). What outlives the message must be copied or moved
// out (protobuf copies between arenas).
#ifndef COHORT_NSO_SCRATCH_ARENA_H_
#define COHORT_NSO_SCRATCH_ARENA_H_

#include <cstddef>

#include "google/protobuf/arena.h"
#include "google/protobuf/message.h"
#include "google/protobuf/unknown_field_set.h"

namespace cohort::nso {

inline google::protobuf::ArenaOptions ArenaOn(char* block, size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;
  options.initial_block_size = size;
  return options;
}

// True if `message` itself holds no unknown fields (a newer peer's). A message kept and refilled
// on the hot path is emptied by hand, its objects kept (Clear() would delete a oneof's), only
// when this holds; otherwise it is cleared whole.
inline bool NoUnknownFields(const google::protobuf::Message& message) {
  return message.GetReflection()->GetUnknownFields(message).empty();
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_SCRATCH_ARENA_H_
