#include "support/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "ir/diagnostics.h"

namespace solder {

namespace {

std::string system_reason(int error) { return std::strerror(error); }

const char* node_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// "<dir>/.<name>.tmp-solder-<pid>-<16 hex digits>", in the directory of `path`.
std::string temporary_name(const std::string& path) {
  thread_local std::mt19937_64 random(std::random_device{}() ^ (uint64_t(getpid()) << 32));
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-solder-%d-%016llx", int(getpid()), static_cast<unsigned long long>(random()));
  return dir + "." + base + suffix;
}

}  // namespace

std::string write_file_atomically(const std::string& path, std::string_view data) {
  const std::string failure = "cannot write '" + path + "': ";
  if (path.empty()) return "cannot write a file with an empty name";
  if (path.back() == '/') return failure + "the name ends in '/' (a directory)";
  struct stat existing;
  bool exists = ::stat(path.c_str(), &existing) == 0;  // follows a symlink: what would be replaced
  if (exists && !S_ISREG(existing.st_mode))
    return failure + "it exists and is " + node_kind(existing.st_mode) + ", not a regular file";

  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    temporary = temporary_name(path);
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      return failure + "cannot create a temporary file '" + temporary + "': " + system_reason(errno);
  }
  if (fd < 0) return failure + "cannot create a temporary file beside it: " + system_reason(EEXIST);

  auto abandon = [&](const std::string& what, int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    return failure + what + ": " + system_reason(error);
  };
  if (exists && ::fchmod(fd, existing.st_mode & 07777) != 0) return abandon("cannot keep its permissions", errno);
  const char* at = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return abandon("write failed", n < 0 ? errno : EIO);
    at += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) return abandon("fsync failed", errno);
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return abandon("close failed", errno);
  if (::rename(temporary.c_str(), path.c_str()) != 0) return abandon("rename failed", errno);
  return "";
}

void write_file_atomically_or_throw(const std::string& path, std::string_view data) {
  std::string error = write_file_atomically(path, data);
  if (!error.empty()) throw Error(error);
}

}  // namespace solder
