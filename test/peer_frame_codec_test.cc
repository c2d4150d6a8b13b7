// The raw TCP transport's frame codec writes and reads the bytes of wire::PeerFrame exactly, and
// refuses malformed frames with an error instead of reading past them.
#include <catch2/catch.hpp>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "consensus/total_order.h"
#include "nso/framing.h"
#include "nso/peer_frame_codec.h"
#include "proto/wire.pb.h"

namespace cohort::nso {
namespace {

std::vector<wire::Envelope> SomeEnvelopes() {
  std::vector<wire::Envelope> envelopes(5);
  for (size_t i = 0; i < envelopes.size(); ++i) {
    envelopes[i].set_version(wire::VERSION_1);
    envelopes[i].set_group("group-" + std::to_string(i));
    envelopes[i].set_sender_node(2);
    envelopes[i].set_view_id(i + 1);
  }
  envelopes[0].mutable_heartbeat()->set_sent_ms(1);
  // Payloads whose lengths take 1, 2 and 3 varint bytes.
  envelopes[1].mutable_reply()->set_payload(std::string(100, 'a'));
  envelopes[2].mutable_reply()->set_payload(std::string(300, '\0'));
  envelopes[3].mutable_reply()->set_payload(std::string(70000, '\xff'));
  auto* message = envelopes[4].mutable_consensus()->mutable_value()->add_messages();
  message->set_origin(3);
  message->set_payload("x");
  return envelopes;
}

// The frame the transport writes for these envelopes (length prefix included).
std::string Write(const std::vector<wire::Envelope>& envelopes) {
  size_t body = 0;
  std::vector<size_t> sizes;
  for (const auto& envelope : envelopes) {
    sizes.push_back(envelope.ByteSizeLong());
    body += EnvelopeFieldBytes(sizes.back());
  }
  std::string out = "before";
  const size_t frame_bytes = BeginEnvelopeFrame(body, &out);
  for (size_t i = 0; i < envelopes.size(); ++i) AppendEnvelope(envelopes[i], sizes[i], &out);
  REQUIRE(out.substr(0, 6) == "before");
  out.erase(0, 6);
  REQUIRE(out.size() == kFrameLengthBytes + frame_bytes);
  REQUIRE(GetFrameLength(out.data()) == frame_bytes);
  return out;
}

absl::Status Read(const std::string& bytes, std::vector<std::string>* read) {
  wire::Envelope scratch;
  auto reuse = [&scratch](uint32_t) {
    scratch.Clear();
    return EnvelopeTarget{&scratch};
  };
  return ReadEnvelopeFrame(bytes.data(), bytes.size(), reuse, [&](wire::Envelope& envelope) {
    read->push_back(envelope.SerializeAsString());
    wire::Envelope taken = std::move(envelope);  // a receiver may move it away
  });
}

}  // namespace

TEST_CASE("peer frame codec: written frames are wire::PeerFrame bytes", "[peer_frame_codec]") {
  const auto envelopes = SomeEnvelopes();
  const std::string frame = Write(envelopes);
  wire::PeerFrame parsed;
  REQUIRE(parsed.ParseFromArray(frame.data() + kFrameLengthBytes,
                                static_cast<int>(frame.size() - kFrameLengthBytes)));
  REQUIRE(parsed.has_frame());
  REQUIRE(parsed.frame().envelopes_size() == static_cast<int>(envelopes.size()));
  for (size_t i = 0; i < envelopes.size(); ++i) {
    CHECK(parsed.frame().envelopes(static_cast<int>(i)).SerializeAsString() ==
          envelopes[i].SerializeAsString());
  }
  wire::PeerFrame built;
  for (const auto& envelope : envelopes) *built.mutable_frame()->add_envelopes() = envelope;
  CHECK(frame.substr(kFrameLengthBytes) == built.SerializeAsString());
}

TEST_CASE("peer frame codec: reads protobuf's frames, skipping what it does not know",
          "[peer_frame_codec]") {
  const auto envelopes = SomeEnvelopes();
  wire::PeerFrame built;
  for (const auto& envelope : envelopes) *built.mutable_frame()->add_envelopes() = envelope;
  std::string bytes = built.SerializeAsString();
  // A field of a later version before the frame (field 9, varint 300) is skipped.
  bytes = std::string("\x48\xac\x02", 3) + bytes;
  std::vector<std::string> read;
  REQUIRE(Read(bytes, &read).ok());
  REQUIRE(read.size() == envelopes.size());
  for (size_t i = 0; i < envelopes.size(); ++i) CHECK(read[i] == envelopes[i].SerializeAsString());

  // A hello is skipped (the handshake reads its frame as a PeerFrame); an empty frame is fine.
  wire::PeerFrame hello;
  hello.mutable_hello()->set_node(4);
  read.clear();
  CHECK(Read(hello.SerializeAsString(), &read).ok());
  CHECK(Read("", &read).ok());
  CHECK(read.empty());
}

TEST_CASE("peer frame codec: malformed frames are refused, naming what is wrong",
          "[peer_frame_codec]") {
  const std::string frame = Write(SomeEnvelopes()).substr(kFrameLengthBytes);
  std::vector<std::string> read;
  // Cut anywhere: an error, never a read past the end (ASan/valgrind would see one).
  for (size_t cut = 1; cut < frame.size(); cut += (cut < 400 ? 1 : 997)) {
    read.clear();
    absl::Status status = Read(frame.substr(0, cut), &read);
    INFO("cut at " << cut);
    CHECK_FALSE(status.ok());
    CHECK(read.size() < 5);
  }
  read.clear();
  absl::Status status = Read(std::string("\x12\x05\x0a\x03\xff\xff\xff", 7), &read);
  CHECK(status.message() == "envelope 1 of 3 bytes undecodable");
  status = Read(std::string("\x12\x09\x0a\x10", 4), &read);
  CHECK(status.message() == "frame body longer than the frame");
  status = Read(std::string("\x12\x02\x0a\x05", 4), &read);
  CHECK(status.message() == "envelope 1 longer than its frame");
  status = Read(std::string("\x02\x00", 2), &read);  // field number 0
  CHECK(status.message() == "malformed field (tag 2) in frame");
  status = Read(std::string("\x0b", 1), &read);  // a group (wire type 3)
  CHECK(status.message() == "malformed field (tag 11) in frame");
  status = Read(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), &read);
  CHECK(status.message() == "malformed field tag in frame");
  CHECK(read.empty());

  // Random corruption of a valid frame: read or refused, never a crash; what it reads parses.
  std::mt19937 random(56);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes = frame.substr(0, 600);
    bytes[random() % bytes.size()] = static_cast<char>(random());
    bytes[random() % bytes.size()] = static_cast<char>(random());
    read.clear();
    (void)Read(bytes, &read);
    for (const std::string& envelope : read) {
      wire::Envelope parsed;
      CHECK(parsed.ParseFromString(envelope));
    }
  }
}


TEST_CASE("peer frame codec: a shared consensus value is read into the envelope's consensus "
          "message", "[peer_frame_codec]") {
  // What ConsensusOrder sends: the message without its value, the value held apart and written
  // after the envelope's own bytes (transport.h, SendWithBatch).
  wire::Envelope envelope;
  envelope.set_version(wire::VERSION_1);
  envelope.set_group("g");
  envelope.set_receiver_incarnation(7);
  wire::ConsensusMessage* message = envelope.mutable_consensus();
  message->set_instance(42);
  message->set_round(3);
  message->set_kind(wire::ConsensusMessage::PROPOSAL);
  message->set_timestamp(2);
  message->set_delivered_everywhere(40);
  wire::MessageBatch value;
  for (uint32_t origin = 1; origin <= 3; ++origin) {
    auto* data = value.add_messages();
    data->set_origin(origin);
    data->set_seq(origin * 10);
    data->set_payload(std::string(origin * 100, static_cast<char>('a' + origin)));  // 2-byte lengths
  }
  wire::Envelope whole = envelope;
  *whole.mutable_consensus()->mutable_value() = value;

  const size_t envelope_bytes = envelope.ByteSizeLong();
  const size_t value_bytes = value.ByteSizeLong();
  const size_t field_bytes = EnvelopeFieldBytes(envelope_bytes + AppendedBatchBytes(value_bytes));
  const AppendedBatch appended{&value, value_bytes, wire::Envelope::kConsensusFieldNumber,
                               wire::ConsensusMessage::kValueFieldNumber};
  std::string out;
  const size_t frame_bytes = BeginEnvelopeFrame(2 * field_bytes, &out);
  AppendEnvelope(envelope, envelope_bytes, &out, &appended);  // with the value
  AppendEnvelope(envelope, envelope_bytes, &out, &appended);  // twice, as to two peers
  REQUIRE(out.size() == kFrameLengthBytes + frame_bytes);

  std::vector<std::string> read;
  REQUIRE(Read(out.substr(kFrameLengthBytes), &read).ok());
  REQUIRE(read.size() == 2);
  for (const std::string& bytes : read) {
    wire::Envelope parsed;
    REQUIRE(parsed.ParseFromString(bytes));
    CHECK(parsed.SerializeAsString() == whole.SerializeAsString());  // every field, value too
    CHECK(parsed.consensus().value().messages_size() == 3);
    CHECK(parsed.consensus().instance() == 42);
    CHECK(parsed.receiver_incarnation() == 7);
  }
  // The generated parser reads the frame the same way.
  wire::PeerFrame frame;
  REQUIRE(frame.ParseFromArray(out.data() + kFrameLengthBytes,
                               static_cast<int>(out.size() - kFrameLengthBytes)));
  REQUIRE(frame.frame().envelopes_size() == 2);
  CHECK(frame.frame().envelopes(1).SerializeAsString() == whole.SerializeAsString());
}

TEST_CASE("peer frame codec: a shared batch is read at its place for each field it may fill",
          "[peer_frame_codec]") {
  using consensus::SharedBatch;
  auto batch = std::make_shared<wire::MessageBatch>();
  for (uint32_t seq = 1; seq <= 40; ++seq) {  // a 3-byte length
    auto* data = batch->add_messages();
    data->set_origin(2);
    data->set_seq(seq);
    data->set_payload(std::string(100 * seq, 's'));
  }
  for (SharedBatch::Field field : {SharedBatch::Field::kConsensusValue,
                                   SharedBatch::Field::kSequencerBatch,
                                   SharedBatch::Field::kDiffusionBatch}) {
    wire::Envelope envelope;  // what the orders send: the message, its batch held apart
    envelope.set_group("g");
    envelope.set_view_id(3);
    switch (field) {
      case SharedBatch::Field::kConsensusValue:
        envelope.mutable_consensus()->set_instance(8);
        break;
      case SharedBatch::Field::kSequencerBatch:
        envelope.mutable_sequencer()->set_kind(wire::SequencerMessage::ORDERED);
        envelope.mutable_sequencer()->set_first_order(17);
        break;
      case SharedBatch::Field::kDiffusionBatch:
        envelope.mutable_data();
        break;
    }
    const SharedBatch shared{batch, field};
    wire::Envelope whole = envelope;
    shared.CopyInto(&whole);  // what the simulated network and gRPC streams send
    const auto [envelope_field, batch_field] = shared.FieldNumbers();
    const size_t envelope_bytes = envelope.ByteSizeLong();
    const AppendedBatch appended{batch.get(), batch->ByteSizeLong(), envelope_field, batch_field};
    std::string out;
    BeginEnvelopeFrame(EnvelopeFieldBytes(envelope_bytes + AppendedBatchBytes(appended.bytes)),
                       &out);
    AppendEnvelope(envelope, envelope_bytes, &out, &appended);
    std::vector<std::string> read;
    REQUIRE(Read(out.substr(kFrameLengthBytes), &read).ok());
    REQUIRE(read.size() == 1);
    CHECK(read[0] == whole.SerializeAsString());
  }
}

}  // namespace cohort::nso
