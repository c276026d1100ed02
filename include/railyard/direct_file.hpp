#pragma once
// A file written at given offsets, bypassing the page cache (O_DIRECT) where the filesystem
// allows it: the 4096-aligned middle of each write goes direct, an unaligned head or tail goes
// through the page cache. Where O_DIRECT is refused (at open, or EINVAL on a write, as some
// filesystems do), every write goes through the page cache from then on; direct() says which.
// Durability is the caller's: fsync after the last write (the store does).

#include <cstddef>
#include <cstdint>
#include <string>

namespace railyard {

class DirectFile {
 public:
  static constexpr size_t kAlign = 4096;

  // Opens an existing file for writing (no create, no truncate, symlinks not followed).
  // `try_direct` false: page cache only. Throws std::system_error naming the path.
  DirectFile(const std::string& path, bool try_direct);
  ~DirectFile();
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Writes `bytes` from `data` at `offset`, all of it or throws std::system_error (ENOSPC,
  // EFBIG, EIO ...) naming the path. Direct where `data` and `offset` share their alignment.
  void write(uint64_t offset, const void* data, size_t bytes);
  // Reserves [0, bytes) on disk so that a full disk fails now, not mid-write. Filesystems
  // without fallocate are left as they are.
  void reserve(uint64_t bytes);

  bool direct() const { return direct_fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  void write_fd(int fd, uint64_t offset, const char* data, size_t bytes);

  std::string path_;
  int fd_ = -1;         // page cache
  int direct_fd_ = -1;  // O_DIRECT, -1 when refused
};

}  // namespace railyard
