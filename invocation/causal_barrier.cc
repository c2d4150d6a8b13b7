#include "invocation/causal_barrier.h"

namespace cohort::invocation {

bool CausalBarrier::Admit(uint64_t nso, const std::string& group, uint64_t call_id,
                          uint64_t now_ms, Submit submit, size_t bytes) {
  return AdmitOrHold(nso, group, call_id, now_ms, bytes, [&submit] { return std::move(submit); });
}

bool CausalBarrier::AdmitOrHold(uint64_t nso, const std::string& group, uint64_t call_id,
                                uint64_t now_ms, size_t bytes,
                                absl::FunctionRef<Submit()> make_held) {
  PerNso& state = nsos_[nso];
  state.bytes += bytes;
  if (state.held.empty() && (state.unordered == state.lapsed || state.group == group)) {
    state.group = group;
    Track(nso, &state, call_id, now_ms, bytes);
    return true;
  }
  state.held.push_back({group, call_id, make_held(), bytes});
  return false;
}

void CausalBarrier::Track(uint64_t nso, PerNso* state, uint64_t call_id, uint64_t now_ms,
                          size_t bytes) {
  state->unordered++;
  tracked_[call_id] = {nso, bytes, false};
  by_admission_.emplace_back(now_ms, call_id);
}

void CausalBarrier::Release(uint64_t nso, PerNso* state, uint64_t now_ms,
                            std::vector<Submit>* out) {
  while (!state->held.empty() &&
         (state->unordered == state->lapsed || state->held.front().group == state->group)) {
    Held next = std::move(state->held.front());
    state->held.pop_front();
    state->group = next.group;
    Track(nso, state, next.call_id, now_ms, next.bytes);
    out->push_back(std::move(next.submit));
  }
  if (Count(*state) == 0) nsos_.erase(nso);
}

size_t CausalBarrier::Count(const PerNso& state) { return state.unordered + state.held.size(); }

void CausalBarrier::Uncount(PerNso* state, const Tracked& request) {
  state->bytes -= request.bytes;
  state->unordered--;
  if (request.lapsed) state->lapsed--;
}

std::vector<CausalBarrier::Submit> CausalBarrier::Ordered(uint64_t call_id, uint64_t now_ms) {
  std::vector<Submit> released;
  auto it = tracked_.find(call_id);
  if (it == tracked_.end()) return released;
  const Tracked request = it->second;
  tracked_.erase(it);
  auto state = nsos_.find(request.nso);
  if (state == nsos_.end()) return released;
  Uncount(&state->second, request);
  Release(request.nso, &state->second, now_ms, &released);
  return released;
}

void CausalBarrier::Forget(uint64_t call_id) {
  auto it = tracked_.find(call_id);
  if (it == tracked_.end()) return;
  const Tracked request = it->second;
  tracked_.erase(it);
  auto state = nsos_.find(request.nso);
  if (state == nsos_.end()) return;
  Uncount(&state->second, request);
  if (Count(state->second) == 0) nsos_.erase(state);
}

std::vector<CausalBarrier::Submit> CausalBarrier::Expire(uint64_t now_ms) {
  std::vector<Submit> released;
  while (!by_admission_.empty()) {
    const auto [admitted_ms, call_id] = by_admission_.front();
    auto it = tracked_.find(call_id);
    if (it != tracked_.end() && now_ms < admitted_ms + release_after_ms_) break;
    by_admission_.pop_front();
    if (it == tracked_.end()) continue;  // ordered meanwhile
    if (count_for_ms_ <= release_after_ms_) {
      for (Submit& submit : Ordered(call_id, now_ms)) released.push_back(std::move(submit));
      continue;
    }
    // Its causal wait lapses (what it held goes on), but it is still counted.
    const uint64_t nso = it->second.nso;
    auto state = nsos_.find(nso);
    if (state == nsos_.end()) continue;
    if (!it->second.lapsed) {
      it->second.lapsed = true;
      state->second.lapsed++;
      lapsed_by_admission_.emplace_back(admitted_ms, call_id);
    }
    Release(nso, &state->second, now_ms, &released);
  }
  while (!lapsed_by_admission_.empty()) {
    const auto [admitted_ms, call_id] = lapsed_by_admission_.front();
    if (tracked_.count(call_id) > 0 && now_ms < admitted_ms + count_for_ms_) break;
    lapsed_by_admission_.pop_front();
    Forget(call_id);
  }
  return released;
}

size_t CausalBarrier::held() const {
  size_t count = 0;
  for (const auto& [nso, state] : nsos_) count += state.held.size();
  return count;
}

bool CausalBarrier::Holds(uint64_t nso, uint64_t call_id) const {
  auto it = nsos_.find(nso);
  if (it == nsos_.end()) return false;
  for (const Held& held : it->second.held) {
    if (held.call_id == call_id) return true;
  }
  return false;
}

size_t CausalBarrier::in_flight(uint64_t nso) const {
  auto it = nsos_.find(nso);
  return it == nsos_.end() ? 0 : Count(it->second);
}

size_t CausalBarrier::in_flight_bytes(uint64_t nso) const {
  auto it = nsos_.find(nso);
  return it == nsos_.end() ? 0 : it->second.bytes;
}

size_t CausalBarrier::total_in_flight() const {
  size_t count = 0;
  for (const auto& [nso, state] : nsos_) count += Count(state);
  return count;
}

size_t CausalBarrier::total_in_flight_bytes() const {
  size_t bytes = 0;
  for (const auto& [nso, state] : nsos_) bytes += state.bytes;
  return bytes;
}

}  // namespace cohort::invocation
