#include "invocation/reply_cache.h"

#include <cstddef>
#include <iterator>

namespace cohort::invocation {

ReplyCache::Verdict ReplyCache::OnDelivery(ClientKey client, uint64_t call_id,
                                           const wire::Reply** cached) {
  if (Retired(client)) return Verdict::kForgotten;  // a late copy: its original ran before
  ClientCalls& entry = clients_[client];
  auto it = entry.calls.find(call_id);
  if (it != entry.calls.end()) {
    if (!it->second.answered) return Verdict::kInProgress;
    *cached = &it->second.reply;
    return Verdict::kAnswered;
  }
  if (call_id < entry.forgotten_below) return Verdict::kForgotten;
  const bool out_of_order = !entry.calls.empty() && call_id < entry.calls.rbegin()->first;
  AddInProgress(&entry.calls, call_id);
  if (entry.calls.size() > calls_per_client_max_) {
    auto keep = std::next(entry.calls.begin(),
                          static_cast<ptrdiff_t>(entry.calls.size() - calls_per_client_max_));
    entry.forgotten_below = std::prev(keep)->first + 1;
    Forget(&entry.calls, entry.calls.begin(), keep);
  }
  return out_of_order ? Verdict::kOutOfOrder : Verdict::kExecute;
}

bool ReplyCache::Known(const ClientKey& client, uint64_t call_id) const {
  auto it = clients_.find(client);
  if (it == clients_.end()) return Retired(client);
  return call_id < it->second.forgotten_below || it->second.calls.count(call_id) > 0;
}

uint64_t ReplyCache::LatestCall(const ClientKey& client) const {
  auto it = clients_.find(client);
  if (it == clients_.end() || it->second.calls.empty()) return 0;
  return it->second.calls.rbegin()->first;
}

void ReplyCache::Completed(ClientKey client, uint64_t call_id, const wire::Reply& reply) {
  auto client_it = clients_.find(client);
  if (client_it == clients_.end()) return;
  auto it = client_it->second.calls.find(call_id);
  if (it == client_it->second.calls.end()) return;
  it->second.reply = reply;  // into a spare entry's strings: no allocation once warm
  it->second.answered = true;
}

void ReplyCache::AddInProgress(Calls* calls, uint64_t call_id) {
  if (spare_.value.empty()) {
    calls->try_emplace(call_id);
    return;
  }
  Calls::node_type node = std::move(spare_.value.back());
  spare_.value.pop_back();
  node.key() = call_id;
  node.mapped().answered = false;
  node.mapped().reply.Clear();  // keeps its strings' memory
  calls->insert(std::move(node));
}

void ReplyCache::Forget(Calls* calls, Calls::iterator first, Calls::iterator last) {
  while (first != last) {
    Calls::iterator next = std::next(first);
    const wire::Reply& reply = first->second.reply;
    if (spare_.value.size() < kSpareCallsMax &&
        reply.payload().capacity() + reply.error().capacity() <= consensus::kSpareBytesMax) {
      spare_.value.push_back(calls->extract(first));
    } else {
      calls->erase(first);
    }
    first = next;
  }
}

void ReplyCache::TakeRepliesBelow(const ClientKey& client, uint64_t below) {
  auto client_it = clients_.find(client);
  if (client_it == clients_.end() || below <= client_it->second.forgotten_below) return;
  ClientCalls& entry = client_it->second;
  Forget(&entry.calls, entry.calls.begin(), entry.calls.lower_bound(below));
  entry.forgotten_below = below;
}

size_t ReplyCache::calls() const {
  size_t calls = 0;
  for (const auto& [client, entry] : clients_) calls += entry.calls.size();
  return calls;
}

size_t ReplyCache::reply_bytes() const {
  size_t bytes = 0;
  for (const auto& [client, entry] : clients_) {
    for (const auto& [call_id, call] : entry.calls) {
      if (call.answered) bytes += call.reply.payload().size() + call.reply.error().size();
    }
  }
  return bytes;
}

void ReplyCache::Retire(const ClientKey& client) {
  clients_.erase(client);
  std::map<uint64_t, uint64_t>& ranges = retired_[{std::get<0>(client), std::get<1>(client)}];
  const uint64_t nso = std::get<2>(client);
  auto next = ranges.upper_bound(nso);  // the first range starting after nso
  if (next != ranges.begin()) {
    auto previous = std::prev(next);
    if (nso < previous->second) return;  // already retired
    if (nso == previous->second) {        // extends the range before it
      previous->second = nso + 1;
      if (next != ranges.end() && next->first == nso + 1) {
        previous->second = next->second;
        ranges.erase(next);
      }
      return;
    }
  }
  if (next != ranges.end() && next->first == nso + 1) {  // extends the range after it
    const uint64_t end = next->second;
    ranges.erase(next);
    ranges.emplace(nso, end);
    return;
  }
  ranges.emplace(nso, nso + 1);
}

bool ReplyCache::Retired(const ClientKey& client) const {
  if (retired_.empty()) return false;
  auto daemon = retired_.find({std::get<0>(client), std::get<1>(client)});
  if (daemon == retired_.end()) return false;
  const uint64_t nso = std::get<2>(client);
  auto next = daemon->second.upper_bound(nso);
  return next != daemon->second.begin() && nso < std::prev(next)->second;
}

size_t ReplyCache::retired_ranges() const {
  size_t ranges = 0;
  for (const auto& [daemon, retired] : retired_) ranges += retired.size();
  return ranges;
}

void ReplyCache::FillAnswersFrom(const ReplyCache& live) {
  for (auto& [client, entry] : clients_) {
    auto live_client = live.clients_.find(client);
    if (live_client == live.clients_.end()) continue;
    for (auto& [call_id, call] : entry.calls) {
      if (call.answered) continue;
      auto live_call = live_client->second.calls.find(call_id);
      if (live_call != live_client->second.calls.end()) call = live_call->second;
    }
  }
}

void ReplyCache::ToProto(wire::GroupState* state) const {
  for (const auto& [daemon, ranges] : retired_) {
    for (const auto& [first, end] : ranges) {
      wire::GroupState::RetiredClients* retired = state->add_retired();
      retired->set_origin(daemon.first);
      retired->set_origin_incarnation(daemon.second);
      retired->set_first_nso(first);
      retired->set_end_nso(end);
    }
  }
  for (const auto& [client, entry] : clients_) {
    if (entry.forgotten_below > 0) {
      wire::GroupState::ClientWindow* window = state->add_windows();
      window->set_origin(std::get<0>(client));
      window->set_origin_incarnation(std::get<1>(client));
      window->set_client_nso(std::get<2>(client));
      window->set_forgotten_below(entry.forgotten_below);
    }
    for (const auto& [call_id, call] : entry.calls) {
      wire::GroupState::CachedReply* out = state->add_replies();
      out->set_origin(std::get<0>(client));
      out->set_origin_incarnation(std::get<1>(client));
      out->set_client_nso(std::get<2>(client));
      out->set_call_id(call_id);
      if (call.answered) *out->mutable_reply() = call.reply;
    }
  }
}

void ReplyCache::FromProto(const wire::GroupState& state) {
  clients_.clear();
  retired_.clear();
  for (const wire::GroupState::RetiredClients& retired : state.retired()) {
    if (retired.end_nso() <= retired.first_nso()) continue;  // nonsense from a peer: nothing
    retired_[{retired.origin(), retired.origin_incarnation()}][retired.first_nso()] =
        retired.end_nso();
  }
  for (const wire::GroupState::CachedReply& cached : state.replies()) {
    ClientCalls& entry =
        clients_[{cached.origin(), cached.origin_incarnation(), cached.client_nso()}];
    Call& call = entry.calls[cached.call_id()];
    call.answered = cached.has_reply();
    if (call.answered) {
      call.reply = cached.reply();
    } else {
      call.reply.Clear();
    }
  }
  for (const wire::GroupState::ClientWindow& window : state.windows()) {
    clients_[{window.origin(), window.origin_incarnation(), window.client_nso()}].forgotten_below =
        window.forgotten_below();
  }
}

}  // namespace cohort::invocation
