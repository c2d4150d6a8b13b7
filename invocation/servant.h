// The servant side of the stub library: an application object that a group's members host.
// It attaches to its daemon, registers for a group, and receives invocations and multicasts in
// the group's total order, one at a time, on one thread, so a deterministic object stays
// identical at every replica.
//
//   auto servant = cohort::Servant::Create("127.0.0.1:7201", "counter", "replica-1");
//   (*servant)->Serve("add", [&](const std::string& payload) -> absl::StatusOr<std::string> {
//     value += std::stoll(payload);
//     return std::to_string(value);
//   });
//   (*servant)->Start();
#ifndef COHORT_INVOCATION_SERVANT_H_
#define COHORT_INVOCATION_SERVANT_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "invocation/backend.h"
#include "invocation/steady_time.h"
#include "invocation/client.h"
#include "invocation/kept_call_log.h"
#include "invocation/kept_state.h"
#include "proto/api.grpc.pb.h"

namespace cohort {

// A view of the group as its servants see it (Servant::OnViewChange): the same at every member.
struct GroupView {
  std::string group;
  uint64_t view_id = 0;
  std::vector<ViewMember> members;  // by node id; `suspected` is not part of a view (false)
  // This servant's daemon is in the view. False: it left it or was removed (deliveries stop
  // until it is added again, with the state).
  bool in_view = true;
  uint64_t position = 0;  // the group's deliveries before this view (ServantEvent.group_seq)
};

class Servant {
 public:
  using Handler = std::function<absl::StatusOr<std::string>(const std::string& payload)>;
  using MulticastHandler = std::function<void(const std::string& payload)>;

  static absl::StatusOr<std::unique_ptr<Servant>> Create(const std::string& address,
                                                         const std::string& group,
                                                         const std::string& name = "");
  // With TLS and/or a bearer token (options.client_name names the servant).
  static absl::StatusOr<std::unique_ptr<Servant>> Create(const std::string& address,
                                                         const std::string& group,
                                                         const ConnectOptions& options);
  ~Servant();

  // Registers a method; call before Start. An unknown method is answered UNIMPLEMENTED.
  void Serve(const std::string& method, Handler handler);
  // A method whose handler writes its reply into `*reply` (empty on entry), memory the servant
  // keeps from one call to the next: the reply is sent from it, not moved or copied out, so such
  // a method allocates nothing per call once it has grown (issue 7; omniORB2, 001 sections 5-6).
  // An error status is answered instead of the reply. Replaces a Serve of the same method.
  using ReplyHandler = std::function<absl::Status(const std::string& payload, std::string* reply)>;
  void ServeInto(const std::string& method, ReplyHandler handler);
  void OnMulticast(MulticastHandler handler);
  // The group's views (call before Start). 003 section 3: view updates are atomic with respect
  // to deliveries (virtual synchrony): `on_view` runs on the delivery thread, in the delivery
  // order, after every delivery of the earlier views and before any of the new one, at the same
  // position at every member. The first is the view of the servant's first delivery (after a
  // state transfer, the view the state is of). E.g. the member with the lowest node id acts as a
  // primary, and every replica agrees which one that is at each point of the order.
  void OnViewChange(std::function<void(const GroupView& view)> on_view) {
    on_view_ = std::move(on_view);
  }
  // State transfer to a joining replica (membership): GetState is read at a view change, in
  // delivery order, at the member that transfers the state; SetState installs it at the joiner
  // before any other delivery. Without them a replica's state is not transferred.
  // The library sends the string in chunks, and assembles the received chunks for SetState.
  void OnGetState(std::function<absl::StatusOr<std::string>()> get_state);
  void OnSetState(std::function<absl::Status(const std::string& state)> set_state);
  // Large states, streamed: neither the library nor the daemons ever hold the whole state.
  // GetStateStream calls `write` once per chunk (any size; the library cuts big ones), in order;
  // SetStateChunk gets them in order: `offset` 0 starts a new state (drop any partial one),
  // `last` ends it. A streaming hook replaces the plain one on its side.
  using StateWriter = std::function<void(std::string chunk)>;
  void OnGetStateStream(std::function<absl::Status(const StateWriter& write)> get_state);
  void OnSetStateChunk(
      std::function<absl::Status(uint64_t offset, const std::string& chunk, bool last)> set_state);

  // Group-to-group invocation (003 section 4.3), from inside a handler only: the call that this
  // group makes while processing the current delivery. Every replica of the group makes the same
  // call; the called group executes it once and every replica gets the same replies. Refused
  // for backpressure (its daemon holds too many of this servant's requests not yet ordered), it
  // waits for room as a Client's call does (ConnectOptions::backpressure_wait, at most its
  // deadline, which counts the wait).
  absl::StatusOr<GroupReplies> InvokeGroup(const std::string& group, const std::string& method,
                                           const std::string& payload, Mode mode,
                                           absl::Duration deadline = absl::Seconds(5));

  // Surviving the daemon (call before Start; a servant made by Create): when the stream ends
  // because the daemon went away (it restarted or stopped, or the link to it broke: UNAVAILABLE),
  // the servant attaches and registers again by itself, retrying with back-off (0.1 s up to 2 s)
  // until it is registered, Stop is called (it ends within about 1 s: an attempt to attach waits
  // up to 1 s for the daemon), or `give_up_after` has passed; Wait and Ended report only the end
  // of that. Before each new registration the object is reset to the state it had
  // at Start (read then with OnGetState/OnGetStateStream, given back with OnSetState/
  // OnSetStateChunk), and the group's state follows by state transfer, as for a new servant
  // (RELIABILITY.md). So a replica never keeps a state the others may not have: after a fresh
  // start of the whole group (every daemon restarted at once) the replicas start over from their
  // Start states, as new servants would. Without state hooks the object is kept as it is.
  void RejoinAfterDaemonRestart(absl::Duration give_up_after = absl::InfiniteDuration());
  // How many times the servant registered again (RejoinAfterDaemonRestart).
  uint64_t rejoins() const;

  // Durable groups (GroupConfig::durable; call before Start, with OnGetState/OnSetState or their
  // streaming kinds): after every delivery, before its answer, the servant writes the object's
  // whole state, its position in the group's order and the latest view to `path`
  // (nso/durable_file.h: a temporary file, fsync, rename; so each call costs a GetState and a
  // synced write; a view change is written too: view ids grow across power cuts), with the
  // answers of the latest calls (invocation/kept_call_log.h: a call resent across a power cut is
  // answered as it was, not executed again). Deliveries read together share one write. When every
  // member of the group restarted, the daemons re-found the group from the most advanced state
  // their servants kept, and the others get it by state transfer (README "Durable groups").
  // Start reads the file (an error naming it if it is not this group's kept state) but does not
  // apply it: its daemon says whether to ("$restore_kept"); otherwise the object starts as
  // usual and the group's state comes by transfer. A write that fails stops the servant (Wait
  // returns why): a replica that cannot keep its state leaves the group rather than answer.
  // Not with DispatchInline.
  void KeepStateIn(const std::string& path) { kept_path_ = path; }

  // Inline dispatch (call before Start; only for a servant of an embedded node, nso/embedded.h):
  // handlers run on the node's protocol thread as each delivery is made, with no hand-off to a
  // delivery thread and back (two thread switches less per call: 001 sections 5-6, 003 section 3's
  // NSO invoking its application object directly). A handler must then be short and never block:
  // while it runs the node sends nothing, not even its "I am alive" messages. InvokeGroup is
  // refused (it would wait for the thread it runs on), and Stop waits for a running handler.
  void DispatchInline() { inline_ = true; }

  // Registers with the daemon and starts delivering. Returns once registered (or why not).
  absl::Status Start();
  void Stop();
  // How deliveries reach this servant: "local" (the daemon's Unix socket), "grpc", "in-process".
  const char* via() const;
  // Blocks until the daemon closes the stream or Stop() is called; returns why it ended
  // (NOT_FOUND when the group was deleted, DeleteGroup).
  absl::Status Wait();
  // Without blocking: the stream has ended (why: `*why`, when given). A supervisor starts a new
  // servant then; it gets the group's state when its daemon re-admits it.
  bool Ended(absl::Status* why = nullptr);

  // For the runtime (an embedded node, nso/embedded.h): a Servant over another way to its NSO.
  static std::unique_ptr<Servant> WithBackend(std::unique_ptr<internal::ServantBackend> backend,
                                              uint64_t nso, std::string group);

 private:
  // A new NSO at the servant's daemon and a backend over which to register with it (Create's).
  using Reconnect = std::function<absl::StatusOr<
      std::pair<std::unique_ptr<internal::ServantBackend>, uint64_t>>()>;

  Servant(std::unique_ptr<internal::ServantBackend> backend, uint64_t nso, std::string group);
  api::ServantMessage::Register Registration() const;
  void DeliveryLoop();
  // The stream ended with `*why`: registers again (RejoinAfterDaemonRestart) and returns true,
  // or returns false with `*why` the servant's end.
  bool Rejoin(absl::Status* why);
  void ResetState();  // to initial_state_, on the delivery thread
  absl::Status InstallWholeState(std::string state);  // through the set-state hooks, one chunk
  bool HasStateHooks() const {
    return (get_state_ || get_state_stream_) && (set_state_ || set_state_chunk_);
  }
  void Handle(const api::ServantEvent& event);  // one delivery, on the delivery thread (or inline)
  void Answer(uint64_t delivery, absl::StatusOr<std::string> result, bool more = false);
  // Answers with `*reply`, lent to the answer while it is sent (ServeInto's reply_): its memory
  // stays for the next call unless the backend moves the payload on (in-process).
  void AnswerFrom(uint64_t delivery, std::string* reply);
  // A handler's reply larger than the daemon takes (ServantEvent.max_reply_bytes) becomes the
  // RESOURCE_EXHAUSTED error the daemon would send for it.
  void BoundReply(absl::StatusOr<std::string>* result) const;
  bool ReplyFits(size_t bytes) const;  // within the daemon's max_reply_bytes (or none said)
  void SendState(uint64_t delivery);
  absl::Status TakeStateChunk(const api::ServantEvent& event);
  // "$restore_kept": installs kept_ and answers with the calls kept with it.
  // "$get_state", "$set_state", "$restore_kept", "$view": handled (true), or not reserved.
  bool HandleReserved(const api::ServantEvent& event);
  void RestoreKept(uint64_t delivery);
  // KeepStateIn: reads the kept state aside (kept_); writes the object's state at `position`
  // (false: it could not, and the servant stops).
  absl::Status LoadKept();
  bool Keep(uint64_t position);
  // Group commit (KeepStateIn): a delivery applied is kept, and its answer sent, once no other
  // delivery is already waiting (or kMaxHeldAnswers are held): one write for the deliveries read
  // together. Noted by Applied; FlushKept writes the state and sends the answers.
  void Applied(uint64_t position, uint64_t delivery, bool answer,
               absl::StatusOr<std::string> result);
  bool FlushKept();
  absl::StatusOr<std::string> ReadState();

  // gRPC to a daemon, or in-process. Replaced (under mu_) only by the delivery thread (Rejoin),
  // which reads it without the lock; other threads (Stop, via) read it under mu_.
  std::unique_ptr<internal::ServantBackend> backend_;
  uint64_t nso_;  // replaced with backend_
  Reconnect reconnect_;  // Create's; none for an embedded node's servant
  bool rejoin_ = false;
  absl::Duration give_up_after_ = absl::InfiniteDuration();
  std::optional<std::string> initial_state_;  // the state at Start, when the hooks can reset it
  const std::string group_;
  // A method's handler: one of the two kinds (Serve, ServeInto).
  struct Method {
    Handler handler;
    ReplyHandler into;
  };
  std::map<std::string, Method> methods_;
  std::string reply_;  // ServeInto's handlers write here (delivery thread, or inline)
  MulticastHandler multicast_handler_;
  std::function<void(const GroupView& view)> on_view_;
  std::function<absl::StatusOr<std::string>()> get_state_;
  std::function<absl::Status(const std::string&)> set_state_;
  std::function<absl::Status(const StateWriter&)> get_state_stream_;
  std::function<absl::Status(uint64_t, const std::string&, bool)> set_state_chunk_;
  std::string partial_state_;  // delivery thread only: chunks so far, for a plain SetState
  std::string kept_path_;      // KeepStateIn
  // The state found in kept_path_ at Start (or a rejoin), until the daemon says to take it back
  // or anything else is delivered (delivery thread only after Start).
  std::optional<invocation::KeptState> kept_;
  // The calls kept with the state, each with its answer (delivery thread only).
  invocation::KeptCallLog kept_calls_;
  // The latest view the deliveries came in, kept with the state (a group re-founded from kept
  // states numbers its view above it: invocation/kept_state.h).
  uint64_t kept_view_ = 0;
  // Applied but not yet kept (delivery thread only): the position, and the answers held until
  // the state is on disk.
  std::optional<uint64_t> unkept_position_;
  std::vector<std::pair<uint64_t, absl::StatusOr<std::string>>> held_answers_;
  std::thread thread_;
  bool inline_ = false;  // DispatchInline: no thread_
  // The delivery being processed (delivery thread only): numbers the group's nested calls.
  uint64_t current_group_seq_ = 0;
  uint32_t nested_calls_ = 0;
  // How long InvokeGroup waits for room when the daemon refuses it for backpressure (at most its
  // deadline): ConnectOptions::backpressure_wait of Create; 5 s for an embedded node's servant.
  absl::Duration backpressure_wait_ = absl::Seconds(5);
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // Stop was called: no new registration
  internal::SteadyNotification stopped_;  // notified with stopping_ (Rejoin's pauses end on it)
  void MarkStopping() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    stopping_ = true;
    stopped_.Notify();
  }
  // A backend registering again (Rejoin), cancelled by Stop.
  internal::ServantBackend* registering_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t rejoins_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_status_ ABSL_GUARDED_BY(mu_);
  // The daemon's `ended` event (its group was deleted): NOT_FOUND naming why.
  absl::Status ended_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cohort

#endif  // COHORT_INVOCATION_SERVANT_H_
