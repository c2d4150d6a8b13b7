// The two ends of a gRPC peer stream as callback reactors: InboundPeerStream serves a stream a
// lower-id peer dialed, OutboundPeerStream is one dialing attempt towards a higher-id peer. Each
// checks the other's hello, then attaches to the peer's link as its writer (nso/peer_link.h) and
// reads frames until the stream ends. No thread of their own: frames are read and written by
// gRPC's threads and, for the first write of a batch, by the protocol thread (001 section 3, no
// thread switching along the call chain; issue 7).
//
// A reactor ends (Finish, or the dialer's hold removed) only when its reads are over, its hello
// is written and the link has released it: so no write starts on a stream that is done.
#ifndef COHORT_NSO_PEER_REACTORS_H_
#define COHORT_NSO_PEER_REACTORS_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "nso/peer_link.h"
#include "nso/transport.h"
#include "proto/wire.grpc.pb.h"

namespace cohort::nso {

// What a stream's reactor needs of its transport.
class PeerStreamHost {
 public:
  virtual ~PeerStreamHost() = default;
  // This daemon's hello.
  virtual const wire::PeerFrame& Hello() const = 0;
  // An inbound stream's hello: the link of the peer it names, or an error saying why it is
  // refused. On success the stream is the peer's inbound one (an older one is cancelled).
  virtual absl::StatusOr<PeerLink*> AcceptInbound(const wire::PeerFrame& hello,
                                                  grpc::CallbackServerContext* context) = 0;
  virtual void InboundEnded(NodeId peer, grpc::CallbackServerContext* context) = 0;
  // A stream attached to the peer's link (up) or one that was attached ended its reads (down):
  // Transport::SetLinkWatcher. Any thread.
  virtual void LinkChanged(NodeId peer, bool up) {}
  // Hands a frame's valid envelopes to the receiver.
  virtual void Deliver(NodeId peer, wire::Frame* frame) = 0;
};

// What both ends keep about their stream, under one mutex, and the steps they share with the
// link. A stream is over (nothing more can happen on it) once its reads ended, its hello is
// written and the link let it go, or never took it.
class PeerStreamState : public PeerWriter {
 protected:
  // The hello is exchanged: the stream takes over `link`. False if the transport is shutting
  // down (the stream is then released, as by the link).
  bool TakeOver(PeerLink* link);
  // The reads ended: the link lets the stream go (now, or when its write in progress ends).
  // Returns whether the stream was attached (the link was up through it).
  bool ReadsEnded(PeerLink* link);
  // The link let the stream go; the caller cancels the call and ends it when it is over.
  void MarkReleased();
  bool Over() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return read_done_ && !hello_writing_ && (released_ || !attached_);
  }

  absl::Mutex mu_;
  bool hello_read_ ABSL_GUARDED_BY(mu_) = false;
  bool hello_writing_ ABSL_GUARDED_BY(mu_) = false;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
};

class InboundPeerStream final : public grpc::ServerBidiReactor<wire::PeerFrame, wire::PeerFrame>,
                                public PeerStreamState {
 public:
  InboundPeerStream(PeerStreamHost* host, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void StartFrameWrite(const wire::PeerFrame* frame) override;
  void Released() override;
  void OnHello(bool ok);
  // Finishes the stream if nothing more can happen on it (outside mu_: OnDone may follow inline).
  void MaybeFinish();

  PeerStreamHost* const host_;
  grpc::CallbackServerContext* const context_;
  wire::PeerFrame in_;
  NodeId peer_ ABSL_GUARDED_BY(mu_) = 0;
  PeerLink* link_ ABSL_GUARDED_BY(mu_) = nullptr;  // once the hello is accepted
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

class OutboundPeerStream final : public grpc::ClientBidiReactor<wire::PeerFrame, wire::PeerFrame>,
                                 public PeerStreamState {
 public:
  OutboundPeerStream(PeerStreamHost* host, NodeId peer, PeerLink* link);

  grpc::ClientContext* context() { return &context_; }
  // Dials on `stub`'s channel; Await returns the stream's status once it is over.
  void Start(wire::Peer::Stub* stub);
  grpc::Status Await();
  // Whether the peer answered the hello and the stream carried traffic.
  bool was_attached();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void StartFrameWrite(const wire::PeerFrame* frame) override;
  void Released() override;
  void MaybeAttach();
  // Lets the stream end once nothing more can happen on it.
  void MaybeEnd();

  PeerStreamHost* const host_;
  const NodeId peer_;
  PeerLink* const link_;
  grpc::ClientContext context_;
  wire::PeerFrame in_;
  bool hold_removed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_;  // written in OnDone, read after done_
  absl::Notification done_;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_PEER_REACTORS_H_
