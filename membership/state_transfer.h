// State transfer to joining members (004 section 5; issue 4): the member that proposed a view
// change reads the group's state in delivery order and streams it to the joiners in chunks; a
// joiner installs it before any delivery of its first view.
//
// The transferred bytes are one stream: first the daemon's part (a serialised wire::GroupState
// without the servant's state: reply cache, delivery count), `meta_size` bytes long, then the
// servant's state as the servant streams it. Neither side assembles the servant's part: the
// provider keeps each chunk once (for resending) and forwards it as it comes; the joiner hands
// each chunk, in order, to its servant as it arrives. Chunks may be lost, duplicated or reordered.
//
// Pure state machines: no I/O, no clock (time comes in as now_ms).
#ifndef COHORT_MEMBERSHIP_STATE_TRANSFER_H_
#define COHORT_MEMBERSHIP_STATE_TRANSFER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "membership/view.h"

namespace cohort::membership {

inline constexpr size_t kStateChunkBytes = 256 * 1024;

// One chunk on the wire: `bytes` start at `offset` of the stream; `last` marks the final chunk.
struct StatePiece {
  uint64_t offset = 0;
  std::shared_ptr<const std::string> bytes;
  bool last = false;
};

// Provider side: the state of one view for its joiners.
class StateSender {
 public:
  // `resend_ms`: how often everything so far is resent to joiners not yet heard in the view;
  // the transfer is dropped at `give_up_at_ms` (a joiner that never answers asks again).
  StateSender(View view, std::vector<NodeId> joiners, std::string meta, uint64_t now_ms,
              uint64_t resend_ms, uint64_t give_up_at_ms);

  const View& view() const { return view_; }
  uint64_t meta_size() const { return meta_size_; }
  const std::set<NodeId>& joiners() const { return joiners_; }
  bool complete() const { return complete_; }
  // Nothing left to do: every joiner heard in the view, or given up.
  bool done(uint64_t now_ms) const { return joiners_.empty() || now_ms >= give_up_at_ms_; }

  // The pieces so far (the meta part is the first), to send to every joiner at the start.
  const std::vector<StatePiece>& pieces() const { return pieces_; }
  // The next part of the servant's state (`last`: it is complete). Returns the new pieces (cut
  // to kStateChunkBytes) to send now to every joiner.
  std::vector<StatePiece> Append(std::string servant_bytes, bool last);
  // `joiner` needs nothing more (it acknowledged the state, or left the view).
  void JoinerDone(NodeId joiner) { joiners_.erase(joiner); }
  // True when everything so far is due to be resent (chunks may have been lost).
  bool ResendDue(uint64_t now_ms);

 private:
  std::vector<StatePiece> Cut(std::string bytes, bool last);

  View view_;
  std::set<NodeId> joiners_;
  uint64_t meta_size_ = 0;
  uint64_t next_offset_ = 0;
  bool complete_ = false;
  std::vector<StatePiece> pieces_;
  uint64_t resend_ms_;
  uint64_t resend_at_ms_;
  uint64_t give_up_at_ms_;
};

// Joiner side: reassembles the daemon's part and releases the servant's part in order.
class StateReceiver {
 public:
  struct ServantChunk {
    uint64_t offset = 0;  // in the servant's state
    std::string bytes;
    bool last = false;
  };
  struct Output {
    std::optional<std::string> meta;      // the daemon's part, once complete
    std::vector<ServantChunk> servant;    // the servant's part, in order
    bool complete = false;                // the whole state has been released
  };

  // Starts receiving the state of view `view_id` (forgetting any other).
  void Begin(uint64_t view_id);
  uint64_t view_id() const { return view_id_; }
  bool receiving() const { return receiving_; }
  // Bytes held for chunks that arrived ahead of a gap.
  uint64_t buffered_bytes() const { return buffered_bytes_; }

  // A chunk of the state of `view_id`. Errors name what is inconsistent (the chunk is dropped).
  absl::Status Add(uint64_t view_id, uint64_t offset, std::string bytes, bool last,
                   uint64_t meta_size, Output* out);

  // Chunks ahead of a gap are held up to this many bytes (beyond: dropped, and resent later).
  static constexpr uint64_t kMaxBufferedBytes = 64ull << 20;

 private:
  void Release(std::string bytes, Output* out);

  uint64_t view_id_ = 0;
  bool receiving_ = false;
  uint64_t meta_size_ = 0;
  bool meta_size_known_ = false;
  uint64_t next_offset_ = 0;            // everything before has been released
  std::optional<uint64_t> end_;         // the stream's size, once the last chunk is seen
  std::map<uint64_t, std::string> ahead_;  // by offset
  uint64_t buffered_bytes_ = 0;
  std::string meta_;
  bool meta_released_ = false;
};

}  // namespace cohort::membership

#endif  // COHORT_MEMBERSHIP_STATE_TRANSFER_H_
