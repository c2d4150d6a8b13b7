#include "nso/local_backend.h"

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "invocation/client.h"
#include "nso/api_service.h"
#include "nso/handoff_queue.h"

namespace cohort::nso {
namespace {

// A node's result as the stub library returns it.
absl::StatusOr<GroupReplies> ToGroupReplies(InvokeResult result) {
  if (!result.status.ok()) return result.status;
  GroupReplies replies;
  replies.view_id = result.view_id;
  replies.wanted = result.wanted;
  replies.replies.reserve(result.replies.size());
  for (invocation::MemberReply& reply : result.replies) {
    replies.replies.push_back(
        {std::move(reply.member), reply.node, std::move(reply.status), std::move(reply.payload)});
  }
  return replies;
}

// One invocation from this address space: posted to the protocol thread, answered by callback.
// In-process callers are the node's own application: no token or ACL applies.
absl::StatusOr<GroupReplies> LocalInvoke(Node* node, EventLoop* loop,
                                         const api::InvokeRequest& request, absl::Duration wait) {
  absl::StatusOr<InvokeOptions> options = ToInvokeOptions(request);
  if (!options.ok()) return options.status();
  struct Waiter {
    internal::SteadyNotification done;  // its wait measures the monotonic clock (steady_time.h)
    InvokeResult result;
  };
  auto waiter = std::make_shared<Waiter>();  // outlives a caller that gave up
  // Run here if the protocol thread sleeps (EventLoop::RunOrPost): no wake-up of it.
  bool posted = loop->RunOrPost([node, nso = request.nso(), options = *std::move(options),
                                 waiter]() mutable {
    node->Invoke(nso, std::move(options), [waiter](InvokeResult result) {
      waiter->result = std::move(result);
      waiter->done.Notify();
    });
  });
  if (!posted) return absl::UnavailableError("node overloaded or shutting down");
  if (!waiter->done.WaitForNotificationWithTimeout(wait)) {
    return absl::DeadlineExceededError("no result from the embedded node in time");
  }
  return ToGroupReplies(std::move(waiter->result));
}

// A watch of a group of the embedded node: the node's watcher (protocol thread) hands each
// change to the watch's thread, which runs the callbacks.
class LocalWatch final : public GroupWatch {
 public:
  using Item = absl::StatusOr<api::GroupDetailsReply>;
  ~LocalWatch() override {
    const uint64_t id = id_;
    Node* node = node_;
    const bool on_loop = loop_->InLoopThread();  // e.g. from an inline handler
    if (on_loop) {
      node->Unwatch(id);
    } else {
      RunOnLoop(loop_, [node, id] {
        node->Unwatch(id);
        return absl::OkStatus();
      }).IgnoreError();  // a node shutting down watches nothing any more
    }
    queue_->Close();
    if (!thread_.joinable()) return;
    // From its own callback, or on the protocol thread (which a callback may be waiting for):
    // the thread ends by itself once the callback running returns (it holds what it uses).
    if (on_loop || thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }

  static absl::StatusOr<std::unique_ptr<GroupWatch>> Start(
      Node* node, EventLoop* loop, const std::string& group,
      internal::ClientBackend::OnGroupChange on_change, internal::ClientBackend::OnWatchEnd on_end) {
    if (loop->InLoopThread()) {
      return absl::FailedPreconditionError(
          "WatchGroup on the node's protocol thread (an inline handler): watch from another "
          "thread");
    }
    auto watch = std::unique_ptr<LocalWatch>(new LocalWatch(node, loop));
    struct First {  // the node's first call, made within WatchGroup: the current details
      bool taken = false;
      api::GroupDetailsReply reply;
    };
    auto first = std::make_shared<First>();
    std::shared_ptr<HandoffQueue<Item>> queue = watch->queue_;
    absl::Status started = RunOnLoop(loop, [&]() -> absl::Status {
      absl::StatusOr<uint64_t> id =
          node->WatchGroup(group, [first, queue](absl::StatusOr<GroupInfo> info) {
            if (!info.ok()) {
              queue->Push(info.status());
              return;
            }
            api::GroupDetailsReply reply;
            ToGroupDetailsReply(*info, &reply);
            if (!first->taken) {
              first->taken = true;
              first->reply = std::move(reply);
              return;
            }
            // A callback that does not keep up gets the latest details, not each one between.
            queue->PushLatest(std::move(reply));
          });
      if (!id.ok()) return id.status();
      watch->id_ = *id;
      return absl::OkStatus();
    });
    if (!started.ok()) return started;
    on_change(first->reply);
    watch->thread_ = std::thread([queue, on_change = std::move(on_change),
                                  on_end = std::move(on_end)] {
      std::vector<Item> items;
      while (queue->TakeAll(&items)) {
        for (Item& item : items) {
          if (item.ok()) {
            on_change(*item);
          } else {
            if (on_end) on_end(item.status());
            return;
          }
        }
      }
    });
    return watch;
  }

 private:
  LocalWatch(Node* node, EventLoop* loop)
      : node_(node), loop_(loop), queue_(std::make_shared<HandoffQueue<Item>>()) {}
  Node* const node_;
  EventLoop* const loop_;
  std::shared_ptr<HandoffQueue<Item>> queue_;
  uint64_t id_ = 0;
  std::thread thread_;
};

class LocalClient final : public internal::ClientBackend {
 public:
  const char* via() const override { return "in-process"; }
  LocalClient(Node* node, EventLoop* loop, Daemon* daemon)
      : node_(node), loop_(loop), daemon_(daemon) {}

  absl::Status CreateGroup(const api::CreateGroupRequest& request) override {
    if (daemon_ == nullptr) return ClientBackend::CreateGroup(request);
    return daemon_->CreateGroup(request);
  }
  absl::Status DeleteGroup(const api::GroupRequest& request) override {
    if (daemon_ == nullptr) return ClientBackend::DeleteGroup(request);
    return daemon_->DeleteGroup(request.group());
  }

  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                      absl::Duration wait) override {
    return LocalInvoke(node_, loop_, request, wait);
  }
  void InvokeAsync(const api::InvokeRequest& request, absl::Duration wait, Done done) override {
    (void)wait;  // the node ends every call by its deadline
    absl::StatusOr<InvokeOptions> options = ToInvokeOptions(request);
    if (!options.ok()) return done(options.status());
    // Exactly once: by the node, or CANCELLED if the node stops before it runs the call (the
    // posted task or the node's callback is destroyed unrun).
    struct Once {
      Done done;
      void operator()(absl::StatusOr<GroupReplies> result) {
        Done taken = std::move(done);
        done = nullptr;
        if (taken) taken(std::move(result));
      }
      ~Once() {
        if (done) done(absl::CancelledError("the node stopped before the call ran"));
      }
    };
    auto once = std::make_shared<Once>();
    once->done = std::move(done);
    bool posted = loop_->RunOrPost([node = node_, nso = request.nso(),
                                    options = *std::move(options), once]() mutable {
      // On the protocol thread: `done` only hands the result over.
      node->Invoke(nso, std::move(options),
                   [once](InvokeResult result) { (*once)(ToGroupReplies(std::move(result))); });
    });
    if (!posted) (*once)(absl::UnavailableError("node overloaded or shutting down"));
  }
  absl::Status Multicast(const api::MulticastRequest& request) override {
    return RunOnLoop(loop_, [&] {
      return node_->Multicast(request.nso(), request.group(), request.payload());
    });
  }
  absl::StatusOr<api::GroupDetailsReply> GroupDetails(const api::GroupRequest& request) override {
    api::GroupDetailsReply reply;
    absl::Status status = RunOnLoop(loop_, [&]() -> absl::Status {
      absl::StatusOr<GroupInfo> info = node_->GroupDetails(request.group());
      if (!info.ok()) return info.status();
      ToGroupDetailsReply(*info, &reply);
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return reply;
  }
  absl::Status JoinGroup(const api::GroupRequest& request) override {
    return RunOnLoop(loop_, [&] { return node_->JoinGroup(request.group()); });
  }
  // An in-process node is never lost: handlers.on_lost is not called.
  absl::StatusOr<std::unique_ptr<GroupWatch>> WatchGroup(const api::GroupRequest& request,
                                                         WatchHandlers handlers) override {
    return LocalWatch::Start(node_, loop_, request.group(), std::move(handlers.on_change),
                             std::move(handlers.on_end));
  }
  absl::Status LeaveGroup(const api::GroupRequest& request) override {
    return RunOnLoop(loop_, [&] { return node_->LeaveGroup(request.group()); });
  }
  absl::Status Detach(uint64_t nso, absl::Duration timeout) override {
    (void)timeout;  // the protocol thread runs it at once
    return RunOnLoop(loop_, [&] { return node_->Detach(nso); });
  }

 private:
  Node* const node_;
  EventLoop* const loop_;
  Daemon* const daemon_;  // CreateGroup (null: refused)
};

class LocalServant final : public internal::ServantBackend {
 public:
  LocalServant(Node* node, EventLoop* loop)
      : node_(node), loop_(loop), queue_(std::make_shared<HandoffQueue<ServantDelivery>>()) {}
  ~LocalServant() override { Cancel(); }
  const char* via() const override { return "in-process"; }

  absl::Status Register(const api::ServantMessage::Register& request) override {
    std::shared_ptr<HandoffQueue<ServantDelivery>> queue = queue_;
    std::shared_ptr<Progress> progress = progress_;
    return RunOnLoop(loop_, [&]() -> absl::Status {
      absl::StatusOr<uint64_t> id = node_->RegisterServant(
          request.nso(), request.group(),
          [queue, progress](ServantDelivery delivery) {
            progress->pushed += delivery.payload.size();
            queue->Push(std::move(delivery));
          },
          ServantKeptState{request.keeps_state(), request.kept_position(), request.kept_view()},
          request.view_events());
      if (!id.ok()) return id.status();
      // Flow control (nso/group_flow.h): what the delivery thread has not taken yet.
      node_->SetServantHooks(
          *id,
          [progress] {
            const uint64_t read = progress->read.load();
            return ServantBacklog{progress->pushed.load() - read, read};
          },
          [queue, progress](const absl::Status& why) {
            // Cut off (limits.servant_cutoff_bytes) or replaced: what waits is dropped, the
            // delivery thread takes nothing more, and Finish says why.
            progress->End(why);
            queue->CloseAndDrop();
          });
      servant_ = *id;  // written before RunOnLoop returns, read by this object's user threads
      return absl::OkStatus();
    });
  }
  absl::Status RegisterInline(const api::ServantMessage::Register& request,
                              std::function<void(const api::ServantEvent&)> deliver,
                              std::function<void(const absl::Status&)> ended) override {
    return RunOnLoop(loop_, [&]() -> absl::Status {
      // On the protocol thread, as the node makes each delivery: no queue, no thread switch.
      absl::StatusOr<uint64_t> id = node_->RegisterServant(
          request.nso(), request.group(),
          [deliver = std::move(deliver), cancelled = cancelled_flag_](ServantDelivery delivery) {
            if (cancelled->load()) return;
            api::ServantEvent event;
            ToServantEvent(std::move(delivery), &event);
            deliver(event);
          },
          ServantKeptState{}, request.view_events());
      if (!id.ok()) return id.status();
      // No backlog to probe (nothing is queued), but the node may end the registration: a newer
      // servant of the group replaced this one (Node::ReplaceServants). Finish says why.
      node_->SetServantHooks(
          *id, Node::BacklogProbe(),
          [progress = progress_, ended = std::move(ended),
           cancelled = cancelled_flag_](const absl::Status& why) {
            progress->End(why);
            if (!cancelled->load()) ended(why);
          });
      servant_ = *id;
      inline_ = true;
      return absl::OkStatus();
    });
  }
  bool EventBuffered() const override { return next_ < batch_.size(); }  // delivery thread
  bool Next(api::ServantEvent* event) override {  // the servant's delivery thread only
    if (progress_->cut.load()) return false;  // cut off: the batch taken is not applied
    if (next_ == batch_.size()) {
      next_ = 0;
      if (!queue_->TakeAll(&batch_)) return false;
    }
    progress_->read += batch_[next_].payload.size();
    ToServantEvent(std::move(batch_[next_++]), event);
    return true;
  }
  void Answer(api::ServantMessage::Answer& answer) override {
    absl::Status status(static_cast<absl::StatusCode>(answer.status_code()), answer.error());
    loop_->RunOrPost([node = node_, servant = servant_, number = answer.delivery(), status,
                      more = answer.more(),
                      payload = std::move(*answer.mutable_payload())]() mutable {
      node->Answer(servant, number, status, std::move(payload), more);
    });
  }
  absl::StatusOr<GroupReplies> Invoke(const api::InvokeRequest& request,
                                      absl::Duration wait) override {
    return LocalInvoke(node_, loop_, request, wait);
  }
  void Cancel() override {
    if (cancelled_.exchange(true)) return;
    cancelled_flag_->store(true);  // an inline servant gets no delivery after this
    queue_->Close();
    if (servant_ == 0) return;
    if (inline_ && !loop_->InLoopThread()) {
      // Synchronously, so no inline delivery is running or will run once Cancel returns (the
      // sink refers to the Servant, which may be destroyed next).
      (void)RunOnLoop(loop_, [node = node_, servant = servant_] {
        node->UnregisterServant(servant);
        return absl::OkStatus();
      });
      return;
    }
    loop_->Post([node = node_, servant = servant_] { node->UnregisterServant(servant); });
  }
  absl::Status Finish() override {
    if (progress_->cut.load()) {
      absl::MutexLock lock(&progress_->mu);
      return progress_->cut_off;
    }
    return cancelled_ ? absl::CancelledError("servant stopped") : absl::OkStatus();
  }

 private:
  Node* const node_;
  EventLoop* const loop_;
  std::shared_ptr<HandoffQueue<ServantDelivery>> queue_;
  // Payload bytes queued for the delivery thread (protocol thread) and taken by it (delivery
  // thread): the servant's backlog, asked by the node at each tick.
  struct Progress {
    std::atomic<uint64_t> pushed{0};
    std::atomic<uint64_t> read{0};
    // Set by the node's end hook (protocol thread), read by the delivery thread.
    std::atomic<bool> cut{false};
    absl::Mutex mu;
    absl::Status cut_off ABSL_GUARDED_BY(mu);
    // The node ended the registration (cut off, or replaced) with `why`: Finish says so.
    void End(const absl::Status& why) {
      {
        absl::MutexLock lock(&mu);
        cut_off = why;
      }
      cut.store(true);
    }
  };
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
  uint64_t servant_ = 0;  // set by Register, before the delivery thread starts
  bool inline_ = false;   // registered by RegisterInline
  std::atomic<bool> cancelled_{false};
  // Read by the inline sink on the protocol thread, which may outlive this object's Cancel.
  std::shared_ptr<std::atomic<bool>> cancelled_flag_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<ServantDelivery> batch_;  // delivery thread only
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<internal::ClientBackend> MakeLocalClient(Node* node, EventLoop* loop,
                                                         Daemon* daemon) {
  return std::make_unique<LocalClient>(node, loop, daemon);
}

std::unique_ptr<internal::ServantBackend> MakeLocalServant(Node* node, EventLoop* loop) {
  return std::make_unique<LocalServant>(node, loop);
}

}  // namespace cohort::nso
