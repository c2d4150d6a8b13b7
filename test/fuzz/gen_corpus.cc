// Writes the seed corpus of the wire, api and local fuzz targets (built and run by `tools/fuzz corpus`;
// its output is checked in under test/fuzz/corpus/).
//
// wire: three real Nodes n1..n3 (test/fuzz/fuzz_node.h) exchange envelopes in memory while their
// clients invoke groups g (consensus), s (sequencer, open) and other (open, n2 outside); what n1
// and n3 send to n2 is written as the records wire_fuzz reads: a Hello per stream, then one Frame
// per stream and step, the last record of a step advancing the clock by 8 ms.
// api: hand-built request sequences for api_fuzz (every call kind, valid and invalid).
// local: connections for local_fuzz (hello, calls, a servant, and bad frames of each kind).
//
//   gen_corpus OUT_DIR     writes OUT_DIR/wire/*.bin, OUT_DIR/api/*.bin and OUT_DIR/local/*.bin
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nso/framing.h"
#include "proto/api.pb.h"
#include "proto/wire.pb.h"
#include "test/fuzz/fuzz_node.h"

namespace {

using cohort::fuzz::AppendRecord;
using cohort::fuzz::NodeHarness;
using cohort::nso::NodeId;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
}

std::string Hello(NodeId node) {
  cohort::wire::PeerFrame frame;
  frame.mutable_hello()->set_version(cohort::wire::VERSION_1);
  frame.mutable_hello()->set_node(node);
  frame.mutable_hello()->set_cluster(cohort::fuzz::kCluster);
  return frame.SerializeAsString();
}

struct Scenario {
  std::string name;
  int steps = 40;
  // At these steps, node -> (group, mode) invocations.
  std::multimap<int, std::pair<NodeId, std::pair<std::string, cohort::invocation::Mode>>> calls;
  int restart_n1_at = -1;  // n1 restarts (new incarnation, no state): membership + state transfer
};

std::string RunScenario(const Scenario& scenario) {
  std::map<NodeId, std::unique_ptr<NodeHarness>> nodes;
  for (NodeId id = 1; id <= 3; ++id) {
    nodes[id] = std::make_unique<NodeHarness>(id, 1000 + id);
    nodes[id]->transport().keep = true;
  }
  std::string out;
  AppendRecord(&out, 0, Hello(1));
  AppendRecord(&out, 1, Hello(3));
  for (int step = 0; step < scenario.steps; ++step) {
    if (step == scenario.restart_n1_at) {
      nodes[1] = std::make_unique<NodeHarness>(1, 5001, nodes[2]->now_ms());
      nodes[1]->transport().keep = true;
    }
    auto range = scenario.calls.equal_range(step);
    for (auto it = range.first; it != range.second; ++it) {
      cohort::nso::InvokeOptions options;
      options.group = it->second.second.first;
      options.method = "add";
      options.payload = std::to_string(step);
      options.mode = it->second.second.second;
      options.mode_given = true;
      options.deadline_ms = 1000;
      NodeHarness& caller = *nodes[it->second.first];
      caller.node().Invoke(caller.client_nso(), std::move(options), [](cohort::nso::InvokeResult) {});
    }
    // Deliver everything sent so far (several hops per step), recording what reaches n2.
    cohort::wire::PeerFrame to_n2[2];
    for (int hop = 0; hop < 4; ++hop) {
      for (NodeId from = 1; from <= 3; ++from) {
        auto outbox = std::move(nodes[from]->transport().outbox);
        nodes[from]->transport().outbox.clear();
        for (auto& [to, envelope] : outbox) {
          if (nodes.count(to) == 0) continue;
          if (to == 2) *to_n2[from == 1 ? 0 : 1].mutable_frame()->add_envelopes() = envelope;
          nodes[to]->node().Receive(from, envelope);
          nodes[to]->Pump();
        }
      }
    }
    for (int stream = 0; stream < 2; ++stream) {
      uint8_t control = static_cast<uint8_t>(stream) | (stream == 1 ? 0x10 : 0);  // +8 ms at the end
      AppendRecord(&out, control, to_n2[stream].SerializeAsString());
    }
    for (auto& [id, node] : nodes) node->Advance(8);
  }
  return out;
}

template <typename Message>
std::string Bytes(const Message& message) {
  return message.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_corpus OUT_DIR\n");
    return 2;
  }
  cohort::fuzz::QuietLogs();
  const std::string dir = argv[1];
  using Mode = cohort::invocation::Mode;

  std::vector<Scenario> scenarios;
  {
    Scenario idle{"idle"};
    idle.steps = 12;
    scenarios.push_back(idle);
  }
  {
    Scenario calls{"consensus_calls"};
    calls.calls.insert({2, {1, {"g", Mode::kAll}}});
    calls.calls.insert({3, {3, {"g", Mode::kMajority}}});
    calls.calls.insert({5, {2, {"g", Mode::kFirst}}});
    calls.calls.insert({6, {1, {"g", Mode::kOneWay}}});
    calls.steps = 20;
    scenarios.push_back(calls);
  }
  {
    Scenario calls{"sequencer_calls"};
    calls.calls.insert({2, {1, {"s", Mode::kAll}}});
    calls.calls.insert({3, {3, {"s", Mode::kMajority}}});
    calls.calls.insert({4, {2, {"s", Mode::kFirst}}});
    calls.steps = 20;
    scenarios.push_back(calls);
  }
  {
    Scenario calls{"open_outside"};
    calls.calls.insert({2, {2, {"other", Mode::kAll}}});
    calls.calls.insert({3, {1, {"other", Mode::kFirst}}});
    calls.steps = 16;
    scenarios.push_back(calls);
  }
  {
    Scenario restart{"restart_state_transfer"};
    restart.calls.insert({2, {1, {"g", Mode::kAll}}});
    restart.calls.insert({3, {3, {"s", Mode::kAll}}});
    restart.restart_n1_at = 8;
    restart.calls.insert({30, {3, {"g", Mode::kMajority}}});
    restart.steps = 60;
    scenarios.push_back(restart);
  }
  for (const Scenario& scenario : scenarios) {
    Write(dir + "/wire/" + scenario.name + ".bin", RunScenario(scenario));
  }

  // api_fuzz seeds: control bits 0-1 = call kind, bits 2-6 = clock advance / 16 ms.
  auto invoke = [](uint64_t nso, const std::string& group, const std::string& method,
                   const std::string& payload, cohort::api::Mode mode, uint32_t deadline,
                   cohort::api::Style style) {
    cohort::api::InvokeRequest request;
    request.set_nso(nso);
    request.set_group(group);
    request.set_method(method);
    request.set_payload(payload);
    request.set_mode(mode);
    request.set_deadline_ms(deadline);
    request.set_style(style);
    return Bytes(request);
  };
  {
    std::string out;
    for (cohort::api::Mode mode : {cohort::api::MODE_UNSPECIFIED, cohort::api::ONE_WAY,
                                   cohort::api::WAIT_FIRST, cohort::api::WAIT_MAJORITY,
                                   cohort::api::WAIT_ALL}) {
      AppendRecord(&out, 0 | (1 << 2), invoke(1, "solo", "add", "5", mode, 0, cohort::api::STYLE_UNSPECIFIED));
    }
    Write(dir + "/api/solo_modes.bin", out);
  }
  {
    std::string out;
    for (const char* group : {"g", "s", "other", "solo", "missing", ""}) {
      for (cohort::api::Style style : {cohort::api::OPEN, cohort::api::CLOSED}) {
        AppendRecord(&out, 0, invoke(1, group, "get", "", cohort::api::WAIT_ALL, 100, style));
      }
    }
    AppendRecord(&out, 0x7c, "");  // advance 31 * 16 ms
    Write(dir + "/api/groups_styles.bin", out);
  }
  {
    std::string out;
    AppendRecord(&out, 0, invoke(99, "solo", "add", "1", cohort::api::WAIT_FIRST, 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 0, invoke(1, "solo", "", "1", cohort::api::WAIT_FIRST, 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 0, invoke(1, "solo", "add", std::string(5000, 'x'), cohort::api::WAIT_FIRST, 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 0, invoke(1, "solo", "add", "1", static_cast<cohort::api::Mode>(9), 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 0, invoke(1, "solo", "$get_state", "", cohort::api::WAIT_FIRST, 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 0, invoke(1, "solo", "fail", "", cohort::api::WAIT_ALL, 1, cohort::api::STYLE_UNSPECIFIED));
    Write(dir + "/api/invalid_invokes.bin", out);
  }
  {
    std::string out;
    cohort::api::MulticastRequest multicast;
    multicast.set_nso(1);
    multicast.set_group("solo");
    multicast.set_payload("hello");
    AppendRecord(&out, 1, Bytes(multicast));
    multicast.set_group("g");
    AppendRecord(&out, 1, Bytes(multicast));
    cohort::api::GroupRequest details;
    details.set_nso(1);
    details.set_group("g");
    AppendRecord(&out, 2, Bytes(details));
    details.set_group("nope");
    AppendRecord(&out, 2, Bytes(details));
    details.set_group("other");
    AppendRecord(&out, 2 | 0x80, Bytes(details));           // JoinGroup
    AppendRecord(&out, 2 | 0x80 | 0x40, Bytes(details));    // LeaveGroup
    cohort::api::AttachRequest attach;
    attach.set_client_name("fuzz-client");
    AppendRecord(&out, 3, Bytes(attach));
    AppendRecord(&out, 0, invoke(3, "solo", "add", "2", cohort::api::WAIT_ALL, 0, cohort::api::STYLE_UNSPECIFIED));
    AppendRecord(&out, 3 | 0x80 | (3 << 2), Bytes(attach));  // Detach NSO 3
    AppendRecord(&out, 0, invoke(3, "solo", "add", "2", cohort::api::WAIT_ALL, 0, cohort::api::STYLE_UNSPECIFIED));
    Write(dir + "/api/other_calls.bin", out);
  }

  // local: a control byte (bit 0: a valid hello first, bit 1: then a valid call to solo), then
  // the bytes of the connection (test/fuzz/local_fuzz.cc). NSO 1 is the client, 2 the servant.
  {
    auto frame = [](const cohort::api::LocalFrame& message) {
      std::string out;
      cohort::nso::AppendFrame(message, &out);
      return out;
    };
    auto call = [&](uint64_t number, uint64_t nso, const std::string& group,
                    cohort::api::Mode mode) {
      cohort::api::LocalFrame message;
      message.mutable_call()->set_call(number);
      cohort::api::InvokeRequest* invoke = message.mutable_call()->mutable_invoke();
      invoke->set_nso(nso);
      invoke->set_group(group);
      invoke->set_method("add");
      invoke->set_payload("1");
      invoke->set_mode(mode);
      invoke->set_deadline_ms(1000);
      return frame(message);
    };
    Write(dir + "/local/hello_call.bin", std::string(1, '\x03'));
    Write(dir + "/local/calls.bin",
          std::string(1, '\x01') + call(1, 1, "solo", cohort::api::WAIT_ALL) +
              call(2, 1, "solo", cohort::api::ONE_WAY) + call(3, 1, "g", cohort::api::WAIT_FIRST) +
              call(4, 1, "nope", cohort::api::WAIT_MAJORITY) + call(5, 99, "solo", cohort::api::WAIT_ALL) +
              call(1, 1, "solo", cohort::api::WAIT_ALL));
    cohort::api::LocalFrame servant;
    servant.mutable_servant()->mutable_register_()->set_nso(2);
    servant.mutable_servant()->mutable_register_()->set_group("solo");
    cohort::api::LocalFrame answer;
    answer.mutable_servant()->mutable_answer()->set_delivery(1);
    answer.mutable_servant()->mutable_answer()->set_payload("x");
    Write(dir + "/local/servant.bin",
          std::string(1, '\x03') + frame(servant) + frame(answer) + frame(answer));
    Write(dir + "/local/servant_then_call.bin",
          std::string(1, '\x01') + frame(servant) + call(1, 1, "solo", cohort::api::WAIT_ALL));
    Write(dir + "/local/no_hello.bin", std::string(1, '\x00') + call(1, 1, "solo", cohort::api::WAIT_ALL));
    cohort::api::LocalFrame wrong_key;
    wrong_key.mutable_hello()->set_version(1);
    wrong_key.mutable_hello()->set_key(12345);
    Write(dir + "/local/wrong_key.bin", std::string(1, '\x00') + frame(wrong_key));
    Write(dir + "/local/second_hello.bin", std::string(1, '\x01') + frame(wrong_key));
    Write(dir + "/local/oversized.bin", std::string(1, '\x01') + std::string("\xff\xff\xff\x7f", 4));
    Write(dir + "/local/garbage.bin", std::string(1, '\x01') + std::string("\x05\x00\x00\x00\xff\xff\xff\xff\xff", 9));
  }
  return 0;
}
