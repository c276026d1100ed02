#include "railyard/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace railyard {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::system_error(err, std::generic_category(), what + " '" + path + "'");
}

std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

void fsync_fd(int fd, const std::string& path) {
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    fail("fsync", path, err);
  }
  if (close(fd) != 0) fail("close", path, errno);
}

}  // namespace

void ensure_private_dir(const std::string& dir) {
  if (dir.empty()) throw std::invalid_argument("checkpoint directory is empty (--ckpt-dir)");
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) fail("cannot use checkpoint directory", dir, errno);
    const std::string parent = parent_of(dir);
    if (parent != dir && parent != "." && parent != "/") ensure_private_dir(parent);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      fail("cannot create checkpoint directory", dir, errno);
    }
    if (stat(dir.c_str(), &st) != 0) fail("cannot use checkpoint directory", dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) fail("checkpoint path is not a directory", dir, ENOTDIR);
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    fail("checkpoint directory is not writable", dir, errno);
  }
}

void create_private_file(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("cannot create", path, errno);
  if (close(fd) != 0) fail("close", path, errno);
}

void fsync_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("cannot open for fsync", path, errno);
  fsync_fd(fd, path);
}

void durable_rename(const std::string& tmp, const std::string& final_path) {
  struct stat st {};
  if (lstat(final_path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) fail("refusing to replace a symlink", final_path, ELOOP);
    if (!S_ISREG(st.st_mode)) fail("refusing to replace a non-regular file", final_path, EEXIST);
  } else if (errno != ENOENT) {
    fail("cannot inspect", final_path, errno);
  }
  if (rename(tmp.c_str(), final_path.c_str()) != 0) fail("cannot rename to", final_path, errno);
  const std::string dir = parent_of(final_path);
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory for fsync", dir, errno);
  fsync_fd(fd, dir);
}

void remove_file(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail("cannot inspect", path, errno);
  }
  if (!S_ISREG(st.st_mode)) fail("refusing to remove a non-regular file", path, EPERM);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) fail("cannot remove", path, errno);
}

unsigned long long free_bytes(const std::string& dir) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0) fail("statvfs", dir, errno);
  return static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
}

}  // namespace railyard
