#include "railyard/direct_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>

namespace railyard {

DirectFile::DirectFile(const std::string& path, bool try_direct) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "opening " + path);
  if (try_direct) {
    // EINVAL (tmpfs before Linux 6.6, some FUSE and network filesystems): no direct path.
    direct_fd_ = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECT);
  }
}

DirectFile::~DirectFile() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

void DirectFile::write_fd(int fd, uint64_t offset, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, data, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && fd == direct_fd_) {
      // The filesystem refuses this direct write (alignment it needs beyond 4096, or none at
      // all): the page cache from now on; the caller's fsync makes it durable all the same.
      ::close(direct_fd_);
      direct_fd_ = -1;
      fd = fd_;
      continue;
    }
    if (n < 0) throw std::system_error(errno, std::generic_category(), "writing " + path_);
    if (n == 0) throw std::system_error(EIO, std::generic_category(), "writing " + path_);
    data += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

void DirectFile::write(uint64_t offset, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  const uint64_t addr = reinterpret_cast<uintptr_t>(p);
  if (direct_fd_ < 0 || (addr - offset) % kAlign != 0) {
    write_fd(fd_, offset, p, bytes);
    return;
  }
  // Head up to the first aligned offset, aligned middle, tail: head and tail via the cache.
  const uint64_t head = std::min<uint64_t>(bytes, (kAlign - offset % kAlign) % kAlign);
  const uint64_t middle = (bytes - head) / kAlign * kAlign;
  if (head > 0) write_fd(fd_, offset, p, head);
  if (middle > 0) write_fd(direct_fd_, offset + head, p + head, middle);
  const uint64_t tail = bytes - head - middle;
  if (tail > 0) write_fd(fd_, offset + head + middle, p + head + middle, tail);
}

void DirectFile::reserve(uint64_t bytes) {
  // fallocate, not posix_fallocate: the latter would emulate it by writing zeros.
  if (::fallocate(fd_, 0, 0, static_cast<off_t>(bytes)) == 0) return;
  if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) return;
  throw std::system_error(errno, std::generic_category(), "reserving space for " + path_);
}

}  // namespace railyard
