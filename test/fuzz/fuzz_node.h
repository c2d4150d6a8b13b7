// Shared pieces of the libFuzzer targets (test/fuzz/*_fuzz.cc) and the seed corpus generator:
// a Transport that records what a Node sends, the cluster configuration the targets run, and a
// harness around one real cohort::nso::Node with an attached client NSO and servants that answer
// every delivery (queued, like the daemon's servant stream, and answered after the current step).
//
// Everything is deterministic: a fresh Node per input, time only through Tick.
#ifndef COHORT_TEST_FUZZ_FUZZ_NODE_H_
#define COHORT_TEST_FUZZ_FUZZ_NODE_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "absl/status/status.h"
#include "nso/config.h"
#include "nso/logging.h"
#include "nso/node.h"
#include "nso/transport.h"
#include "proto/wire.pb.h"

namespace cohort::fuzz {

// Records every envelope (the generator replays them; the fuzz targets only count them).
class RecordingTransport : public nso::Transport {
 public:
  void Send(nso::NodeId to, const wire::Envelope& envelope) override {
    ++sent;
    if (keep) outbox.emplace_back(to, envelope);
  }
  void SetReceiver(Receiver receiver) override { this->receiver = std::move(receiver); }

  bool keep = false;
  uint64_t sent = 0;
  std::vector<std::pair<nso::NodeId, wire::Envelope>> outbox;
  Receiver receiver;
};

inline constexpr char kCluster[] = "fuzz";

// Three daemons n1..n3 (ids 1..3). Groups:
//   g    members n1 n2 n3, consensus ordering, closed
//   s    members n1 n2 n3, sequencer ordering, open, event liveness
//   solo members [self] only: a one-member group orders and delivers locally, so an invocation
//        runs the whole path (order, servant, reply) without any peer
//   other members n1 n3 (not `self` when self is n2): calls from outside a server group
inline nso::Config MakeConfig(nso::NodeId self) {
  nso::Config config;
  config.node = "n" + std::to_string(self);
  config.node_id = self;
  config.cluster = kCluster;
  config.listen_peer = "127.0.0.1:1";
  config.listen_client = "127.0.0.1:2";
  for (nso::NodeId id = 1; id <= 3; ++id) {
    config.peers.push_back({"n" + std::to_string(id), id, "127.0.0.1:" + std::to_string(7100 + id)});
  }
  config.limits.max_payload_bytes = 4096;
  config.limits.default_deadline_ms = 2000;
  config.limits.max_nsos = 16;
  nso::GroupConfig g;
  g.name = "g";
  g.members = {"n1", "n2", "n3"};
  config.groups.push_back(g);
  nso::GroupConfig s;
  s.name = "s";
  s.members = {"n1", "n2", "n3"};
  s.ordering = nso::GroupConfig::Ordering::kSequencer;
  s.liveness = nso::GroupConfig::Liveness::kEvent;
  s.style = nso::GroupConfig::Style::kOpen;
  s.default_mode = nso::GroupConfig::DefaultMode::kMajority;
  config.groups.push_back(s);
  nso::GroupConfig solo;
  solo.name = "solo";
  solo.members = {config.node};
  solo.default_mode = nso::GroupConfig::DefaultMode::kFirst;
  config.groups.push_back(solo);
  nso::GroupConfig other;
  other.name = "other";
  other.members = {"n1", "n3"};
  other.style = nso::GroupConfig::Style::kOpen;
  config.groups.push_back(other);
  return config;
}

// Aborts, naming the target and the invariant, when `ok` is false: libFuzzer keeps the input as a
// crash.
inline void CheckInvariant(const char* target, bool ok, const char* what,
                           const std::string& detail = "") {
  if (!ok) {
    std::fprintf(stderr, "%s: invariant violated: %s %s\n", target, what, detail.c_str());
    std::abort();
  }
}

// Silences the component loggers and protobuf's parse errors once (the protocol logs every
// dropped envelope). COHORT_FUZZ_LOG=debug (or another level) keeps them, to study one input.
inline void QuietLogs() {
  static bool done = [] {
    const char* level = std::getenv("COHORT_FUZZ_LOG");
    nso::ConfigureLogging(level != nullptr ? level : "off", "text", "fuzz");
    if (level == nullptr) {
      google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                         const std::string&) {});
    }
    return true;
  }();
  (void)done;
}

// One Node plus a client NSO and a servant per hosted group. Servant deliveries are queued and
// answered by Pump() (never from inside the Node's call stack, as in the daemon).
class NodeHarness {
 public:
  explicit NodeHarness(nso::NodeId self, uint64_t incarnation = 42, uint64_t now_ms = 1000)
      : config_(MakeConfig(self)), now_ms_(now_ms) {
    node_ = std::make_unique<nso::Node>(config_, &transport_, incarnation, now_ms);
    client_nso_ = *node_->Attach("client");
    uint64_t servant_nso = *node_->Attach("servant");
    for (const char* group : {"g", "s", "solo", "other"}) {
      auto slot = std::make_shared<uint64_t>(0);
      absl::StatusOr<uint64_t> servant = node_->RegisterServant(
          servant_nso, group, [this, slot](nso::ServantDelivery delivery) {
            queue_.emplace_back(slot, std::move(delivery));
          });
      if (servant.ok()) *slot = *servant;
    }
  }

  nso::Node& node() { return *node_; }
  RecordingTransport& transport() { return transport_; }
  uint64_t client_nso() const { return client_nso_; }
  uint64_t now_ms() const { return now_ms_; }

  // Answers queued deliveries: state "$get_state"/"$set_state", "fail" answers an error, any other
  // method appends (a prefix of) its payload to the state and returns the state.
  void Pump() {
    for (int rounds = 0; rounds < 64 && !queue_.empty(); ++rounds) {
      std::deque<std::pair<std::shared_ptr<uint64_t>, nso::ServantDelivery>> batch;
      batch.swap(queue_);
      for (auto& [slot, delivery] : batch) {
        ++deliveries_;
        if (delivery.one_way && delivery.method != nso::kGetStateMethod) {
          if (delivery.method == nso::kSetStateMethod) state_ = delivery.payload;
          continue;
        }
        absl::Status status;
        std::string payload;
        if (delivery.method == nso::kGetStateMethod) {
          payload = state_;
        } else if (delivery.method == nso::kSetStateMethod) {
          state_ = delivery.payload;
        } else if (delivery.method == "fail") {
          status = absl::FailedPreconditionError("told to fail");
        } else {
          state_ += delivery.payload.substr(0, 16);
          if (state_.size() > 256) state_.erase(0, state_.size() - 256);
          payload = state_;
        }
        node_->Answer(*slot, delivery.delivery, status, payload);
      }
    }
  }

  void Advance(uint64_t ms) {
    now_ms_ += ms;
    node_->Tick(now_ms_);
    Pump();
  }

  uint64_t deliveries() const { return deliveries_; }

 private:
  const nso::Config config_;
  RecordingTransport transport_;
  std::unique_ptr<nso::Node> node_;
  uint64_t client_nso_ = 0;
  // Deliveries with the id of the servant that got them (filled in once registered).
  std::deque<std::pair<std::shared_ptr<uint64_t>, nso::ServantDelivery>> queue_;
  std::string state_;
  uint64_t deliveries_ = 0;
  uint64_t now_ms_ = 0;
};

// The checks GrpcTransport applies before an envelope reaches the Node (nso/grpc_transport.cc,
// GrpcTransport::Exchange for the hello and AcceptEnvelope for each envelope), copied here so the
// targets run without gRPC.
inline bool AcceptHello(const wire::Hello& hello, nso::NodeId self, const nso::Config& config) {
  if (hello.version() != wire::VERSION_1) return false;
  if (hello.cluster() != config.cluster) return false;
  if (hello.node() == self || config.FindPeerById(hello.node()) == nullptr) return false;
  return true;
}

inline bool AcceptEnvelope(nso::NodeId peer, const wire::Envelope& envelope) {
  if (envelope.version() != wire::VERSION_1) return false;
  if (envelope.sender_node() != peer) return false;
  if (envelope.body_case() == wire::Envelope::BODY_NOT_SET) return false;
  return true;
}

// Record format shared by the wire and api targets and the generator:
//   u8 control, u16 little-endian length, `length` bytes of a serialised protobuf message;
// repeated until the input ends (a short tail is used as it is).
struct Record {
  uint8_t control = 0;
  std::string bytes;
};

inline std::vector<Record> SplitRecords(const uint8_t* data, size_t size, size_t max_records) {
  std::vector<Record> records;
  size_t at = 0;
  while (at < size && records.size() < max_records) {
    Record record;
    record.control = data[at++];
    size_t length = 0;
    if (at < size) length = data[at++];
    if (at < size) length |= static_cast<size_t>(data[at++]) << 8;
    if (length > size - at) length = size - at;
    record.bytes.assign(reinterpret_cast<const char*>(data + at), length);
    at += length;
    records.push_back(std::move(record));
  }
  return records;
}

inline void AppendRecord(std::string* out, uint8_t control, const std::string& bytes) {
  out->push_back(static_cast<char>(control));
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>((bytes.size() >> 8) & 0xff));
  out->append(bytes);
}

}  // namespace cohort::fuzz

#endif  // COHORT_TEST_FUZZ_FUZZ_NODE_H_
