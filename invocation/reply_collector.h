// Reply collection for group invocation (003 section 2.1): one-way, wait-for-first,
// wait-for-majority and wait-for-all, counted against the current server view.
#ifndef COHORT_INVOCATION_REPLY_COLLECTOR_H_
#define COHORT_INVOCATION_REPLY_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort::invocation {

enum class Mode { kOneWay, kFirst, kMajority, kAll };

const char* ModeName(Mode mode);

// How many replies `mode` waits for in a server view of `view_size` members.
uint32_t RepliesWanted(Mode mode, uint32_t view_size);

struct MemberReply {
  uint32_t node = 0;        // daemon node id of the replica
  std::string member;       // its name
  absl::Status status;      // the servant's answer status
  std::string payload;
};

class ReplyCollector {
 public:
  ReplyCollector(Mode mode, uint32_t view_size)
      : mode_(mode), view_size_(view_size), wanted_(RepliesWanted(mode, view_size)) {}

  // Adds a reply; a second reply from the same node is ignored. Returns true once complete.
  bool Add(MemberReply reply);
  // A member left the server view (crash or exclusion): the mode is now counted against the
  // smaller view, so wait-for-all no longer waits for it (issue 5: "a member that crashes
  // mid-call is not waited for"). Its reply, if it came, is kept but no longer counted: the
  // replies counted are those of the view that remains (a member removed and added again as a
  // new process, answering from the old view, must not stand in for another member's reply).
  void MemberGone(uint32_t node);

  bool complete() const;
  uint32_t wanted() const { return wanted_; }
  const std::vector<MemberReply>& replies() const { return replies_; }
  std::vector<MemberReply> TakeReplies() { return std::move(replies_); }
  // Memory for the replies (a vector a finished call's result gave back, emptied): the call
  // then allocates none for them (issue 7). Only before the first reply.
  void GiveStorage(std::vector<MemberReply> storage) {
    if (!replies_.empty() || replies_.capacity() != 0) return;
    storage.clear();
    replies_ = std::move(storage);
  }

 private:
  Mode mode_;
  uint32_t view_size_;
  uint32_t wanted_;
  std::vector<MemberReply> replies_;
  std::vector<uint32_t> gone_;
};

}  // namespace cohort::invocation

#endif  // COHORT_INVOCATION_REPLY_COLLECTOR_H_
