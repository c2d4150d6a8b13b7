#include "membership/state_transfer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cohort::membership {

// ---- provider --------------------------------------------------------------------------------

StateSender::StateSender(View view, std::vector<NodeId> joiners, std::string meta,
                         uint64_t now_ms, uint64_t resend_ms, uint64_t give_up_at_ms)
    : view_(std::move(view)),
      joiners_(joiners.begin(), joiners.end()),
      meta_size_(meta.size()),
      resend_ms_(resend_ms),
      resend_at_ms_(now_ms + resend_ms),
      give_up_at_ms_(give_up_at_ms) {
  pieces_ = Cut(std::move(meta), false);
}

std::vector<StatePiece> StateSender::Cut(std::string bytes, bool last) {
  std::vector<StatePiece> out;
  if (bytes.empty() && !last) return out;
  if (bytes.size() <= kStateChunkBytes) {  // the common case: no copy
    uint64_t size = bytes.size();
    out.push_back({next_offset_, std::make_shared<const std::string>(std::move(bytes)), last});
    next_offset_ += size;
    return out;
  }
  for (size_t at = 0; at < bytes.size(); at += kStateChunkBytes) {
    auto piece = std::make_shared<const std::string>(bytes.substr(at, kStateChunkBytes));
    bool final_piece = at + kStateChunkBytes >= bytes.size();
    out.push_back({next_offset_, piece, last && final_piece});
    next_offset_ += piece->size();
  }
  return out;
}

std::vector<StatePiece> StateSender::Append(std::string servant_bytes, bool last) {
  if (complete_) return {};
  std::vector<StatePiece> fresh = Cut(std::move(servant_bytes), last);
  complete_ = last;
  pieces_.insert(pieces_.end(), fresh.begin(), fresh.end());
  return fresh;
}

bool StateSender::ResendDue(uint64_t now_ms) {
  if (now_ms < resend_at_ms_) return false;
  resend_at_ms_ = now_ms + resend_ms_;
  return !joiners_.empty();
}

// ---- joiner ----------------------------------------------------------------------------------

void StateReceiver::Begin(uint64_t view_id) {
  *this = StateReceiver();
  view_id_ = view_id;
  receiving_ = true;
}

void StateReceiver::Release(std::string bytes, Output* out) {
  if (!meta_released_) {
    size_t take = std::min<uint64_t>(bytes.size(), meta_size_ - meta_.size());
    meta_.append(bytes, 0, take);
    bytes.erase(0, take);
    next_offset_ += take;
    if (meta_.size() == meta_size_) {
      out->meta = std::move(meta_);
      meta_.clear();
      meta_released_ = true;
    }
  }
  if (bytes.empty()) return;
  uint64_t size = bytes.size();
  out->servant.push_back({next_offset_ - meta_size_, std::move(bytes), false});
  next_offset_ += size;
}

absl::Status StateReceiver::Add(uint64_t view_id, uint64_t offset, std::string bytes, bool last,
                                uint64_t meta_size, Output* out) {
  if (view_id != view_id_) {
    return absl::FailedPreconditionError(
        absl::StrCat("state chunk for view ", view_id, " while awaiting view ", view_id_));
  }
  if (!receiving_) return absl::OkStatus();  // a resent chunk after completion
  uint64_t end = offset + bytes.size();
  if (end < offset) return absl::InvalidArgumentError("state chunk offset overflows");
  if (meta_size_known_ && meta_size != meta_size_) {
    return absl::InvalidArgumentError(absl::StrCat("state chunk says the daemon part is ",
                                                   meta_size, " bytes, earlier chunks said ",
                                                   meta_size_));
  }
  if (last && end_ && *end_ != end) {
    return absl::InvalidArgumentError(
        absl::StrCat("state ends at ", end, " but an earlier last chunk ended it at ", *end_));
  }
  if ((end_ && end > *end_) || (last && end < next_offset_)) {
    return absl::InvalidArgumentError(absl::StrCat("state chunk [", offset, ", ", end,
                                                   ") lies past the end of the state"));
  }
  if (last && meta_size > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("state of ", end, " bytes cannot hold a daemon part of ", meta_size));
  }
  meta_size_ = meta_size;
  meta_size_known_ = true;
  if (last) end_ = end;
  if (offset > next_offset_) {  // ahead of a gap: held until the gap is filled
    if (!ahead_.count(offset) && buffered_bytes_ + bytes.size() <= kMaxBufferedBytes) {
      buffered_bytes_ += bytes.size();
      ahead_[offset] = std::move(bytes);
    }
    return absl::OkStatus();
  }
  if (end > next_offset_) {
    bytes.erase(0, next_offset_ - offset);  // an overlap with what was released
    Release(std::move(bytes), out);
  } else if (!meta_released_ && meta_size_ == 0) {
    Release("", out);
  }
  while (!ahead_.empty() && ahead_.begin()->first <= next_offset_) {
    auto it = ahead_.begin();
    uint64_t piece_end = it->first + it->second.size();
    buffered_bytes_ -= it->second.size();
    if (piece_end > next_offset_) {
      std::string piece = std::move(it->second);
      piece.erase(0, next_offset_ - it->first);
      ahead_.erase(it);
      Release(std::move(piece), out);
    } else {
      ahead_.erase(it);
    }
  }
  if (end_ && next_offset_ == *end_ && meta_released_) {
    if (out->servant.empty()) out->servant.push_back({next_offset_ - meta_size_, "", false});
    out->servant.back().last = true;
    out->complete = true;
    receiving_ = false;
    ahead_.clear();
    buffered_bytes_ = 0;
  }
  return absl::OkStatus();
}

}  // namespace cohort::membership
