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
  entry.calls.emplace(call_id, std::nullopt);
  while (entry.calls.size() > calls_per_client_max_) {
    entry.forgotten_below = entry.calls.begin()->first + 1;
    entry.calls.erase(entry.calls.begin());
  }
  return Verdict::kExecute;
}

void ReplyCache::Completed(ClientKey client, uint64_t call_id, const wire::Reply& reply) {
  auto client_it = clients_.find(client);
  if (client_it == clients_.end()) return;
  auto it = client_it->second.calls.find(call_id);
  if (it != client_it->second.calls.end()) it->second = reply;
}

}  // namespace cohort::invocation
