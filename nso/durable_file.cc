#include "nso/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace cohort::nso {

absl::Status WriteFileDurably(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp";
  auto failed = [&](const char* what, const std::string& file) {
    return absl::InternalError(absl::StrCat("cannot write \"", path, "\": ", what, " \"", file,
                                            "\": ", std::strerror(errno)));
  };
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return failed("open", temporary);
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = failed("write", temporary);
      close(fd);
      return status;
    }
    at += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status status = failed("fsync", temporary);
    close(fd);
    return status;
  }
  close(fd);
  if (rename(temporary.c_str(), path.c_str()) != 0) return failed("rename", temporary);
  // The rename itself, durable.
  const std::string dir = DirectoryOf(path);
  int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return failed("open the directory", dir);
  const bool synced = fsync(dir_fd) == 0;
  absl::Status status = synced ? absl::OkStatus() : failed("fsync the directory", dir);
  close(dir_fd);
  return status;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string message = absl::StrCat("\"", path, "\": cannot read: ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
}

}  // namespace cohort::nso
