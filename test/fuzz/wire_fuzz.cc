// libFuzzer target: the wire decoder and the protocol code behind it.
//
// The input is a sequence of records (test/fuzz/fuzz_node.h: u8 control, u16 LE length, bytes);
// each record's bytes are a peer frame arriving on the peer connection of node n1 or n3 to a real
// cohort::nso::Node n2 (groups g, s, solo, other; fuzz_node.h). A connection starts with an
// acceptable Hello (version, cluster, configured peer; parsed as a cohort::wire::PeerFrame), a
// frame that does not parse closes it, and every envelope passes the AcceptEnvelope checks
// (version, sender_node == the connection's peer, a body) before Node::Receive. After the hello,
// n1's frames are read as the raw TCP transport reads them (nso/peer_frame_codec.h: each envelope
// parsed into an arena, reset per envelope; those before a malformed one are delivered), n3's as
// GrpcTransport does (the whole PeerFrame parsed first).
//
// control bit 0: the connection (0: n1, raw TCP; 1: n3, gRPC)
// control bit 1: the local client also invokes a group (bits 2-3: g, s, solo, other)
// control bits 4-7: milliseconds to advance the clock by, times 8, then Tick
//
// Must hold for any input: no crash, no sanitizer report, and every invocation's callback runs
// exactly once (by the end of the input or when the Node is destroyed).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "nso/kept_envelopes.h"
#include "nso/node.h"
#include "nso/peer_frame_codec.h"
#include "nso/scratch_arena.h"
#include "proto/wire.pb.h"
#include "test/fuzz/fuzz_node.h"

namespace {

using cohort::fuzz::NodeHarness;
using cohort::nso::NodeId;

constexpr NodeId kSelf = 2;
constexpr size_t kMaxRecords = 128;

void Check(bool ok, const char* what) { cohort::fuzz::CheckInvariant("wire_fuzz", ok, what); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::fuzz::QuietLogs();
  static const cohort::nso::Config config = cohort::fuzz::MakeConfig(kSelf);
  auto calls = std::make_shared<std::vector<int>>();  // callback count per invocation
  {
    NodeHarness harness(kSelf);
    bool stream_up[2] = {false, false};
    cohort::nso::KeptEnvelopes kept;  // as TcpTransport's, across frames
    const char* kGroups[] = {"g", "s", "solo", "other"};
    for (const cohort::fuzz::Record& record :
         cohort::fuzz::SplitRecords(data, size, kMaxRecords)) {
      const int stream = record.control & 1;
      const NodeId peer = stream == 0 ? 1 : 3;
      if (record.control & 2) {
        cohort::nso::InvokeOptions options;
        options.group = kGroups[(record.control >> 2) & 3];
        options.method = "add";
        options.payload = "1";
        options.deadline_ms = 500;
        const size_t index = calls->size();
        calls->push_back(0);
        harness.node().Invoke(harness.client_nso(), std::move(options),
                              [calls, index](cohort::nso::InvokeResult) { (*calls)[index]++; });
      }
      if (stream == 0 && stream_up[0]) {  // as TcpTransport::Deliver
        char block[1024];
        google::protobuf::Arena arena(cohort::nso::ArenaOn(block, sizeof(block)));
        auto scratch = [&arena, &kept](uint32_t body_field) {
          arena.Reset();
          if (cohort::wire::Envelope* envelope = kept.For(body_field)) {
            return cohort::nso::EnvelopeTarget{envelope, true};
          }
          return cohort::nso::EnvelopeTarget{
              google::protobuf::Arena::CreateMessage<cohort::wire::Envelope>(&arena)};
        };
        absl::Status read = cohort::nso::ReadEnvelopeFrame(
            record.bytes.data(), record.bytes.size(), scratch,
            [&](cohort::wire::Envelope& envelope) {
              if (!cohort::fuzz::AcceptEnvelope(peer, envelope)) return;
              harness.node().Receive(peer, envelope);
              harness.Pump();
            });
        if (!read.ok()) stream_up[0] = false;  // the connection is closed
        harness.Advance(static_cast<uint64_t>(record.control >> 4) * 8);
        continue;
      }
      cohort::wire::PeerFrame frame;
      if (!frame.ParseFromString(record.bytes)) {
        stream_up[stream] = false;  // gRPC fails the read: the stream ends
      } else if (frame.has_hello()) {
        if (!stream_up[stream]) {
          stream_up[stream] = cohort::fuzz::AcceptHello(frame.hello(), kSelf, config) &&
                              frame.hello().node() == peer;
        }
      } else if (stream_up[stream] && frame.has_frame()) {
        for (cohort::wire::Envelope& envelope : *frame.mutable_frame()->mutable_envelopes()) {
          if (!cohort::fuzz::AcceptEnvelope(peer, envelope)) continue;
          harness.node().Receive(peer, envelope);
          harness.Pump();
        }
      }
      harness.Advance(static_cast<uint64_t>(record.control >> 4) * 8);
    }
    // Let every call reach its deadline (500 ms), ticking as the daemon does.
    for (int tick = 0; tick < 60; ++tick) harness.Advance(10);
  }
  for (int count : *calls) Check(count == 1, "an invocation's callback did not run exactly once");
  return 0;
}
