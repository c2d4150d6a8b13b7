// The wire envelope: every body kind survives a round trip; garbage does not parse as a frame.
#include <catch2/catch.hpp>

#include "proto/wire.pb.h"

namespace cohort {

TEST_CASE("wire: an envelope of every body kind round-trips", "[wire]") {
  std::vector<wire::Envelope> envelopes(7);
  for (auto& envelope : envelopes) {
    envelope.set_version(wire::VERSION_1);
    envelope.set_group("counter");
    envelope.set_sender_nso(42);
    envelope.set_sender_node(3);
    envelope.set_view_id(7);
  }
  auto* consensus = envelopes[0].mutable_consensus();
  consensus->set_instance(9);
  consensus->set_round(2);
  consensus->set_kind(wire::ConsensusMessage::PROPOSAL);
  consensus->set_timestamp(1);
  auto* message = consensus->mutable_value()->add_messages();
  message->set_origin(2);
  message->set_seq(5);
  message->set_payload(std::string("\0binary\xff", 8));
  envelopes[1].mutable_membership()->set_kind(wire::MembershipMessage::NEW_VIEW);
  envelopes[1].mutable_membership()->add_members(1);
  envelopes[2].mutable_data()->mutable_batch()->add_messages()->set_seq(1);
  envelopes[3].mutable_heartbeat()->set_sent_ms(123456789);
  envelopes[4].mutable_sequencer()->set_kind(wire::SequencerMessage::ORDERED);
  envelopes[4].mutable_sequencer()->set_first_order(77);
  envelopes[5].mutable_reply()->set_call_id(11);
  envelopes[5].mutable_reply()->set_payload("42");
  envelopes[6].mutable_forward()->set_method("add");

  wire::PeerFrame frame;
  for (const auto& envelope : envelopes) *frame.mutable_frame()->add_envelopes() = envelope;
  std::string bytes = frame.SerializeAsString();

  wire::PeerFrame decoded;
  REQUIRE(decoded.ParseFromString(bytes));
  REQUIRE(decoded.frame().envelopes_size() == 7);
  for (int i = 0; i < 7; ++i) {
    const wire::Envelope& got = decoded.frame().envelopes(i);
    CHECK(got.SerializeAsString() == envelopes[i].SerializeAsString());
    CHECK(got.group() == "counter");
    CHECK(got.sender_nso() == 42);
    CHECK(got.sender_node() == 3);
    CHECK(got.view_id() == 7);
    CHECK(got.version() == wire::VERSION_1);
  }
  CHECK(decoded.frame().envelopes(0).consensus().value().messages(0).payload() ==
        std::string("\0binary\xff", 8));
  CHECK(decoded.frame().envelopes(0).body_case() == wire::Envelope::kConsensus);
  CHECK(decoded.frame().envelopes(6).body_case() == wire::Envelope::kForward);
}

TEST_CASE("wire: malformed bytes are refused, not misread", "[wire]") {
  wire::PeerFrame frame;
  CHECK_FALSE(frame.ParseFromString(std::string("\x0a\xff\xff\xff\xff\x0f", 6)));
  wire::Envelope envelope;
  CHECK_FALSE(envelope.ParseFromString(std::string("\x52\x05\x01", 3)));  // truncated
}

}  // namespace cohort
