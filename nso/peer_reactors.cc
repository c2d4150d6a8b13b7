#include "nso/peer_reactors.h"

#include "nso/logging.h"

namespace cohort::nso {

// ---- PeerStreamState ----

bool PeerStreamState::TakeOver(PeerLink* link) {
  if (!link->Attach(this)) {
    MarkReleased();
    return false;
  }
  bool ended;
  {
    absl::MutexLock lock(&mu_);
    ended = read_done_;  // the reads ended before Attach: their Detach found nothing to detach
  }
  if (ended) link->Detach(this);
  return true;
}

bool PeerStreamState::ReadsEnded(PeerLink* link) {
  bool attached;
  {
    absl::MutexLock lock(&mu_);
    read_done_ = true;
    attached = attached_;
  }
  if (attached) link->Detach(this);
  return attached;
}

void PeerStreamState::MarkReleased() {
  absl::MutexLock lock(&mu_);
  released_ = true;
}

// ---- InboundPeerStream ----

InboundPeerStream::InboundPeerStream(PeerStreamHost* host, grpc::CallbackServerContext* context)
    : host_(host), context_(context) {
  StartRead(&in_);
}

void InboundPeerStream::OnReadDone(bool ok) {
  bool hello_phase;
  NodeId peer;
  PeerLink* link;
  {
    absl::MutexLock lock(&mu_);
    hello_phase = !hello_read_;
    peer = peer_;
    link = link_;
  }
  if (hello_phase) return OnHello(ok);
  if (ok) {
    if (in_.has_frame()) host_->Deliver(peer, in_.mutable_frame());
    StartRead(&in_);
    return;
  }
  if (ReadsEnded(link)) host_->LinkChanged(peer, /*up=*/false);
  MaybeFinish();
}

void InboundPeerStream::OnHello(bool ok) {
  auto refuse = [this](grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      hello_read_ = true;
      read_done_ = true;
      status_ = std::move(status);
    }
    MaybeFinish();
  };
  if (!ok) return refuse(grpc::Status(grpc::StatusCode::CANCELLED, "no hello"));
  if (!in_.has_hello()) {
    Log("peer")->warn("peer {} did not start with hello: refused", context_->peer());
    return refuse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "first frame must be a hello"));
  }
  absl::StatusOr<PeerLink*> link = host_->AcceptInbound(in_, context_);
  if (!link.ok()) {
    return refuse(grpc::Status(static_cast<grpc::StatusCode>(link.status().code()),
                               std::string(link.status().message())));
  }
  {
    absl::MutexLock lock(&mu_);
    peer_ = in_.hello().node();
    link_ = *link;
    hello_read_ = true;
    hello_writing_ = true;
  }
  StartWrite(&host_->Hello());
  StartRead(&in_);
}

void InboundPeerStream::OnWriteDone(bool ok) {
  if (!ok) context_->TryCancel();  // the reads end too, and with them the stream
  PeerLink* link;
  bool hello;
  bool attach = false;
  {
    absl::MutexLock lock(&mu_);
    link = link_;
    hello = hello_writing_;
    if (hello) {
      hello_writing_ = false;
      attach = ok && !read_done_;
      attached_ = attach;
    }
  }
  if (!hello) return link->WriteDone(this, ok);
  if (!attach) return MaybeFinish();
  // The hello is written: the stream takes over the link.
  if (!TakeOver(link)) {  // shutting down
    context_->TryCancel();
    MaybeFinish();
    return;
  }
  NodeId peer;
  {
    absl::MutexLock lock(&mu_);
    peer = peer_;
  }
  host_->LinkChanged(peer, /*up=*/true);
}

void InboundPeerStream::StartFrameWrite(const wire::PeerFrame* frame) { StartWrite(frame); }

void InboundPeerStream::Released() {
  MarkReleased();
  context_->TryCancel();  // a stream the link no longer writes to is of no use
  MaybeFinish();
}

void InboundPeerStream::MaybeFinish() {
  grpc::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || !Over()) return;
    finished_ = true;
    status = status_;
  }
  Finish(status);
}

void InboundPeerStream::OnDone() {
  NodeId peer;
  bool accepted;
  {
    absl::MutexLock lock(&mu_);
    peer = peer_;
    accepted = link_ != nullptr;
  }
  if (accepted) {
    host_->InboundEnded(peer, context_);
    Log("peer")->info("stream from node {} closed", peer);
  }
  delete this;
}

// ---- OutboundPeerStream ----

OutboundPeerStream::OutboundPeerStream(PeerStreamHost* host, NodeId peer, PeerLink* link)
    : host_(host), peer_(peer), link_(link) {}

void OutboundPeerStream::Start(wire::Peer::Stub* stub) {
  stub->async()->Exchange(&context_, this);
  {
    absl::MutexLock lock(&mu_);
    hello_writing_ = true;
  }
  // Held until the link releases the stream: writes start from outside reactions (Kick).
  AddHold();
  StartWrite(&host_->Hello());
  StartRead(&in_);
  StartCall();
}

grpc::Status OutboundPeerStream::Await() {
  done_.WaitForNotification();
  return status_;
}

bool OutboundPeerStream::was_attached() {
  absl::MutexLock lock(&mu_);
  return attached_;
}

void OutboundPeerStream::OnReadDone(bool ok) {
  bool hello_phase;
  {
    absl::MutexLock lock(&mu_);
    hello_phase = !hello_read_;
  }
  if (ok && !hello_phase) {
    if (in_.has_frame()) host_->Deliver(peer_, in_.mutable_frame());
    StartRead(&in_);
    return;
  }
  if (ok && in_.has_hello() && in_.hello().node() == peer_) {
    {
      absl::MutexLock lock(&mu_);
      hello_read_ = true;
    }
    StartRead(&in_);
    return MaybeAttach();
  }
  if (ok) {
    Log("peer")->warn("node {} answered with a wrong hello: stream dropped", peer_);
    context_.TryCancel();
  }
  if (ReadsEnded(link_)) host_->LinkChanged(peer_, /*up=*/false);
  MaybeEnd();
}

void OutboundPeerStream::OnWriteDone(bool ok) {
  if (!ok) context_.TryCancel();
  bool hello;
  {
    absl::MutexLock lock(&mu_);
    hello = hello_writing_;
    hello_writing_ = false;
  }
  if (!hello) return link_->WriteDone(this, ok);
  if (ok) MaybeAttach();
  MaybeEnd();
}

void OutboundPeerStream::MaybeAttach() {
  {
    absl::MutexLock lock(&mu_);
    if (!hello_read_ || hello_writing_ || read_done_ || attached_) return;
    attached_ = true;
  }
  if (!TakeOver(link_)) {  // shutting down
    context_.TryCancel();
    MaybeEnd();
    return;
  }
  Log("peer")->info("connected to node {}", peer_);
  host_->LinkChanged(peer_, /*up=*/true);
}

void OutboundPeerStream::StartFrameWrite(const wire::PeerFrame* frame) { StartWrite(frame); }

void OutboundPeerStream::Released() {
  MarkReleased();
  context_.TryCancel();
  MaybeEnd();
}

void OutboundPeerStream::MaybeEnd() {
  {
    absl::MutexLock lock(&mu_);
    if (hold_removed_ || !Over()) return;
    hold_removed_ = true;
  }
  RemoveHold();
}

void OutboundPeerStream::OnDone(const grpc::Status& status) {
  status_ = status;
  done_.Notify();  // the dialer may delete this at once
}

}  // namespace cohort::nso
