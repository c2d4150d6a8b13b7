// The raw TCP transport reads replies and consensus messages into kept envelopes (issue 7): what
// it hands on is what a fresh parse gives, and reading the envelopes of a call allocates nothing
// once warm.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "google/protobuf/arena.h"
#include "nso/framing.h"
#include "nso/heap_count.h"
#include "nso/kept_envelopes.h"
#include "nso/peer_frame_codec.h"
#include "nso/spare_payloads.h"
#include "proto/wire.pb.h"

namespace cohort::nso {
namespace {

uint64_t Allocations() { return *HeapAllocations(); }

wire::Envelope Header(uint64_t view) {
  wire::Envelope envelope;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group("g");
  envelope.set_sender_node(3);
  envelope.set_view_id(view);
  return envelope;
}

wire::Envelope Reply(uint64_t call, const std::string& payload, const std::string& error = "") {
  wire::Envelope envelope = Header(call);
  wire::Reply* reply = envelope.mutable_reply();
  reply->set_call_id(call);
  reply->set_replier(3);
  reply->set_payload(payload);
  if (!error.empty()) reply->set_error(error);
  return envelope;
}

wire::Envelope Consensus(wire::ConsensusMessage::Kind kind, int messages) {
  wire::Envelope envelope = Header(7);
  wire::ConsensusMessage* consensus = envelope.mutable_consensus();
  consensus->set_instance(9);
  consensus->set_round(1);
  consensus->set_kind(kind);
  for (int i = 0; i < messages; ++i) {
    wire::DataMessage* message = consensus->mutable_value()->add_messages();
    message->set_origin(2);
    message->set_seq(i + 1);
    message->set_payload(std::string(100 + i, static_cast<char>('a' + i)));
  }
  return envelope;
}

// A frame of `envelopes`, without its length prefix, as ReadEnvelopeFrame takes it. `raw` are
// appended as they are (an envelope's bytes made by hand).
std::string Frame(const std::vector<wire::Envelope>& envelopes,
                  const std::vector<std::string>& raw = {}) {
  std::vector<std::string> bytes;
  size_t body = 0;
  for (const wire::Envelope& envelope : envelopes) bytes.push_back(envelope.SerializeAsString());
  for (const std::string& one : raw) bytes.push_back(one);
  for (const std::string& one : bytes) body += EnvelopeFieldBytes(one.size());
  std::string out;
  BeginEnvelopeFrame(body, &out);
  for (const std::string& one : bytes) AppendEnvelope(one, &out);
  return out.substr(kFrameLengthBytes);
}

// Reads `frame` as TcpTransport::Deliver does; `each` sees every envelope.
struct Reader {
  KeptEnvelopes kept;
  alignas(16) char block[4096];
  google::protobuf::Arena arena{ArenaOptions()};
  google::protobuf::ArenaOptions ArenaOptions() {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = sizeof(block);
    return options;
  }
  template <typename Each>
  absl::Status Read(const std::string& frame, Each each) {
    return ReadEnvelopeFrame(
        frame.data(), frame.size(),
        [this](uint32_t body_field) {
          arena.Reset();
          if (wire::Envelope* envelope = kept.For(body_field)) return EnvelopeTarget{envelope, true};
          return EnvelopeTarget{google::protobuf::Arena::CreateMessage<wire::Envelope>(&arena)};
        },
        each);
  }
};

// The envelope as a fresh parse gives it: a kept consensus or sequencer message keeps its batch
// present (kept_envelopes.cc), empty where the bytes had none.
std::string Normal(const wire::Envelope& envelope) {
  wire::Envelope copy = envelope;
  if (copy.has_consensus() && copy.consensus().value().ByteSizeLong() == 0) {
    copy.mutable_consensus()->clear_value();
  }
  if (copy.has_sequencer() && copy.sequencer().batch().ByteSizeLong() == 0) {
    copy.mutable_sequencer()->clear_batch();
  }
  return copy.SerializeAsString();
}

TEST_CASE("kept envelopes: what is read is what a fresh parse gives", "[kept_envelopes]") {
  std::vector<wire::Envelope> sent = {
      Reply(1, std::string(200, 'r'), "an error"),
      Consensus(wire::ConsensusMessage::PROPOSAL, 3),
      Consensus(wire::ConsensusMessage::ACK, 0),  // no batch after one with three
      Reply(2, "short"),                          // no error after one with an error
      Header(4),                                  // no body
      Consensus(wire::ConsensusMessage::PROPOSAL, 1),
      Reply(3, std::string(50, 's')),
  };
  sent[4].mutable_heartbeat()->set_sent_ms(5);
  wire::Envelope forward = Header(5);
  forward.mutable_forward()->set_call_id(8);
  forward.mutable_forward()->set_payload(std::string(80, 'f'));
  sent.push_back(forward);
  sent.push_back(Reply(4, ""));
  wire::Envelope ordered = Header(6);
  ordered.mutable_sequencer()->set_kind(wire::SequencerMessage::ORDERED);
  ordered.mutable_sequencer()->set_first_order(3);
  *ordered.mutable_sequencer()->mutable_batch() =
      Consensus(wire::ConsensusMessage::PROPOSAL, 2).consensus().value();
  wire::Envelope ack = Header(6);
  ack.mutable_sequencer()->set_kind(wire::SequencerMessage::ACK);
  ack.mutable_sequencer()->set_delivered(4);
  sent.push_back(ordered);
  sent.push_back(ack);  // no batch after one with two
  sent.push_back(ordered);
  // Two bodies in one envelope's bytes (a reply, then a consensus message): the last one counts,
  // as in a fresh parse, though the kept reply envelope was chosen by the first.
  const std::string both =
      Reply(5, std::string(120, 'b')).SerializeAsString() +
      Consensus(wire::ConsensusMessage::DECISION, 2).SerializeAsString();
  const std::string frame = Frame(sent, {both});
  Reader reader;
  for (int pass = 0; pass < 3; ++pass) {  // the kept envelopes refilled each time
    std::vector<std::string> read;
    REQUIRE(reader.Read(frame, [&](wire::Envelope& envelope) {
      read.push_back(Normal(envelope));
      if (envelope.has_reply()) {  // as Node::OnReply: the payload goes on with its call
        std::string taken = std::move(*envelope.mutable_reply()->mutable_payload());
        SparePayloads().Keep(std::move(taken));
      }
    }).ok());
    REQUIRE(read.size() == sent.size() + 1);
    for (size_t i = 0; i < sent.size(); ++i) {
      CAPTURE(pass, i);
      CHECK(read[i] == sent[i].SerializeAsString());
    }
    wire::Envelope fresh;
    REQUIRE(fresh.ParseFromString(both));
    CHECK(fresh.has_consensus());
    CHECK(read.back() == Normal(fresh));
  }
}

TEST_CASE("kept envelopes: a call's replies and proposals are read without allocating",
          "[kept_envelopes]") {
  const std::string frame = Frame({Consensus(wire::ConsensusMessage::PROPOSAL, 1),
                                   Reply(1, std::string(100, 'r')),
                                   Consensus(wire::ConsensusMessage::DECIDED, 0),
                                   Reply(2, std::string(100, 's'))});
  Reader reader;
  std::string moved_on;  // the last reply's payload, as a call's result takes it
  auto each = [&](wire::Envelope& envelope) {
    if (!envelope.has_reply()) return;
    moved_on = std::move(*envelope.mutable_reply()->mutable_payload());
    SparePayloads().Keep(std::move(moved_on));  // as the local fast path once it is written
  };
  for (int i = 0; i < 10; ++i) REQUIRE(reader.Read(frame, each).ok());  // warm
  const uint64_t before = Allocations();
  for (int i = 0; i < 100; ++i) REQUIRE(reader.Read(frame, each).ok());
  CHECK(Allocations() == before);
  // A malformed envelope after good ones: an error, and the kept envelopes still serve.
  std::string bad = Frame({Reply(3, "x")});
  bad += "\x0a\x05\x7a";  // Frame.envelopes, 5 bytes announced, 1 there
  CHECK(!reader.Read(bad, each).ok());
  CHECK(reader.Read(frame, each).ok());
}

}  // namespace
}  // namespace cohort::nso
