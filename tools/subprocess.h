// Child daemons for tests and tools on loopback: a free port, a connect probe, and spawning a
// child that dies with its parent (PR_SET_PDEATHSIG), so no process is left behind.
#ifndef COHORT_TOOLS_SUBPROCESS_H_
#define COHORT_TOOLS_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace cohort::subprocess {

// A free TCP port on 127.0.0.1 (bound once, then released), picked at random below the kernel's
// ephemeral range (outgoing connections never take it) and claimed for as long as this process
// lives (an abstract Unix socket named after it): no other process picking ports this way (the
// tests, LocalCluster in Python) gets it meanwhile, nor this one twice.
int FreePort();
// Whether some process holds the claim on `port` that FreePort makes.
bool PortClaimed(int port);
// A blocking TCP connection to 127.0.0.1:port (the caller closes it); -1 if refused.
int ConnectLoopback(int port);
// True when something accepts connections on 127.0.0.1:port.
bool CanConnect(int port);
// True when something accepts connections on ipv4:port within about a second.
bool CanConnect(const std::string& ipv4, int port);
// Starts argv[0] (a path) with `argv`; stdout and stderr append to `log_path` (unless empty).
// The child is killed when the thread that spawned it ends.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log_path);

}  // namespace cohort::subprocess

#endif  // COHORT_TOOLS_SUBPROCESS_H_
