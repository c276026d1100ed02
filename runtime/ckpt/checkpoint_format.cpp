#include "checkpoint_format.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dataset_checksum.hpp"
#include "railyard/strings.hpp"

namespace railyard::ckpt_format {
namespace {

template <typename T>
void put(std::vector<unsigned char>& out, T v) {
  static_assert(sizeof(T) == 8);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, 8);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(bits >> (8 * i)));
}

}  // namespace

StoredMeta stored_meta(const Meta& meta) {
  const TrainProgress& p = meta.progress;
  return StoredMeta{p.step,        p.tokens_seen,  meta.adam_step,  p.world_size, p.lr,
                    p.loader.seed, p.loader.epoch, p.loader.cursor, meta.model};
}

uint64_t meta_checksum(const StoredMeta& m, int64_t format_version) {
  std::vector<unsigned char> b;
  put<int64_t>(b, format_version);
  put<int64_t>(b, m.step);
  put<int64_t>(b, m.tokens_seen);
  put<int64_t>(b, m.adam_step);
  put<int64_t>(b, m.world_size);
  put<double>(b, m.lr);
  put<uint64_t>(b, m.loader_seed);
  put<uint64_t>(b, m.loader_epoch);
  put<uint64_t>(b, m.loader_cursor);
  for (const Attribute& a : m.model) {
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      put<int64_t>(b, *i);
    } else if (const auto* d = std::get_if<double>(&a.value)) {
      put<double>(b, *d);
    } else {
      const std::string& text = std::get<std::string>(a.value);
      put<uint64_t>(b, text.size());
      b.insert(b.end(), text.begin(), text.end());
    }
  }
  return xxh3_64(b.data(), b.size());
}

uint64_t meta_checksum(const Meta& meta, int64_t format_version) {
  return meta_checksum(stored_meta(meta), format_version);
}

std::string file_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "ckpt-%08" PRId64 ".h5", step);
  return buf;
}

std::string temp_name(int64_t step, long pid) {
  return "." + file_name(step) + ".tmp-" + std::to_string(pid);
}

std::optional<int64_t> step_of(const std::string& name) {
  if (name.size() <= 8 || name.rfind("ckpt-", 0) != 0 || name.substr(name.size() - 3) != ".h5") {
    return std::nullopt;
  }
  const std::string digits = name.substr(5, name.size() - 8);
  if (!all_digits(digits) || digits.size() > 18) return std::nullopt;
  return std::stoll(digits);
}

bool is_temp_name(const std::string& name) {
  const size_t tmp = name.find(".h5.tmp-");
  return name.rfind(".ckpt-", 0) == 0 && tmp != std::string::npos &&
         step_of(name.substr(1, tmp + 3 - 1)).has_value();
}

}  // namespace railyard::ckpt_format
