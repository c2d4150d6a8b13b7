// The local fast path (issue 7): clients and servants on the daemon's host carry their calls,
// results, deliveries and answers over a Unix socket served ON THE PROTOCOL THREAD (epoll, like
// the raw TCP peer transport), instead of gRPC's streams and the threads behind them.
//
// Why: 003 section 3 measures the client and its NSO in one address space as the fastest
// configuration, and 001 sections 5-6 put the cost of an ORB call in its thread switches and
// copies. On the gRPC API a call crossed a gRPC poller thread, a handler thread, the protocol
// thread's queue and a writer thread each way; here a call frame is read, checked and handed to
// the Node by the protocol thread that also writes its result, everything a batch of work
// produced for one connection in one write (EventLoop::AddFlush).
//
// Protocol (proto/api.proto, LocalFrame): 4-byte little-endian length + LocalFrame. The client
// sends a LocalHello with the key of its AttachReply (so only a client that attached over the
// authenticated gRPC API, to THIS daemon, gets in) and its bearer token; the daemon answers with
// a LocalHello. Then a call connection carries PipelinedCall / PipelinedResult, a servant
// connection one register, then ServantEvents and answers. A bad frame gets an `error` frame
// naming what is wrong and the connection is closed; the daemon carries on.
//
// Threads: everything runs on the loop thread except Listen (before the loop starts), Shutdown
// (after it stopped), address() and key().
#ifndef COHORT_NSO_LOCAL_API_H_
#define COHORT_NSO_LOCAL_API_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "google/protobuf/arena.h"
#include "nso/api_service.h"
#include "nso/event_loop.h"
#include "nso/metrics.h"
#include "nso/node.h"
#include "proto/api.pb.h"

namespace cohort::nso {

struct LocalApiOptions {
  std::string listen = "auto";  // listen.local: "auto" (abstract socket) or a socket file path
  std::string node_name;        // names the abstract socket
  size_t frame_bytes_max = 16 << 20;   // a longer frame closes the connection
  // A client with more than ResultsCutoff unsent bytes is closed (nso/api_service.h; a servant is
  // bounded by the node instead, limits.servant_cutoff_bytes).
};

class LocalApi {
 public:
  // `policy` and `metrics` may be null.
  LocalApi(LocalApiOptions options, Node* node, EventLoop* loop, const AccessPolicy* policy,
           InvocationMetrics* metrics);
  ~LocalApi();

  // Binds and listens; before the loop starts.
  absl::Status Listen();
  // Starts accepting (posted to the loop).
  void Start();
  // Closes every connection and the socket (removes a socket file); after the loop stopped.
  void Shutdown();
  // Loop thread, after every batch of work: writes what the batch produced.
  void Flush();

  // "unix:@name" or "unix:/path" (AttachReply.local_api), and the key clients must present.
  const std::string& address() const { return address_; }
  uint64_t key() const { return key_; }

 private:
  struct Connection;

  void Accept();
  void OnEvents(uint64_t id, uint32_t events);
  bool ReadSome(Connection* connection);
  // Handles the complete frames read so far; false to close (an error frame is queued).
  bool HandleFrames(Connection* connection);
  bool HandleFrame(Connection* connection, api::LocalFrame* frame);
  bool OnHello(Connection* connection, const api::LocalHello& hello);
  bool OnCall(Connection* connection, api::PipelinedCall* call);
  bool OnServant(Connection* connection, api::ServantMessage* message);
  void OnResult(uint64_t id, uint64_t call, api::Mode mode, int64_t start_ns,
                InvokeResult result);
  void OnDelivery(uint64_t id, ServantDelivery delivery);
  // Queues one frame for the connection; it is written when the batch ends.
  void Queue(Connection* connection, const api::LocalFrame& frame);
  // Written (or closed) at the next Flush.
  void MarkDirty(Connection* connection);
  // Queues an error frame: the connection closes after its last write.
  bool Fail(Connection* connection, const std::string& why);
  bool WriteSome(Connection* connection);
  // A client that does not read its results is not read either (PauseReadingCalls: its calls in
  // flight and its unsent bytes count): its connection is not watched for input and the frames
  // it read wait in its buffer.
  bool MustPause(const Connection& connection) const;
  // Reads a paused connection again once there is room (its frames read first); false to close.
  bool ResumeIfRoom(Connection* connection);
  // Stops or starts watching the connection's input and output as its state says.
  void Rewatch(Connection* connection);
  void Close(uint64_t id);
  Connection* Find(uint64_t id);

  const LocalApiOptions options_;
  Node* const node_;
  EventLoop* const loop_;
  const AccessPolicy* const policy_;
  InvocationMetrics* const metrics_;
  std::string address_;
  std::string socket_file_;  // unlinked at Shutdown ("" for an abstract socket)
  uint64_t key_ = 0;
  int listen_fd_ = -1;
  uint64_t accept_paused_until_ms_ = 0;  // out of descriptors: accepts resume then (Flush)
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // loop thread
  std::vector<uint64_t> dirty_;      // connections with output queued in this batch
  std::vector<uint64_t> flushing_;   // Flush's: those being written (no allocation per batch)
  std::vector<char> read_buffer_;    // loop thread
  // Loop thread: the same for each result and delivery written (OnResult, OnDelivery), whose
  // payloads are moved in, not copied.
  alignas(16) char write_block_[4096];
  google::protobuf::Arena write_arena_;
  // Loop thread: the calls made through Node::Invoke, by token. Their completion captures only
  // [this, token], which a std::function holds without allocating (a capture over 16 bytes was
  // one allocation per call, issue 7).
  struct Pending {
    uint64_t connection = 0;
    uint64_t call = 0;  // the client's number for it
    api::Mode mode = api::Mode::MODE_UNSPECIFIED;
    int64_t start_ns = 0;
  };
  absl::flat_hash_map<uint64_t, Pending> pending_;
  uint64_t next_token_ = 1;
};

}  // namespace cohort::nso

#endif  // COHORT_NSO_LOCAL_API_H_
