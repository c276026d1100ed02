#include "isolated_read.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>

namespace railyard::isolated {
namespace {

constexpr uint64_t kBaseBytes = uint64_t{512} << 20;
constexpr unsigned kBaseSeconds = 60;
constexpr uint64_t kBytesPerSecond = 20'000'000;
constexpr size_t kMaxMessage = 4096;

// This process's current address-space size: the child's limit is on top of what it inherits.
uint64_t current_vm_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The child: limits, the read, the outcome on the pipe ("ok <step>" or the message), _exit
// (no atexit handlers, no HDF5 shutdown, no flushing of the parent's stdio buffers).
[[noreturn]] void child(int fd, uint64_t budget, unsigned seconds,
                        const std::function<int64_t()>& read) {
  const rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  const rlim_t as = static_cast<rlim_t>(current_vm_bytes() + budget);
  const rlimit mem{as, as};
  setrlimit(RLIMIT_AS, &mem);
  // A crash must end the child by its signal (what the parent reports), not in a handler
  // inherited from MPI or a sanitizer that prints a trace and exits.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) signal(sig, SIG_DFL);
  alarm(seconds);
  int code = 1;
  std::string msg;
  try {
    msg = "ok " + std::to_string(read());
    code = 0;
  } catch (const std::bad_alloc&) {
    msg = "unreadable HDF5 structure (reading it needed more than the " +
          std::to_string(budget >> 20) + " MiB allowed for a file of this size)";
  } catch (const std::exception& e) {
    msg = e.what();
  }
  if (msg.size() > kMaxMessage) msg.resize(kMaxMessage);
  write_all(fd, msg);
  _exit(code);
}

std::string read_pipe(int fd) {
  std::string out;
  char buf[1024];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < kMaxMessage) out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace

Outcome run(uint64_t file_bytes, const std::function<int64_t()>& read) {
  const uint64_t budget = kBaseBytes + 4 * file_bytes;
  const unsigned seconds = kBaseSeconds + static_cast<unsigned>(file_bytes / kBytesPerSecond);
  Outcome out;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.error = std::string("cannot create a pipe to check the file: ") + std::strerror(errno);
    return out;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    out.error = std::string("cannot fork to check the file: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    child(fds[1], budget, seconds, read);
  }
  close(fds[1]);
  const std::string msg = read_pipe(fds[0]);
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && msg.rfind("ok ", 0) == 0) {
    out.ok = true;
    out.step = std::stoll(msg.substr(3));
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
    out.error =
        "unreadable HDF5 structure (reading it took longer than " + std::to_string(seconds) + " s)";
  } else if (WIFSIGNALED(status)) {
    out.error = "unreadable HDF5 structure (the HDF5 library crashed with " +
                signal_text(WTERMSIG(status)) + " reading it, in a child process)";
  } else if (msg.empty()) {
    // A sanitizer's allocator, for one, exits instead of throwing std::bad_alloc at the limit.
    out.error = "unreadable HDF5 structure (the reading child process exited with status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " without a result)";
  } else {
    out.error = msg;
  }
  return out;
}

}  // namespace railyard::isolated
