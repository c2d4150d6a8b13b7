#include "nso/sim_network.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace cohort::nso {

class SimNetwork::SimEndpoint final : public Transport {
 public:
  SimEndpoint(SimNetwork* network, NodeId self) : network_(network), self_(self) {}
  void Send(NodeId to, const wire::Envelope& envelope) override {
    network_->Send(self_, to, envelope);
  }
  void SendWithBatch(NodeId to, const wire::Envelope& envelope,
                     consensus::SharedBatch shared) override {
    wire::Envelope whole = envelope;  // one copy: the network keeps it until delivery
    shared.CopyInto(&whole);
    network_->Send(self_, to, std::move(whole));
  }
  void SetReceiver(Receiver receiver) override { receiver_ = std::move(receiver); }
  void SetLinkWatcher(LinkWatcher watcher) override { link_watcher_ = std::move(watcher); }
  // As a TCP stream: down once the peer has crashed or a partition separates the two.
  bool Reachable(NodeId peer) const override {
    if (!network_->options().streams_break) return true;
    return !network_->crashed(peer) && network_->Connected(self_, peer);
  }
  const Receiver& receiver() const { return receiver_; }
  const LinkWatcher& link_watcher() const { return link_watcher_; }

 private:
  SimNetwork* const network_;
  const NodeId self_;
  Receiver receiver_;
  LinkWatcher link_watcher_;
};

SimNetwork::SimNetwork(SimNetworkOptions options) : options_(options), rng_(options.seed) {}
SimNetwork::~SimNetwork() = default;

Transport* SimNetwork::Endpoint(NodeId node) {
  auto& endpoint = endpoints_[node];
  if (endpoint == nullptr) endpoint = std::make_unique<SimEndpoint>(this, node);
  return endpoint.get();
}

void SimNetwork::After(uint64_t delay_ms, std::function<void()> callback) {
  Event event;
  event.is_timer = true;
  event.callback = std::move(callback);
  Schedule(now_ms_ + delay_ms, std::move(event));
}

void SimNetwork::Schedule(uint64_t time_ms, Event event) {
  events_.emplace(EventKey{time_ms, sequence_++}, std::move(event));
}

void SimNetwork::Send(NodeId from, NodeId to, wire::Envelope envelope) {
  ++counters_.messages_sent;
  if (options_.record_send_kinds) send_kinds_.push_back(static_cast<uint8_t>(envelope.body_case()));
  // Random draws happen for every send, whatever the faults, so traces stay aligned.
  bool drop = rng_.Chance(options_.drop_per_million);
  bool duplicate = rng_.Chance(options_.duplicate_per_million);
  uint64_t delay_ms = rng_.Range(options_.delay_min_ms, options_.delay_max_ms);
  uint64_t duplicate_delay_ms = rng_.Range(options_.delay_min_ms, options_.delay_max_ms);
  const MessagePerturbation* singled_out = nullptr;
  while (next_perturbation_ < options_.perturbations.size() &&
         options_.perturbations[next_perturbation_].send <= counters_.messages_sent) {
    const MessagePerturbation& next = options_.perturbations[next_perturbation_++];
    if (next.send == counters_.messages_sent) singled_out = &next;
  }
  if (singled_out != nullptr) {
    Perturb(*singled_out, from, to, envelope, &drop, &duplicate, &delay_ms, &duplicate_delay_ms);
  }
  Enqueue(from, to, std::move(envelope), drop, duplicate, delay_ms, duplicate_delay_ms);
  if (singled_out != nullptr && singled_out->crash) {
    // The sender crashes right after this message: the rest of what it is sending now is lost.
    const bool crashes = perturb_hook_ && perturb_hook_(from, singled_out->restart_ms);
    if (crashes) Crash(from);
    absl::StrAppend(&perturbed_, crashes ? "its sender crashed right after"
                                         : "its sender did not crash (the run's rules forbid it)");
    if (crashes) ++perturb_crashes_;
  }
}

void SimNetwork::Enqueue(NodeId from, NodeId to, wire::Envelope envelope, bool drop,
                         bool duplicate, uint64_t delay_ms, uint64_t duplicate_delay_ms) {
  if (drop || crashed(from) || crashed(to) || !Connected(from, to) ||
      events_.size() >= options_.events_max) {
    ++counters_.messages_dropped;
    return;
  }
  Event event;
  event.from = from;
  event.to = to;
  event.incarnation = incarnation_[to];
  event.envelope = std::move(envelope);
  if (duplicate) {
    ++counters_.messages_duplicated;
    Event copy = event;
    Schedule(now_ms_ + duplicate_delay_ms, std::move(copy));
  }
  Schedule(now_ms_ + delay_ms, std::move(event));
}

void SimNetwork::Perturb(const MessagePerturbation& perturbation, NodeId from, NodeId to,
                         const wire::Envelope& envelope, bool* drop, bool* duplicate,
                         uint64_t* delay_ms, uint64_t* duplicate_delay_ms) {
  const google::protobuf::FieldDescriptor* body =
      wire::Envelope::descriptor()->FindFieldByNumber(envelope.body_case());
  std::string done = "sent";
  if (perturbation.drop) {
    *drop = true;
    done = "lost";
  } else if (perturbation.duplicate_ms > 0) {
    *duplicate = true;
    *duplicate_delay_ms = *delay_ms + perturbation.duplicate_ms;
    done = absl::StrCat("delivered again ", perturbation.duplicate_ms, " ms later");
  } else if (perturbation.delay_ms > 0) {
    *delay_ms += perturbation.delay_ms;
    done = absl::StrCat("delayed ", perturbation.delay_ms, " ms");
  }
  if (perturbation.crash) done += ", and ";  // Send says whether its sender crashed
  const std::string kind = body == nullptr ? "no body" : body->name();
  if (perturbed_.empty()) {
    perturbed_kind_ = kind;
  } else {
    perturbed_ += "; then ";
  }
  absl::StrAppend(&perturbed_, "message ", counters_.messages_sent, " (", kind, ", group ",
                  envelope.group(), " view ", envelope.view_id(), ") n", from, "->n", to,
                  " sent at t=", now_ms_, "ms: ", done);
}

void SimNetwork::Deliver(Event& event) {
  if (event.is_timer) {
    ++counters_.timers_fired;
    event.callback();
    return;
  }
  // A partition or crash that began while the message was in flight also loses it.
  if (crashed(event.to) || event.incarnation != incarnation_[event.to] ||
      !Connected(event.from, event.to)) {
    ++counters_.messages_dropped;
    return;
  }
  auto it = endpoints_.find(event.to);
  if (it == endpoints_.end() || !it->second->receiver()) {
    ++counters_.messages_dropped;
    return;
  }
  ++counters_.messages_delivered;
  Hash(now_ms_);
  Hash(event.from);
  Hash(event.to);
  std::string bytes;
  event.envelope.SerializeToString(&bytes);
  for (unsigned char c : bytes) Hash(c);
  it->second->receiver()(event.from, std::move(event.envelope));
}

bool SimNetwork::RunOne() {
  if (events_.empty()) return false;
  auto node = events_.extract(events_.begin());
  now_ms_ = node.key().first;
  Deliver(node.mapped());
  return true;
}

void SimNetwork::RunUntil(uint64_t time_ms) {
  while (!events_.empty() && events_.begin()->first.first <= time_ms) RunOne();
  if (time_ms > now_ms_) now_ms_ = time_ms;
}

bool SimNetwork::RunUntilQuiet(uint64_t time_limit_ms) {
  while (!events_.empty()) {
    if (events_.begin()->first.first > time_limit_ms) return false;
    RunOne();
  }
  return true;
}

void SimNetwork::SetDelay(uint64_t delay_min_ms, uint64_t delay_max_ms) {
  options_.delay_min_ms = delay_min_ms;
  options_.delay_max_ms = delay_max_ms < delay_min_ms ? delay_min_ms : delay_max_ms;
}

void SimNetwork::SetLoss(uint32_t drop_per_million, uint32_t duplicate_per_million) {
  options_.drop_per_million = drop_per_million;
  options_.duplicate_per_million = duplicate_per_million;
}

void SimNetwork::Partition(const std::vector<std::vector<NodeId>>& sets) {
  partition_of_.clear();
  for (size_t i = 0; i < sets.size(); ++i) {
    for (NodeId node : sets[i]) partition_of_[node] = i + 1;  // 0 = "in no set"
  }
}

void SimNetwork::Heal() { partition_of_.clear(); }

void SimNetwork::Crash(NodeId node) { crashed_.insert(node); }

void SimNetwork::Kill(NodeId node) {
  Crash(node);
  // Its kernel resets the connections that had unread data: what it sent lately and is still
  // in flight may be lost, to some peers and not others (a broadcast cut short).
  std::set<NodeId> reset;
  for (const auto& [peer, endpoint] : endpoints_) {
    if (peer != node && rng_.Chance(500000)) reset.insert(peer);
  }
  for (auto it = events_.begin(); it != events_.end();) {
    const Event& event = it->second;
    if (!event.is_timer && event.from == node && reset.count(event.to) > 0) {
      ++counters_.messages_dropped;
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
  NotifyLinks(node, /*up=*/false);
  killed_.insert(node);
}

void SimNetwork::Restart(NodeId node) {
  crashed_.erase(node);
  ++incarnation_[node];
  if (killed_.erase(node) > 0) NotifyLinks(node, /*up=*/true);
}

void SimNetwork::NotifyLinks(NodeId node, bool up) {
  for (const auto& [peer, endpoint] : endpoints_) {
    if (peer == node || crashed(peer) || !Connected(node, peer)) continue;
    // One link delay, drawn as a message's: the FIN travels like the data before it.
    const uint64_t delay_ms = rng_.Range(options_.delay_min_ms, options_.delay_max_ms);
    const uint64_t incarnation = incarnation_[peer];
    After(delay_ms, [this, node, peer = peer, up, incarnation] {
      auto it = endpoints_.find(peer);
      if (crashed(peer) || incarnation != incarnation_[peer] || it == endpoints_.end() ||
          !it->second->link_watcher()) {
        return;
      }
      it->second->link_watcher()(node, up);
    });
  }
}

bool SimNetwork::Connected(NodeId a, NodeId b) const {
  if (partition_of_.empty()) return true;
  auto set_of = [this](NodeId node) -> size_t {
    auto it = partition_of_.find(node);
    return it == partition_of_.end() ? 0 : it->second;
  };
  return set_of(a) == set_of(b);
}

void SimNetwork::Hash(uint64_t value) {  // FNV-1a, one byte at a time
  for (int i = 0; i < 8; ++i) {
    trace_hash_ ^= (value >> (8 * i)) & 0xFF;
    trace_hash_ *= 1099511628211ULL;
  }
}

}  // namespace cohort::nso
