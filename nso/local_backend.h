// The stub library's backends for a client or servant in the same address space as its node
// (embedded mode, nso/embedded.h): calls are tasks posted to the protocol thread, results come
// back through callbacks, no gRPC in between (003 section 3).
#ifndef COHORT_NSO_LOCAL_BACKEND_H_
#define COHORT_NSO_LOCAL_BACKEND_H_

#include <cstdint>
#include <memory>

#include "invocation/backend.h"
#include "nso/daemon.h"
#include "nso/event_loop.h"
#include "nso/node.h"

namespace cohort::nso {

// `node` and `loop` outlive the backend; the node is only touched on the loop. `daemon` (when
// given, outliving the backend too) takes the client's CreateGroup and DeleteGroup calls.
std::unique_ptr<internal::ClientBackend> MakeLocalClient(Node* node, EventLoop* loop,
                                                         Daemon* daemon = nullptr);
std::unique_ptr<internal::ServantBackend> MakeLocalServant(Node* node, EventLoop* loop);


}  // namespace cohort::nso

#endif  // COHORT_NSO_LOCAL_BACKEND_H_
