// libFuzzer target: validation of application API requests by the Node.
//
// The input is a sequence of records (test/fuzz/fuzz_node.h: u8 control, u16 LE length, bytes).
// control bits 0-1 choose the call and how the bytes are parsed, as the gRPC service would:
//   0: cohort::api::InvokeRequest    -> Node::Invoke (options built as ApiService::InvokeOnLoop)
//   1: cohort::api::MulticastRequest -> Node::Multicast
//   2: cohort::api::GroupRequest     -> Node::GroupDetails, JoinGroup or LeaveGroup (control bit 7;
//                                       bit 6: leave), or with bit 7 and an odd nso field
//                                       RemoveGroup of incarnation 0 (DeleteGroup)
//   3: cohort::api::AttachRequest    -> Node::Attach, or Detach of nso control>>2 (bit 7)
// control bits 2-6: milliseconds to advance the clock by, times 16, then Tick.
// Bytes that do not parse are refused as gRPC would (no call reaches the Node).
//
// The Node is n2 of fuzz_node.h with peers that never answer, so groups g, s and other can only
// expire or fail, while `solo` (n2 alone) orders, delivers to its servant and replies locally.
// Must hold for any input: no crash, no sanitizer report; every Invoke callback runs exactly once;
// a well-formed invocation of `solo` (attached NSO that has not called another group before, method
// not empty and not reserved, payload within the limit, no deadline shorter than 1 s) succeeds.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nso/node.h"
#include "proto/api.pb.h"
#include "test/fuzz/fuzz_node.h"

namespace {

using cohort::fuzz::NodeHarness;

constexpr cohort::nso::NodeId kSelf = 2;
constexpr size_t kMaxRecords = 64;

void Check(bool ok, const char* what, const std::string& detail = "") {
  cohort::fuzz::CheckInvariant("api_fuzz", ok, what, detail);
}

struct CallRecord {
  int done = 0;
  bool expect_ok = false;
  absl::Status status;
  size_t replies = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cohort::fuzz::QuietLogs();
  auto calls = std::make_shared<std::vector<CallRecord>>();
  {
    NodeHarness harness(kSelf);
    cohort::nso::Node& node = harness.node();
    std::vector<uint64_t> nsos = {harness.client_nso()};
    std::set<uint64_t> other_group_nsos;  // NSOs that called or multicast a group other than solo
    bool disturbed = false;  // a Leave/Join/Detach happened: `solo` calls may legitimately fail
    for (const cohort::fuzz::Record& record :
         cohort::fuzz::SplitRecords(data, size, kMaxRecords)) {
      switch (record.control & 3) {
        case 0: {
          cohort::api::InvokeRequest request;
          if (!request.ParseFromString(record.bytes)) break;
          cohort::nso::InvokeOptions options;
          options.group = request.group();
          options.method = request.method();
          options.payload = request.payload();
          options.deadline_ms = request.deadline_ms();
          if (request.style() == cohort::api::OPEN) options.style = cohort::nso::GroupConfig::Style::kOpen;
          if (request.style() == cohort::api::CLOSED) options.style = cohort::nso::GroupConfig::Style::kClosed;
          if (request.mode() != cohort::api::MODE_UNSPECIFIED) {
            switch (request.mode()) {  // ApiService's FromApiMode
              case cohort::api::ONE_WAY: options.mode = cohort::invocation::Mode::kOneWay; break;
              case cohort::api::WAIT_FIRST: options.mode = cohort::invocation::Mode::kFirst; break;
              case cohort::api::WAIT_MAJORITY: options.mode = cohort::invocation::Mode::kMajority; break;
              case cohort::api::WAIT_ALL: options.mode = cohort::invocation::Mode::kAll; break;
              default: continue;  // INVALID_ARGUMENT before the Node
            }
            options.mode_given = true;
          }
          const bool attached = std::find(nsos.begin(), nsos.end(), request.nso()) != nsos.end();
          CallRecord call;
          // The causal barrier (invocation/causal_barrier.h) may hold a call behind the same
          // NSO's earlier request to another group, which never gets ordered here.
          const bool held_back = other_group_nsos.count(request.nso()) > 0;
          if (request.group() != "solo") other_group_nsos.insert(request.nso());
          call.expect_ok = request.group() == "solo" && attached && !held_back &&
                           !request.method().empty() &&
                           request.method()[0] != '$' && request.payload().size() <= 4096 &&
                           (request.deadline_ms() == 0 || request.deadline_ms() >= 1000);
          const size_t index = calls->size();
          calls->push_back(call);
          node.Invoke(request.nso(), std::move(options),
                      [calls, index](cohort::nso::InvokeResult result) {
                        CallRecord& call = (*calls)[index];
                        call.done++;
                        call.status = result.status;
                        call.replies = result.replies.size();
                      });
          harness.Pump();
          break;
        }
        case 1: {
          cohort::api::MulticastRequest request;
          if (!request.ParseFromString(record.bytes)) break;
          if (request.group() != "solo") other_group_nsos.insert(request.nso());
          (void)node.Multicast(request.nso(), request.group(), request.payload());
          harness.Pump();
          break;
        }
        case 2: {
          cohort::api::GroupRequest request;
          if (!request.ParseFromString(record.bytes)) break;
          if ((record.control & 0x80) && (request.nso() & 1)) {
            disturbed = true;
            (void)node.RemoveGroup(request.group(), 0);
          } else if (record.control & 0x80) {
            disturbed = true;
            (void)((record.control & 0x40) ? node.LeaveGroup(request.group())
                                           : node.JoinGroup(request.group()));
          } else {
            absl::StatusOr<cohort::nso::GroupInfo> info = node.GroupDetails(request.group());
            if (info.ok()) Check(info->config != nullptr, "GroupDetails without a config");
          }
          harness.Pump();
          break;
        }
        case 3: {
          cohort::api::AttachRequest request;
          if (!request.ParseFromString(record.bytes)) break;
          if (record.control & 0x80) {
            disturbed = true;
            uint64_t nso = (record.control >> 2) & 0x1f;
            if (node.Detach(nso).ok()) {
              nsos.erase(std::remove(nsos.begin(), nsos.end(), nso), nsos.end());
            }
          } else {
            absl::StatusOr<uint64_t> nso = node.Attach(request.client_name());
            if (nso.ok()) nsos.push_back(*nso);
          }
          break;
        }
      }
      harness.Advance(static_cast<uint64_t>((record.control >> 2) & 0x1f) * 16);
    }
    // 2.5 s of 10 ms ticks (as the daemon ticks: ordering takes a few), then every deadline
    // (at most 2^32 - 1 ms) passes.
    for (int tick = 0; tick < 250; ++tick) harness.Advance(10);
    harness.Advance(uint64_t{1} << 32);
    harness.Advance(1000);
    for (const CallRecord& call : *calls) {
      if (call.expect_ok && !disturbed && call.done == 1) {
        Check(call.status.ok(), "a well-formed call of group solo failed:", call.status.ToString());
      }
    }
  }
  for (const CallRecord& call : *calls) {
    Check(call.done == 1, "an invocation's callback did not run exactly once");
  }
  return 0;
}
