#include <unistd.h>

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "railyard/durable_file.hpp"
#include "railyard/safetensors.hpp"

namespace railyard {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader copies it as is");

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("safetensors header: " + what);
}

uint64_t dtype_bytes(const std::string& name, const std::string& dtype) {
  static const std::map<std::string, uint64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = sizes.find(dtype);
  if (it == sizes.end()) bad("tensor '" + name + "' has an unknown dtype '" + dtype + "'");
  return it->second;
}

SafetensorsEntry parse_entry(const std::string& name, const nlohmann::json& j, uint64_t data_size) {
  if (!j.is_object()) bad("tensor '" + name + "' is not a JSON object");
  SafetensorsEntry e;
  e.name = name;
  const auto dtype = j.find("dtype");
  const auto shape = j.find("shape");
  const auto offsets = j.find("data_offsets");
  if (dtype == j.end() || !dtype->is_string()) bad("tensor '" + name + "' has no dtype string");
  if (shape == j.end() || !shape->is_array() || shape->size() > 16) {
    bad("tensor '" + name + "' has no shape array (of at most 16 dimensions)");
  }
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    bad("tensor '" + name + "' needs data_offsets [begin, end] of non-negative integers");
  }
  e.dtype = dtype->get<std::string>();
  uint64_t bytes = dtype_bytes(name, e.dtype);
  for (const nlohmann::json& d : *shape) {
    if (!d.is_number_unsigned())
      bad("tensor '" + name + "' has a shape entry that is not a non-negative integer");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && bytes > data_size / n) {
      bad("tensor '" + name + "' of shape " + shape->dump() + " is larger than the file's data (" +
          std::to_string(data_size) + " bytes)");
    }
    bytes *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    bad("tensor '" + name + "' has data_offsets [" + std::to_string(e.begin) + ", " +
        std::to_string(e.end) + "] outside the file's data of " + std::to_string(data_size) +
        " bytes");
  }
  if (e.end - e.begin != bytes) {
    bad("tensor '" + name + "': dtype " + e.dtype + " and shape " + shape->dump() + " need " +
        std::to_string(bytes) + " bytes, data_offsets give " + std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

const SafetensorsEntry* SafetensorsHeader::find(const std::string& name) const {
  for (const SafetensorsEntry& e : tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

uint64_t safetensors_header_length(std::string_view first8, uint64_t file_size) {
  if (first8.size() < 8 || file_size < 8) bad("the file is shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(first8[i])) << (8 * i);
  if (n < 2 || n > kSafetensorsMaxHeader || n > file_size - 8) {
    bad("header length " + std::to_string(n) + " does not fit the file (" +
        std::to_string(file_size) + " bytes; at most " + std::to_string(kSafetensorsMaxHeader) +
        ")");
  }
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view head, uint64_t file_size) {
  const uint64_t n = safetensors_header_length(head, file_size);
  if (head.size() < 8 + n) bad("truncated: the header needs " + std::to_string(n) + " bytes");
  const nlohmann::json j = nlohmann::json::parse(head.substr(8, n), nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad("the header is not a JSON object");
  SafetensorsHeader h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad("__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad("__metadata__ value '" + k + "' is not a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, value, data_size));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  // The format forbids overlaps and holes: each tensor starts where the previous one ended.
  uint64_t at = 0;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin != at)
      bad("tensor '" + e.name + "' starts at byte " + std::to_string(e.begin) +
          " of the data, expected " + std::to_string(at) + " (overlap or hole)");
    at = e.end;
  }
  if (at != data_size)
    bad("the tensors cover " + std::to_string(at) + " bytes, the file's data is " +
        std::to_string(data_size));
  return h;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensorRef& t : tensors) {
    uint64_t bytes = sizeof(float);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned (allowed by the format).
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  remove_file(tmp);
  create_private_file(tmp);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(text.size() >> (8 * i));
    out.write(len, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafetensorsTensorRef& t : tensors) {
      const auto& e = header[t.name]["data_offsets"];
      out.write(reinterpret_cast<const char*>(t.data),
                static_cast<std::streamsize>(e[1].get<uint64_t>() - e[0].get<uint64_t>()));
    }
    out.close();
    if (!out) throw std::runtime_error("writing " + tmp + " failed (disk full?)");
    fsync_file(tmp);
    durable_rename(tmp, path);
  } catch (const std::exception& e) {
    remove_file(tmp);
    throw std::runtime_error("safetensors export to " + path + ": " + e.what());
  }
}

SafetensorsReader::SafetensorsReader(const std::string& path)
    : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw std::runtime_error("'" + path + "' cannot be opened");
  in_.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in_.tellg());
  in_.seekg(0);
  try {
    std::string head(8, '\0');
    in_.read(head.data(), 8);
    const uint64_t n = safetensors_header_length(in_.gcount() == 8 ? head : "", size);
    head.resize(8 + n);
    in_.read(head.data() + 8, static_cast<std::streamsize>(n));
    if (static_cast<uint64_t>(in_.gcount()) != n)
      throw std::invalid_argument("short read of the header");
    header_ = parse_safetensors_header(head, size);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("'" + path + "': " + e.what());
  }
}

namespace {

// IEEE binary16 to binary32, exactly (every half value is a float).
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: shift the mantissa up to normal form.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

void SafetensorsReader::read_f32(const SafetensorsEntry& e, std::vector<float>& out) {
  const bool f32 = e.dtype == "F32", bf16 = e.dtype == "BF16", f16 = e.dtype == "F16";
  if (!f32 && !bf16 && !f16) {
    throw std::runtime_error("'" + path_ + "': tensor '" + e.name + "' is " + e.dtype +
                             "; railyard reads F32, BF16 and F16 (save the model in float32, e.g. "
                             "model.float().save_pretrained(DIR))");
  }
  const uint64_t bytes = e.end - e.begin;
  std::vector<uint16_t> narrow(f32 ? 0 : bytes / 2);
  out.resize(f32 ? bytes / sizeof(float) : narrow.size());
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(header_.data_start + e.begin));
  in_.read(f32 ? reinterpret_cast<char*>(out.data()) : reinterpret_cast<char*>(narrow.data()),
           static_cast<std::streamsize>(bytes));
  if (!in_) throw std::runtime_error("'" + path_ + "': reading tensor '" + e.name + "' failed");
  for (size_t i = 0; i < narrow.size(); ++i) {
    // bfloat16 is the top half of a float; both widenings are exact.
    out[i] = bf16 ? std::bit_cast<float>(static_cast<uint32_t>(narrow[i]) << 16)
                  : half_to_float(narrow[i]);
  }
}

}  // namespace railyard
