#include "tools/bench/allocations.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "nso/heap_count.h"
#include "proto/api.grpc.pb.h"

namespace cohort::bench {
namespace {

constexpr int64_t kCalls = 2000;
constexpr int64_t kByValueCalls = 500;

// Each daemon's heap_allocations now, or nullopt (and *note) if one does not say.
std::optional<std::vector<uint64_t>> DaemonCounts(const std::vector<std::string>& addresses,
                                                  std::string* note) {
  std::vector<uint64_t> counts;
  for (const std::string& address : addresses) {
    auto stub = api::Admin::NewStub(DaemonChannel(address));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    api::StatusRequest request;
    api::StatusReply reply;
    grpc::Status status = stub->Status(&context, request, &reply);
    if (!status.ok()) {
      *note = absl::StrCat("Admin.Status at ", address, ": ", status.error_message());
      return std::nullopt;
    }
    if (reply.heap_allocations() == 0) {
      *note = absl::StrCat("the daemon at ", address, " does not count its heap allocations");
      return std::nullopt;
    }
    counts.push_back(reply.heap_allocations());
  }
  return counts;
}

constexpr int kInFlight = 16;

// One run of pipelined calls: `total` calls, kInFlight at a time, each started by an earlier
// one's completion (on the Client's callbacks thread).
class Pipeline {
 public:
  explicit Pipeline(int64_t total) : total_(total) {}
  // Claims the next call; false once `total` have started.
  bool Claim() { return started_.fetch_add(1) < total_; }
  // On the callbacks thread.
  void Ended(bool ok) {
    ok_ += ok ? 1 : 0;
    if (++ended_ == total_) all_ended_.Notify();
  }
  // The calls that succeeded, once every call has ended (each does by its deadline).
  int64_t Wait() {
    all_ended_.WaitForNotification();
    return ok_;
  }

 private:
  const int64_t total_;
  std::atomic<int64_t> started_{0};
  int64_t ended_ = 0;  // the callbacks thread's
  int64_t ok_ = 0;
  absl::Notification all_ended_;
};

// This process's allocations per call over `total` pipelined calls (0 if none succeeded):
// through AsyncCalls kept from a first, unmeasured run (`into`), or through InvokeAsync.
double PipelinedAllocations(Client* client, const std::string& payload, Mode mode, Style style,
                            int64_t total, bool into) {
  Pipeline* current = nullptr;  // the run's; set before its first call starts
  std::vector<std::unique_ptr<AsyncCall>> kept;
  for (int k = 0; k < kInFlight; ++k) {
    kept.push_back(std::make_unique<AsyncCall>([&](AsyncCall& call) {
      // Ended last: once the run's last call has ended, its Pipeline may go.
      Pipeline* run = current;
      if (run->Claim()) {
        client->InvokeAsyncInto("bench", "echo", payload, mode, &call, absl::Seconds(5), style);
      }
      run->Ended(call.status().ok());
    }));
  }
  std::function<void()> start_by_value = [&] {
    client->InvokeAsync(
        "bench", "echo", payload, mode,
        [&](absl::StatusOr<GroupReplies> result) {
          Pipeline* run = current;  // Ended last, as above
          if (run->Claim()) start_by_value();
          run->Ended(result.ok());
        },
        absl::Seconds(5), style);
  };
  double per_call = 0;
  for (int run = 0; run < 2; ++run) {  // the first grows the kept memory
    Pipeline pipeline(total);
    current = &pipeline;
    const uint64_t before = *nso::HeapAllocations();
    for (int k = 0; k < kInFlight; ++k) {
      if (!pipeline.Claim()) break;
      if (into) {
        client->InvokeAsyncInto("bench", "echo", payload, mode, kept[k].get(), absl::Seconds(5),
                                style);
      } else {
        start_by_value();
      }
    }
    const int64_t ok = pipeline.Wait();
    const uint64_t after = *nso::HeapAllocations();
    per_call = ok > 0 ? static_cast<double>(after - before) / static_cast<double>(ok) : 0;
  }
  return per_call;
}

}  // namespace

AllocationResult MeasureAllocations(Client* client, const std::vector<std::string>& addresses,
                                    int n, const std::string& ordering, int payload_bytes,
                                    AllocationPath path) {
  AllocationResult result;
  result.n = n;
  result.ordering = ordering;
  const bool open = path == AllocationPath::kOpenFirst;
  result.path = open ? "open first" : "closed all";
  const std::string payload(static_cast<size_t>(payload_bytes), 'x');
  const Mode mode = open ? Mode::kFirst : Mode::kAll;
  const Style style = open ? Style::kOpen : Style::kClosed;
  GroupReplies replies;  // the caller's, reused
  auto call = [&] {
    return client->InvokeInto("bench", "echo", payload, mode, &replies, absl::Seconds(5), style)
        .ok();
  };
  for (int i = 0; i < 200; ++i) call();  // warm: connections, caches and pools at steady size
  // Two reads back to back: the second's growth over the first is what one read adds (the
  // daemon answers Admin.Status through gRPC, building its status: about a thousand).
  std::optional<std::vector<uint64_t>> first = DaemonCounts(addresses, &result.note);
  if (!first) return result;
  std::optional<std::vector<uint64_t>> before = DaemonCounts(addresses, &result.note);
  const std::optional<uint64_t> own_before = nso::HeapAllocations();
  if (!before) return result;
  for (int64_t i = 0; i < kCalls; ++i) result.calls += call() ? 1 : 0;
  const std::optional<uint64_t> own_after = nso::HeapAllocations();
  std::optional<std::vector<uint64_t>> after = DaemonCounts(addresses, &result.note);
  if (!after) return result;
  if (result.calls == 0) {
    result.note = "no call succeeded";
    return result;
  }
  const double calls = static_cast<double>(result.calls);
  for (size_t i = 0; i < addresses.size(); ++i) {
    const uint64_t read = (*before)[i] - (*first)[i];
    const uint64_t grown = (*after)[i] - (*before)[i];
    result.status_read += static_cast<double>(read) / static_cast<double>(addresses.size());
    result.per_daemon.push_back(static_cast<double>(grown > read ? grown - read : 0) / calls);
    result.daemons += result.per_daemon.back();
  }
  if (own_before && own_after) {
    result.client_and_servants = static_cast<double>(*own_after - *own_before) / calls;
    int64_t by_value = 0;
    const uint64_t start = *nso::HeapAllocations();
    for (int64_t i = 0; i < kByValueCalls; ++i) {
      by_value += client->Invoke("bench", "echo", payload, mode, absl::Seconds(5), style).ok();
    }
    if (by_value > 0) {
      result.invoke_by_value = static_cast<double>(*nso::HeapAllocations() - start) /
                               static_cast<double>(by_value);
    }
    result.pipelined_into = PipelinedAllocations(client, payload, mode, style, kCalls, true);
    result.pipelined_by_value =
        PipelinedAllocations(client, payload, mode, style, kByValueCalls, false);
  }
  return result;
}

}  // namespace cohort::bench
