#include "invocation/outside_fifo.h"

#include <algorithm>
#include <iterator>

namespace cohort::invocation {

OutsideFifo::Requests OutsideFifo::Admit(wire::Request request, bool predecessor_delivered,
                                         uint64_t now_ms) {
  Requests out;
  const uint64_t after = request.after_call_id();
  const ClientKey client = ClientOf(request);
  if (after == 0 || predecessor_delivered || proposed_.count({client, after}) > 0) {
    Propose(std::move(request), now_ms, &out);
    return out;
  }
  if (held_count_ >= max_held_) {
    ++overflowed_;
    Propose(std::move(request), now_ms, &out);
    return out;
  }
  std::vector<Held>& waiting = held_[{client, after}];
  for (const Held& held : waiting) {
    if (held.request.call_id() == request.call_id()) return out;  // a copy already waits
  }
  // Until its predecessor's daemon has given it up: that one left before this request, so by
  // this request's deadline (deadlines alike) it was ordered, or is no longer sent.
  const uint64_t hold_ms =
      std::max<uint64_t>(hold_max_ms_, request.deadline_ms() + kDeadlineSlackMs);
  holding_.insert({client, request.call_id()});
  waiting.push_back({std::move(request), now_ms + hold_ms, now_ms});
  ++held_count_;
  return out;
}

void OutsideFifo::Propose(wire::Request request, uint64_t now_ms, Requests* out) {
  // Iterative: a chain of held requests is proposed in its order (depth first, each one's
  // successors in the order they arrived). The stack is allocated only for a chain.
  std::vector<wire::Request> next;
  wire::Request current = std::move(request);
  while (true) {
    const CallKey key{ClientOf(current), current.call_id()};
    proposed_[key] = now_ms;
    holding_.erase(key);
    auto behind = held_.find(key);
    if (behind != held_.end()) {
      // Reversed onto the stack, so that they come out in the order they arrived.
      for (auto it = behind->second.rbegin(); it != behind->second.rend(); ++it) {
        next.push_back(std::move(it->request));
      }
      held_count_ -= behind->second.size();
      held_.erase(behind);
    }
    out->push_back(std::move(current));
    if (next.empty()) return;
    current = std::move(next.back());
    next.pop_back();
  }
}

void OutsideFifo::Delivered(const ClientKey& client, uint64_t call_id) {
  const CallKey key{client, call_id};
  proposed_.erase(key);
  auto behind = held_.find(key);
  if (behind == held_.end()) return;
  for (Held& held : behind->second) ready_.push_back(std::move(held.request));
  held_count_ -= behind->second.size();
  held_.erase(behind);
}

OutsideFifo::Requests OutsideFifo::TakeKnown(uint64_t now_ms, size_t* expired,
                                             const Known* known) {
  Requests out;
  if (known != nullptr) {
    for (auto it = held_.begin(); it != held_.end();) {
      if (!(*known)(it->first.first, it->first.second)) {
        ++it;
        continue;
      }
      for (Held& held : it->second) ready_.push_back(std::move(held.request));
      held_count_ -= it->second.size();
      it = held_.erase(it);
    }
  }
  std::vector<wire::Request> ready = std::move(ready_);
  ready_.clear();
  for (wire::Request& request : ready) Propose(std::move(request), now_ms, &out);
  std::vector<wire::Request> late;
  for (auto it = held_.begin(); it != held_.end();) {
    std::vector<Held>& waiting = it->second;
    for (auto held = waiting.begin(); held != waiting.end();) {
      if (now_ms >= held->until_ms) {
        late.push_back(std::move(held->request));
        held = waiting.erase(held);
        --held_count_;
      } else {
        ++held;
      }
    }
    it = waiting.empty() ? held_.erase(it) : std::next(it);
  }
  if (expired != nullptr) *expired = late.size();
  for (wire::Request& request : late) Propose(std::move(request), now_ms, &out);
  if (now_ms >= next_sweep_ms_) {
    // Proposals never delivered (lost with a view change): forgotten after remember_ms.
    next_sweep_ms_ = now_ms + 1000;
    for (auto it = proposed_.begin(); it != proposed_.end();) {
      if (now_ms >= it->second + remember_ms_) {
        proposed_.erase(it++);  // (a hash map's erase returns nothing; the others stay valid)
      } else {
        ++it;
      }
    }
  }
  return out;
}

std::vector<OutsideFifo::CallKey> OutsideFifo::Unseen(uint64_t now_ms, uint64_t wait_ms) {
  std::vector<CallKey> unseen;
  for (auto named = named_.begin(); named != named_.end();) {
    named = held_.count(named->first) == 0 ? named_.erase(named) : std::next(named);
  }
  for (const auto& [predecessor, waiting] : held_) {
    if (holding_.count(predecessor) > 0 || proposed_.count(predecessor) > 0) continue;
    uint64_t since_ms = now_ms;
    for (const Held& held : waiting) since_ms = std::min(since_ms, held.since_ms);
    if (now_ms < since_ms + wait_ms) continue;
    auto named = named_.find(predecessor);
    if (named != named_.end() && now_ms < named->second + 4 * wait_ms) continue;
    named_[predecessor] = now_ms;
    unseen.push_back(predecessor);
  }
  return unseen;
}

std::vector<wire::Request> OutsideFifo::Clear() {
  std::vector<wire::Request> dropped = std::move(ready_);
  for (auto& [key, waiting] : held_) {
    for (Held& held : waiting) dropped.push_back(std::move(held.request));
  }
  held_.clear();
  holding_.clear();
  held_count_ = 0;
  ready_.clear();
  proposed_.clear();
  named_.clear();
  return dropped;
}

}  // namespace cohort::invocation
