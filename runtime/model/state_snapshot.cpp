#include "railyard/state_snapshot.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace railyard {

size_t snapshot_offset(const StateSnapshot& s, StateArray array, size_t begin, size_t count) {
  const bool params = array == StateArray::kParams;
  const size_t lo = params ? 0 : s.shard_begin();
  const size_t hi = params ? s.total() : s.shard_end();
  if (begin < lo || begin > hi || count > hi - begin) {
    throw std::out_of_range("state snapshot: elements [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") are outside " +
                            (params ? "params" : "the moments") + " [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + ")");
  }
  return begin - lo;
}

std::vector<float*> StateSnapshot::staging(size_t n, size_t bytes) {
  if (bytes == 0 || bytes % 4096 != 0) {
    throw std::invalid_argument(
        "state snapshot: staging buffers must be a positive multiple of "
        "4096 bytes, got " +
        std::to_string(bytes));
  }
  if (bytes != own_staging_bytes_) own_staging_.clear();
  own_staging_bytes_ = bytes;
  std::vector<float*> out;
  for (size_t i = 0; i < n; ++i) {
    if (i == own_staging_.size()) {
      void* p = std::aligned_alloc(4096, bytes);
      if (p == nullptr) throw std::bad_alloc();
      own_staging_.emplace_back(static_cast<float*>(p), &std::free);
    }
    out.push_back(own_staging_[i].get());
  }
  return out;
}

void HostStateSnapshot::copy_out(StateArray array, size_t begin, size_t count, float* dst) {
  const size_t at = snapshot_offset(*this, array, begin, count);
  const FloatArray& src = array == StateArray::kParams ? params_->params
                          : array == StateArray::kM    ? moments_->m
                                                       : moments_->v;
  if (count > 0) std::memcpy(dst, src.data() + at, count * sizeof(float));
}

ModelState materialize(StateSnapshot& snap) {
  ModelState out;
  out.shard_begin = snap.shard_begin();
  out.shard_end = snap.shard_end();
  out.adam_step = snap.adam_step();
  out.params.resize(snap.total());
  out.m.resize(out.shard_end - out.shard_begin);
  out.v.resize(out.m.size());
  snap.copy_out(StateArray::kParams, 0, out.params.size(), out.params.data());
  snap.copy_out(StateArray::kM, out.shard_begin, out.m.size(), out.m.data());
  snap.copy_out(StateArray::kV, out.shard_begin, out.v.size(), out.v.data());
  return out;
}

}  // namespace railyard
