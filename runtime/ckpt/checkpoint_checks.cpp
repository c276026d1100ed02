#include "checkpoint_checks.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace railyard::ckpt_checks {
namespace {

[[noreturn]] void out_of_range(const std::string& field, const std::string& value,
                               const std::string& allowed) {
  throw std::runtime_error("attribute " + field + " is " + value + ", outside " + allowed +
                           " (the file is damaged or was not written by railyard)");
}

void check_i64(const char* field, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    out_of_range(field, std::to_string(v),
                 "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
}

}  // namespace

void check_ranges(const ckpt_format::StoredMeta& m) {
  check_i64("step", m.step, 0, INT64_MAX);
  check_i64("tokens_seen", m.tokens_seen, 0, INT64_MAX);
  check_i64("adam_step", m.adam_step, 0, INT64_MAX);
  check_i64("world_size", m.world_size, 1, static_cast<int64_t>(kMaxWorldSize));
  if (!std::isfinite(m.lr) || m.lr < 0) {
    out_of_range("lr", std::to_string(m.lr), "finite values >= 0");
  }
  if (m.loader_epoch > kMaxLoaderEpoch) {
    out_of_range("loader_epoch", std::to_string(m.loader_epoch),
                 "[0, " + std::to_string(kMaxLoaderEpoch) + "]");
  }
}

ckpt_format::Meta to_meta(const ckpt_format::StoredMeta& m) {
  ckpt_format::Meta out;
  TrainProgress& p = out.progress;
  p.step = m.step;
  p.tokens_seen = m.tokens_seen;
  p.lr = m.lr;
  p.world_size = static_cast<int>(m.world_size);
  p.loader = {m.loader_seed, m.loader_epoch, m.loader_cursor};
  out.adam_step = m.adam_step;
  out.model = m.model;
  return out;
}

void check_fits_file(double elements, uint64_t file_bytes) {
  const double need = 3.0 * 4.0 * elements;
  if (need > static_cast<double>(file_bytes)) {
    throw std::runtime_error(
        "the /model attributes describe " + std::to_string(static_cast<uint64_t>(elements)) +
        " parameters (params and Adam moments need about " +
        std::to_string(static_cast<uint64_t>(need)) + " bytes), but the file holds only " +
        std::to_string(file_bytes) + " bytes: /model or the file is damaged");
  }
}

void check_declared_length(const std::string& dataset, uint64_t elems, uint64_t elem_bytes,
                           uint64_t limit, uint64_t file_bytes) {
  if (elems > limit || elems * elem_bytes > file_bytes) {
    throw std::runtime_error("dataset /" + dataset + " declares " + std::to_string(elems) +
                             " elements; at most " + std::to_string(limit) +
                             " are allowed and the file holds " + std::to_string(file_bytes) +
                             " bytes (damaged dataspace?)");
  }
}

namespace {

constexpr size_t kValueBlock = 1024;

// Non-zero when a value of v[0, kValueBlock) is Inf or NaN (exponent bits all set), or above
// `neg_limit` as bits (0x80000000 for non_negative: negative and not -0). Branch-free with a
// fixed trip count, so the compiler vectorizes it even at -O2: the check runs at memory speed.
uint32_t block_bad(const float* v, uint32_t neg_limit) {
  uint32_t bad = 0;
  for (size_t i = 0; i < kValueBlock; ++i) {
    uint32_t b;
    std::memcpy(&b, v + i, sizeof b);
    bad |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u) |
           static_cast<uint32_t>(b > neg_limit);
  }
  return bad;
}

}  // namespace

void check_values(const std::string& dataset, const float* v, size_t n, bool non_negative) {
  const uint32_t neg_limit = non_negative ? 0x80000000u : 0xffffffffu;
  size_t i = 0;
  // Whole blocks are only scanned; the element to name is looked for below, from the first bad
  // block on (or in the tail).
  while (i + kValueBlock <= n && block_bad(v + i, neg_limit) == 0) i += kValueBlock;
  for (; i < n; ++i) {
    if (!std::isfinite(v[i]) || (non_negative && v[i] < 0)) {
      throw std::runtime_error("dataset /" + dataset + " holds " + std::to_string(v[i]) +
                               " at element " + std::to_string(i) +
                               (non_negative ? " (must be finite and >= 0)" : " (must be finite)") +
                               ": the state diverged or the file was altered");
    }
  }
}

}  // namespace railyard::ckpt_checks
