#include "streamed_checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "checkpoint_writer.hpp"
#include "dataset_checksum.hpp"
#include "railyard/chunk_pipeline.hpp"
#include "railyard/direct_file.hpp"

namespace railyard {
namespace {

// One piece of one tensor of one array: at most a chunk, never two tensors.
struct Chunk {
  StateArray array;
  size_t tensor;
  size_t begin;  // flat element index
  size_t count;
  uint64_t file_offset;
};

std::vector<Chunk> plan_chunks(const StoredTensors& layout, const TensorOffsets& where,
                               size_t chunk_elems) {
  std::vector<Chunk> out;
  for (size_t a = 0; a < where.offset.size(); ++a) {
    for (size_t i = 0; i < layout.tensors.size(); ++i) {
      const StoredTensor& t = layout.tensors[i];
      for (size_t done = 0; done < t.numel; done += chunk_elems) {
        const size_t n = std::min(chunk_elems, t.numel - done);
        out.push_back({static_cast<StateArray>(a), i, t.offset + done, n,
                       where.offset[a][i] + done * sizeof(float)});
      }
    }
  }
  return out;
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw std::system_error(errno, std::generic_category(), path);
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

StreamStats write_checkpoint_streamed(const std::string& path, const StoredTensors& layout,
                                      const ckpt_format::Meta& meta, StateSnapshot& snap,
                                      const StreamOptions& options) {
  if (options.chunk_bytes == 0 || options.chunk_bytes % DirectFile::kAlign != 0 ||
      options.buffers == 0) {
    throw std::invalid_argument(
        "write_checkpoint_streamed: chunks must be a positive multiple "
        "of 4096 bytes and buffers at least 1");
  }
  if (snap.total() != layout.total || snap.shard_begin() != 0 || snap.shard_end() != layout.total) {
    throw std::logic_error("write_checkpoint_streamed: the snapshot must hold the whole state");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const TensorOffsets where = write_checkpoint_skeleton(path, layout, meta);
  DirectFile file(path, options.try_direct);
  // The datasets are holes so far: allocate them now, so a full disk fails before any copy.
  file.reserve(file_size(path));

  const std::vector<Chunk> chunks = plan_chunks(layout, where, options.chunk_bytes / sizeof(float));
  const size_t ntensors = layout.tensors.size();
  std::vector<Xxh3Stream> hashes(3 * ntensors);
  const std::vector<float*> buffers = snap.staging(options.buffers, options.chunk_bytes);
  StreamStats stats;
  run_chunk_pipeline(
      chunks.size(), buffers,
      [&](size_t i, float* buf) {
        const Chunk& c = chunks[i];
        snap.copy_out(c.array, c.begin, c.count, buf);
        hashes[static_cast<size_t>(c.array) * ntensors + c.tensor].update(buf,
                                                                          c.count * sizeof(float));
      },
      [&](size_t i, float* buf) {
        const Chunk& c = chunks[i];
        file.write(c.file_offset, buf, c.count * sizeof(float));
        stats.tensor_bytes += c.count * sizeof(float);
      });
  std::array<std::vector<uint64_t>, 3> digests;
  for (size_t a = 0; a < 3; ++a) {
    for (size_t i = 0; i < ntensors; ++i) digests[a].push_back(hashes[a * ntensors + i].digest());
  }
  stats.direct = file.direct();
  write_tensor_checksums(path, layout, digests);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace railyard
