#include "invocation/reply_collector.h"

#include <algorithm>

namespace cohort::invocation {

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOneWay: return "one-way";
    case Mode::kFirst: return "wait-for-first";
    case Mode::kMajority: return "wait-for-majority";
    case Mode::kAll: return "wait-for-all";
  }
  return "?";
}

uint32_t RepliesWanted(Mode mode, uint32_t view_size) {
  switch (mode) {
    case Mode::kOneWay: return 0;
    case Mode::kFirst: return view_size > 0 ? 1 : 0;
    case Mode::kMajority: return view_size / 2 + 1;
    case Mode::kAll: return view_size;
  }
  return view_size;
}

bool ReplyCollector::complete() const {
  if (gone_.empty()) return replies_.size() >= wanted_;
  const auto counted = std::count_if(replies_.begin(), replies_.end(), [this](const MemberReply& r) {
    return std::find(gone_.begin(), gone_.end(), r.node) == gone_.end();
  });
  return static_cast<uint32_t>(counted) >= wanted_;
}

bool ReplyCollector::Add(MemberReply reply) {
  auto same = [&](const MemberReply& r) { return r.node == reply.node; };
  if (std::none_of(replies_.begin(), replies_.end(), same)) {
    if (replies_.empty()) replies_.reserve(std::max<uint32_t>(wanted_, 1));  // one allocation
    replies_.push_back(std::move(reply));
  }
  return complete();
}

void ReplyCollector::MemberGone(uint32_t node) {
  // Wait-for-first waits for one reply whatever the view; the others are counted against the
  // view that remains, never below one reply.
  if (mode_ == Mode::kFirst || mode_ == Mode::kOneWay || view_size_ <= 1) return;
  if (std::find(gone_.begin(), gone_.end(), node) != gone_.end()) return;
  gone_.push_back(node);
  view_size_--;
  wanted_ = RepliesWanted(mode_, view_size_);
}

}  // namespace cohort::invocation
