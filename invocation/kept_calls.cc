#include "invocation/kept_calls.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "invocation/kept_state.h"
#include "proto/wire.pb.h"

namespace cohort::invocation {

std::string KeptCallIdentity(const ReplyCache::ClientKey& client, uint64_t call_id) {
  wire::GroupState::CachedReply key;
  key.set_origin(std::get<0>(client));
  key.set_origin_incarnation(std::get<1>(client));
  key.set_client_nso(std::get<2>(client));
  key.set_call_id(call_id);
  return key.SerializeAsString();
}

void ToKeptCalls(const ReplyCache& cache, api::KeptCalls* out) {
  wire::GroupState state;
  cache.ToProto(&state);
  // Each client's calls come together, oldest first: the latest `quota` of each.
  std::map<ReplyCache::ClientKey, int> per_client;
  for (const auto& cached : state.replies()) {
    ++per_client[{cached.origin(), cached.origin_incarnation(), cached.client_nso()}];
  }
  const int quota = std::max<int>(1, kKeptCallsMax / std::max<size_t>(1, per_client.size()));
  size_t bytes = 0;
  for (auto& cached : *state.mutable_replies()) {
    int& left = per_client[{cached.origin(), cached.origin_incarnation(), cached.client_nso()}];
    if (left-- > quota) continue;  // an older one of a client with more than its share
    api::KeptCall call;
    call.set_call(KeptCallIdentity({cached.origin(), cached.origin_incarnation(),
                                    cached.client_nso()}, cached.call_id()));
    if (cached.has_reply()) {
      call.set_status_code(cached.reply().status_code());
      call.set_error(cached.reply().error());
      call.set_payload(std::move(*cached.mutable_reply()->mutable_payload()));
    } else {
      call.set_unanswered(true);
    }
    bytes += call.ByteSizeLong();
    if (bytes > kKeptCallsMaxBytes) break;
    *out->add_calls() = std::move(call);
  }
}

absl::Status LoadKeptCalls(const api::KeptCalls& calls, uint32_t replier, ReplyCache* cache) {
  wire::GroupState state;
  std::map<ReplyCache::ClientKey, uint64_t> lowest;
  std::set<std::string> answered;  // a call kept twice: its answer wins
  for (const api::KeptCall& call : calls.calls()) {
    if (!call.unanswered()) answered.insert(call.call());
  }
  for (int i = 0; i < calls.calls_size(); ++i) {
    const api::KeptCall& call = calls.calls(i);
    if (call.unanswered() && answered.count(call.call()) > 0) continue;
    wire::GroupState::CachedReply* cached = state.add_replies();
    if (!cached->ParseFromString(call.call()) || cached->call_id() == 0) {
      return absl::DataLossError(absl::StrCat("kept call ", i, " of ", calls.calls_size(),
                                              ": its identity is not a call's (",
                                              call.call().size(), " bytes)"));
    }
    if (!call.unanswered()) {
      wire::Reply* reply = cached->mutable_reply();
      reply->set_replier(replier);
      reply->set_status_code(call.status_code());
      reply->set_error(call.error());
      reply->set_payload(call.payload());
    }
    const ReplyCache::ClientKey client{cached->origin(), cached->origin_incarnation(),
                                       cached->client_nso()};
    auto [at, fresh] = lowest.emplace(client, cached->call_id());
    if (!fresh) at->second = std::min(at->second, cached->call_id());
  }
  for (const auto& [client, call_id] : lowest) {
    wire::GroupState::ClientWindow* window = state.add_windows();
    window->set_origin(std::get<0>(client));
    window->set_origin_incarnation(std::get<1>(client));
    window->set_client_nso(std::get<2>(client));
    window->set_forgotten_below(call_id);
  }
  cache->FromProto(state);
  return absl::OkStatus();
}

}  // namespace cohort::invocation
