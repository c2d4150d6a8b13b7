// The address of a Unix stream socket from the name in a "unix:<name>" endpoint: "@name" for
// Linux's abstract namespace (no file), "/path" for a socket file. Shared by the daemon's local
// fast path (nso/local_api.h), the client's end (invocation/local_link.h) and their tests.
#ifndef COHORT_NSO_UNIX_ADDRESS_H_
#define COHORT_NSO_UNIX_ADDRESS_H_

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstring>
#include <string>

namespace cohort::nso {

// Fills `out` and `length` for `name`; false if it is empty or does not fit.
inline bool UnixAddress(const std::string& name, sockaddr_un* out, socklen_t* length) {
  std::memset(out, 0, sizeof(*out));
  out->sun_family = AF_UNIX;
  if (name.empty() || name.size() >= sizeof(out->sun_path)) return false;
  std::memcpy(out->sun_path, name.data(), name.size());
  if (name[0] == '@') out->sun_path[0] = '\0';  // Linux abstract namespace: no file
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  return true;
}

}  // namespace cohort::nso

#endif  // COHORT_NSO_UNIX_ADDRESS_H_
