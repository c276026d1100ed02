#include "tensor_reader.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "dataset_checksum.hpp"

namespace railyard {
namespace {

// Small enough that a chunk's bytes are still in the core's cache when the hash and the check
// read them after the copy from the page cache: one pass over memory, not three.
constexpr size_t kChunk = size_t{1} << 20;

// Has the kernel fault in the whole pages of [p, p + bytes) in one call (MADV_POPULATE_WRITE,
// Linux 5.14), just before the read writes them: fresh destination memory otherwise takes one
// trap per 4 KiB page inside pread. The pages stay in this core's cache for the copy. Without
// the call (an older kernel: EINVAL; ENOMEM) the pread takes the faults as before.
void fault_in(void* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (at + page - 1) / page * page, end = (at + bytes) / page * page;
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

// Reads [done, done + want) of `r` into its dst; why not, or "".
std::string read_range(int fd, const TensorRead& r, size_t done, size_t want) {
  char* dst = static_cast<char*>(r.dst);
  for (const size_t end = done + want; done < end;) {
    const ssize_t n = ::pread(fd, dst + done, end - done, static_cast<off_t>(r.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "reading dataset " + r.name + ": " + std::strerror(errno);
    if (n == 0) {
      return "dataset " + r.name + " ends past the end of the file (" +
             std::to_string(r.bytes - done) + " bytes missing): the file is truncated";
    }
    done += static_cast<size_t>(n);
  }
  return "";
}

// Why reads[i] failed, or "" when it verified. A checksum mismatch wins over what `check`
// found: a damaged file is the likelier cause of a bad value.
std::string read_one(int fd, const std::vector<TensorRead>& reads, size_t i,
                     const ChunkCheck& check) {
  const TensorRead& r = reads[i];
  Xxh3Stream hash;
  std::string bad_value;
  for (size_t done = 0; done < r.bytes; done += kChunk) {
    const size_t want = std::min(kChunk, r.bytes - done);
    fault_in(static_cast<char*>(r.dst) + done, want);
    std::string err = read_range(fd, r, done, want);
    if (!err.empty()) return err;
    hash.update(static_cast<const char*>(r.dst) + done, want);
    if (!check || !bad_value.empty()) continue;
    try {
      check(i, done, want);
    } catch (const std::exception& e) {
      bad_value = e.what();
    }
  }
  const uint64_t computed = hash.digest();
  return computed != r.stored ? checksum_mismatch(r.name, r.stored, computed) : bad_value;
}

}  // namespace

std::string checksum_mismatch(const std::string& name, uint64_t stored, uint64_t computed) {
  char buf[160];
  std::snprintf(buf, sizeof buf, " (stored %016llx, computed %016llx)",
                static_cast<unsigned long long>(stored), static_cast<unsigned long long>(computed));
  return "checksum mismatch in dataset " + name + buf + ": the file is damaged";
}

void read_tensors_verified(const std::string& path, const std::vector<TensorRead>& reads,
                           const ChunkCheck& check) {
  if (reads.empty()) return;
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  const int fd = file.fd;
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  // Largest first, so the big embedding tables do not end up last on one thread.
  std::vector<size_t> order(reads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reads[a].bytes > reads[b].bytes; });
  std::vector<std::string> errors(reads.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      errors[order[k]] = read_one(fd, reads, order[k], check);
    }
  };
  const size_t nthreads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                             std::min<size_t>(16, reads.size()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
}

}  // namespace railyard
