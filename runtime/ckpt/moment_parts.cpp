#include "moment_parts.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "checkpoint_format.hpp"
#include "dataset_checksum.hpp"
#include "railyard/chunk_pipeline.hpp"
#include "railyard/direct_file.hpp"
#include "railyard/durable_file.hpp"

namespace railyard {

std::string moment_part_path(const std::string& dir, int64_t step, int rank, int ranks) {
  return dir + "/." + ckpt_format::file_name(step) + ".tmp-part" + std::to_string(rank) + "of" +
         std::to_string(ranks);
}

uint64_t write_moment_part(const std::string& path, StateSnapshot& snap) {
  const size_t n = snap.shard_end() - snap.shard_begin();
  remove_file(path);
  create_private_file(path);
  Xxh3Stream hash;
  {
    DirectFile file(path, true);
    file.reserve(2 * n * sizeof(float));
    const size_t chunk = kStagingBytes / sizeof(float);
    const size_t per_array = (n + chunk - 1) / chunk;
    auto where = [&](size_t i, StateArray& a, size_t& begin, size_t& count) {
      a = i < per_array ? StateArray::kM : StateArray::kV;
      const size_t done = (i % std::max<size_t>(per_array, 1)) * chunk;
      begin = snap.shard_begin() + done;
      count = std::min(chunk, n - done);
    };
    run_chunk_pipeline(
        2 * per_array, snap.staging(kStagingBuffers, kStagingBytes),
        [&](size_t i, float* buf) {
          StateArray a;
          size_t begin = 0, count = 0;
          where(i, a, begin, count);
          snap.copy_out(a, begin, count, buf);
          hash.update(buf, count * sizeof(float));
        },
        [&](size_t i, float* buf) {
          StateArray a;
          size_t begin = 0, count = 0;
          where(i, a, begin, count);
          const size_t at = (a == StateArray::kV ? n : 0) + (begin - snap.shard_begin());
          file.write(at * sizeof(float), buf, count * sizeof(float));
        });
  }
  // Not fsync'd: the part is read back by rank 0 after this file is closed, and only the
  // checkpoint file made from it must be durable.
  return hash.digest();
}

// A part file read front to back, m then v, hashed as it goes.
struct PartsSnapshot::Reader {
  int fd = -1;
  uint64_t bytes = 0;   // 2 x shard x 4
  uint64_t cursor = 0;  // bytes read so far
  Xxh3Stream hash;
  ~Reader() {
    if (fd >= 0) close(fd);
  }
};

namespace {

[[noreturn]] void part_error(const MomentPart& p, const std::string& what) {
  throw std::runtime_error("moment part " + p.path + " (shard [" + std::to_string(p.begin) + ", " +
                           std::to_string(p.end) + ")): " + what);
}

void check_digest(const MomentPart& p, const Xxh3Stream& hash) {
  if (hash.digest() != p.xxh3) {
    part_error(p, "its bytes changed after they were written (XXH3-64 " +
                      std::to_string(hash.digest()) + ", written " + std::to_string(p.xxh3) +
                      "); the checkpoint is not written");
  }
}

}  // namespace

PartsSnapshot::PartsSnapshot(StateSnapshot& local, std::vector<MomentPart> parts)
    : local_(local), parts_(std::move(parts)) {
  size_t expect = 0;
  for (const MomentPart& p : parts_) {
    if (p.begin != expect || p.end < p.begin || p.end > local_.total()) {
      part_error(p, "the parts do not partition [0, " + std::to_string(local_.total()) + ")");
    }
    expect = p.end;
    if (p.path.empty()) {
      if (p.begin != local_.shard_begin() || p.end != local_.shard_end()) {
        part_error(p, "the local shard is [" + std::to_string(local_.shard_begin()) + ", " +
                          std::to_string(local_.shard_end()) + ")");
      }
      readers_.push_back(nullptr);
      continue;
    }
    auto r = std::make_unique<Reader>();
    r->bytes = 2 * (p.end - p.begin) * sizeof(float);
    r->fd = open(p.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (r->fd < 0) part_error(p, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (fstat(r->fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != r->bytes) {
      part_error(p, "holds " + std::to_string(st.st_size) + " bytes, expected " +
                        std::to_string(r->bytes));
    }
    if (r->bytes == 0) check_digest(p, r->hash);
    readers_.push_back(std::move(r));
  }
  if (expect != local_.total()) {
    throw std::runtime_error("moment parts end at " + std::to_string(expect) +
                             ", the state holds " + std::to_string(local_.total()) + " elements");
  }
}

PartsSnapshot::~PartsSnapshot() = default;

void PartsSnapshot::copy_out(StateArray array, size_t begin, size_t count, float* dst) {
  if (array == StateArray::kParams) {
    local_.copy_out(array, begin, count, dst);
    return;
  }
  if (begin > total() || count > total() - begin) {
    throw std::out_of_range("moment range [" + std::to_string(begin) + ", +" +
                            std::to_string(count) + ") outside [0, " + std::to_string(total()) +
                            ")");
  }
  // A chunk may span the shards of several ranks.
  for (size_t i = 0; i < parts_.size() && count > 0; ++i) {
    const MomentPart& p = parts_[i];
    if (begin >= p.end) continue;
    const size_t n = std::min(count, p.end - begin);
    if (readers_[i] == nullptr) {
      local_.copy_out(array, begin, n, dst);
    } else {
      read_part(i, array, begin, n, dst);
    }
    begin += n;
    count -= n;
    dst += n;
  }
}

void PartsSnapshot::read_part(size_t part, StateArray array, size_t begin, size_t count,
                              float* dst) {
  const MomentPart& p = parts_[part];
  Reader& r = *readers_[part];
  const uint64_t at =
      ((array == StateArray::kV ? p.end - p.begin : 0) + (begin - p.begin)) * sizeof(float);
  if (at != r.cursor) part_error(p, "read out of order (at byte " + std::to_string(at) + ")");
  const size_t bytes = count * sizeof(float);
  char* out = reinterpret_cast<char*>(dst);
  for (size_t done = 0; done < bytes;) {
    const ssize_t got = pread(r.fd, out + done, bytes - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      part_error(p, got < 0 ? std::string("read failed: ") + std::strerror(errno)
                            : std::string("shorter than its size"));
    }
    done += static_cast<size_t>(got);
  }
  r.hash.update(dst, bytes);
  r.cursor += bytes;
  if (r.cursor == r.bytes) check_digest(p, r.hash);
}

}  // namespace railyard
