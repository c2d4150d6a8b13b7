// libFuzzer target: the local fast path's byte stream (nso/local_api.cc), served the way the
// daemon serves it: a real Node, EventLoop and LocalApi on an abstract Unix socket, and the
// input written to it over a real connection.
//
// Input: byte 0 is a control byte, the rest goes to the daemon as it is.
//   bit 0: a valid LocalHello (the daemon's key) goes first, so the fuzzer reaches the frames
//          after the hello: calls, servant registrations, answers
//   bit 1: then a valid call of the attached client NSO to group `solo`
// Then the connection's write side is closed and everything the daemon sends is read until it
// closes the connection.
//
// Must hold for any input (the daemon keeps running and loses nothing, README "Bad input"):
//   - no crash, no sanitizer report;
//   - the daemon closes the connection within 10 s of the client's end of stream (no input makes
//     it hold a connection, or its protocol thread, forever);
//   - every frame the daemon sends is a well-formed LocalFrame in a well-formed length prefix;
//   - afterwards a new connection with a valid hello and a call of the attached client to `solo`
//     gets the hello answered and that call's result OK (the daemon still serves, its servant of
//     `solo` still answers).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "nso/event_loop.h"
#include "nso/framing.h"
#include "nso/local_api.h"
#include "nso/node.h"
#include "proto/api.pb.h"
#include "test/fuzz/fuzz_node.h"

namespace {

using cohort::nso::kFrameLengthBytes;

constexpr cohort::nso::NodeId kSelf = 2;
constexpr uint32_t kLocalVersion = 1;

void Check(bool ok, const char* what, const std::string& detail = "") {
  cohort::fuzz::CheckInvariant("local_fuzz", ok, what, detail);
}

// Moves the complete frames at the front of `in` to `frames` (`in` keeps a partial one).
void TakeFrames(std::string* in, std::vector<cohort::api::LocalFrame>* frames) {
  size_t offset = 0;
  while (in->size() - offset >= kFrameLengthBytes) {
    const uint32_t length = cohort::nso::GetFrameLength(in->data() + offset);
    if (in->size() - offset - kFrameLengthBytes < length) break;
    cohort::api::LocalFrame frame;
    Check(frame.ParseFromArray(in->data() + offset + kFrameLengthBytes, static_cast<int>(length)),
          "an undecodable frame from the daemon");
    frames->push_back(std::move(frame));
    offset += kFrameLengthBytes + length;
  }
  in->erase(0, offset);
}

uint64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One daemon's protocol thread with its Node and local fast path, for the whole fuzzing run.
class Daemon {
 public:
  Daemon() : config_(cohort::fuzz::MakeConfig(kSelf)) {
    cohort::fuzz::QuietLogs();
    loop_ = std::make_unique<cohort::nso::EventLoop>(10, 100000,
                                                     [this](uint64_t now) { node_->Tick(now); });
    node_ = std::make_unique<cohort::nso::Node>(config_, &transport_, 42, NowMs());
    client_nso_ = *node_->Attach("client");
    // The servant of `solo` answers every delivery with its payload, on the loop thread after
    // the current step (as a servant's answer arrives in the daemon).
    const uint64_t servant_nso = *node_->Attach("servant");
    auto servant = std::make_shared<uint64_t>(0);
    *servant = *node_->RegisterServant(
        servant_nso, "solo", [this, servant](cohort::nso::ServantDelivery delivery) {
          if (delivery.one_way) return;
          loop_->Post([this, servant, delivery = std::move(delivery)] {
            node_->Answer(*servant, delivery.delivery, absl::OkStatus(), delivery.payload);
          });
        });
    cohort::nso::LocalApiOptions options;
    options.node_name = "fuzz";
    options.frame_bytes_max = 1 << 16;
    local_ = std::make_unique<cohort::nso::LocalApi>(options, node_.get(), loop_.get(), nullptr,
                                                     nullptr);
    Check(local_->Listen().ok(), "listen");
    cohort::nso::LocalApi* raw = local_.get();
    loop_->AddFlush([raw] { raw->Flush(); });
    loop_->Start();
    local_->Start();
    // "unix:@name": an abstract socket, the name after a NUL byte.
    const std::string name = local_->address().substr(std::strlen("unix:@"));
    address_.sun_family = AF_UNIX;
    address_.sun_path[0] = '\0';
    std::memcpy(address_.sun_path + 1, name.data(), name.size());
    address_length_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  }

  int Connect() const {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    Check(fd >= 0, "socket");
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    Check(connect(fd, reinterpret_cast<const sockaddr*>(&address_), address_length_) == 0,
          "connect", std::strerror(errno));
    return fd;
  }

  std::string Hello() const {
    cohort::api::LocalFrame frame;
    frame.mutable_hello()->set_version(kLocalVersion);
    frame.mutable_hello()->set_key(local_->key());
    std::string out;
    cohort::nso::AppendFrame(frame, &out);
    return out;
  }

  std::string SoloCall(uint64_t number, const std::string& payload) const {
    cohort::api::LocalFrame frame;
    cohort::api::PipelinedCall* call = frame.mutable_call();
    call->set_call(number);
    cohort::api::InvokeRequest* invoke = call->mutable_invoke();
    invoke->set_nso(client_nso_);
    invoke->set_group("solo");
    invoke->set_method("echo");
    invoke->set_payload(payload);
    invoke->set_mode(cohort::api::WAIT_FIRST);
    invoke->set_deadline_ms(5000);
    std::string out;
    cohort::nso::AppendFrame(frame, &out);
    return out;
  }

 private:
  const cohort::nso::Config config_;
  cohort::fuzz::RecordingTransport transport_;
  std::unique_ptr<cohort::nso::EventLoop> loop_;
  std::unique_ptr<cohort::nso::Node> node_;
  std::unique_ptr<cohort::nso::LocalApi> local_;
  uint64_t client_nso_ = 0;
  sockaddr_un address_{};
  socklen_t address_length_ = 0;
};

// Writes what it can (the daemon may close early on a bad frame: EPIPE ends the writing).
void WriteAll(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    ssize_t put = send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return;
    at += static_cast<size_t>(put);
  }
}

// Reads until the daemon closes; checks the framing of everything it sent. `frames` gets them.
void ReadToEnd(int fd, std::vector<cohort::api::LocalFrame>* frames) {
  std::string in;
  char buffer[1 << 14];
  const uint64_t start = NowMs();
  while (true) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      Check(false, "the daemon kept the connection open 10 s after the client's end of stream");
    }
    if (got <= 0) break;  // closed (ECONNRESET counts: it closed with input unread)
    in.append(buffer, static_cast<size_t>(got));
    Check(NowMs() - start < 30000, "the daemon kept sending for 30 s");
  }
  TakeFrames(&in, frames);
  Check(in.empty(), "a truncated frame or stray bytes after the daemon's last frame");
}

// A well-behaved client after the input: hello answered, its call to `solo` answered OK.
void CheckStillServes(const Daemon& daemon, uint64_t round) {
  int fd = daemon.Connect();
  const std::string payload = "still-serving-" + std::to_string(round);
  WriteAll(fd, daemon.Hello() + daemon.SoloCall(7, payload));
  // Read the hello and the result, then close.
  std::string in;
  char buffer[4096];
  bool hello = false, result = false;
  while (!(hello && result)) {
    ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    Check(got > 0, "no answer to a valid hello and call after the input",
          got < 0 ? std::strerror(errno) : "closed");
    in.append(buffer, static_cast<size_t>(got));
    std::vector<cohort::api::LocalFrame> frames;
    TakeFrames(&in, &frames);
    for (const cohort::api::LocalFrame& frame : frames) {
      if (frame.has_hello()) {
        hello = true;
      } else if (frame.has_result()) {
        Check(frame.result().call() == 7, "a result for a call never made");
        Check(frame.result().status_code() == 0, "the valid call failed",
              frame.result().error());
        Check(frame.result().reply().replies_size() == 1 &&
                  frame.result().reply().replies(0).payload() == payload,
              "the valid call's reply is not its payload");
        result = true;
      } else {
        Check(false, "an unexpected frame to a valid client",
              frame.has_error() ? frame.error() : frame.ShortDebugString());
      }
    }
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Daemon* daemon = new Daemon();  // one daemon for the run, as in production
  static uint64_t round = 0;
  ++round;
  const uint8_t control = size > 0 ? data[0] : 0;
  std::string stream;
  if (control & 1) stream += daemon->Hello();
  if (control & 2) stream += daemon->SoloCall(1, "from the input");
  if (size > 1) stream.append(reinterpret_cast<const char*>(data + 1), size - 1);
  int fd = daemon->Connect();
  WriteAll(fd, stream);
  shutdown(fd, SHUT_WR);
  std::vector<cohort::api::LocalFrame> frames;
  ReadToEnd(fd, &frames);
  close(fd);
  if ((control & 3) == 3 && !frames.empty()) {
    // A valid hello is answered first, whatever follows it.
    Check(frames.front().has_hello(), "a valid hello was not answered with a hello");
  }
  CheckStillServes(*daemon, round);
  return 0;
}
