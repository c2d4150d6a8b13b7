#include "invocation/reply_cache.h"

namespace cohort::invocation {

ReplyCache::Verdict ReplyCache::OnDelivery(ClientKey client, uint64_t call_id,
                                           const wire::Reply** cached) {
  ClientCalls& entry = clients_[client];
  auto it = entry.calls.find(call_id);
  if (it != entry.calls.end()) {
    if (!it->second.has_value()) return Verdict::kInProgress;
    *cached = &*it->second;
    return Verdict::kAnswered;
  }
  if (call_id < entry.forgotten_below) return Verdict::kForgotten;
  const bool out_of_order = !entry.calls.empty() && call_id < entry.calls.rbegin()->first;
  entry.calls.emplace(call_id, std::nullopt);
  while (entry.calls.size() > calls_per_client_max_) {
    entry.forgotten_below = entry.calls.begin()->first + 1;
    entry.calls.erase(entry.calls.begin());
  }
  return out_of_order ? Verdict::kOutOfOrder : Verdict::kExecute;
}

bool ReplyCache::Known(const ClientKey& client, uint64_t call_id) const {
  auto it = clients_.find(client);
  if (it == clients_.end()) return false;
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
  if (it != client_it->second.calls.end()) it->second = reply;
}

void ReplyCache::FillAnswersFrom(const ReplyCache& live) {
  for (auto& [client, entry] : clients_) {
    auto live_client = live.clients_.find(client);
    if (live_client == live.clients_.end()) continue;
    for (auto& [call_id, reply] : entry.calls) {
      if (reply.has_value()) continue;
      auto live_call = live_client->second.calls.find(call_id);
      if (live_call != live_client->second.calls.end()) reply = live_call->second;
    }
  }
}

void ReplyCache::ToProto(wire::GroupState* state) const {
  for (const auto& [client, entry] : clients_) {
    if (entry.forgotten_below > 0) {
      wire::GroupState::ClientWindow* window = state->add_windows();
      window->set_origin(std::get<0>(client));
      window->set_origin_incarnation(std::get<1>(client));
      window->set_client_nso(std::get<2>(client));
      window->set_forgotten_below(entry.forgotten_below);
    }
    for (const auto& [call_id, reply] : entry.calls) {
      wire::GroupState::CachedReply* out = state->add_replies();
      out->set_origin(std::get<0>(client));
      out->set_origin_incarnation(std::get<1>(client));
      out->set_client_nso(std::get<2>(client));
      out->set_call_id(call_id);
      if (reply.has_value()) *out->mutable_reply() = *reply;
    }
  }
}

void ReplyCache::FromProto(const wire::GroupState& state) {
  clients_.clear();
  for (const wire::GroupState::CachedReply& cached : state.replies()) {
    ClientCalls& entry =
        clients_[{cached.origin(), cached.origin_incarnation(), cached.client_nso()}];
    if (cached.has_reply()) {
      entry.calls[cached.call_id()] = cached.reply();
    } else {
      entry.calls[cached.call_id()] = std::nullopt;
    }
  }
  for (const wire::GroupState::ClientWindow& window : state.windows()) {
    clients_[{window.origin(), window.origin_incarnation(), window.client_nso()}].forgotten_below =
        window.forgotten_below();
  }
}

}  // namespace cohort::invocation
