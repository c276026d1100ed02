#pragma once
// The safetensors container: an 8-byte little-endian header length N, N bytes of JSON naming
// each tensor's dtype, shape and byte range [begin, end) in the data that follows, plus an
// optional "__metadata__" object of strings. The reader treats the file as untrusted: the
// header length, every shape and every byte range are checked against the file's size, ranges
// may neither overlap nor leave holes, before anything is allocated or read.

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace railyard {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range in the data section
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                // 8 + header length
  std::vector<SafetensorsEntry> tensors;  // in data order
  std::map<std::string, std::string> metadata;
  const SafetensorsEntry* find(const std::string& name) const;
};

// Largest header accepted (the format's own limit is 100 MB).
constexpr uint64_t kSafetensorsMaxHeader = 100u << 20;

// The header length stored in the first 8 bytes of a file of `file_size` bytes; throws
// std::invalid_argument when it is absent or runs past the file.
uint64_t safetensors_header_length(std::string_view first8, uint64_t file_size);
// Parses a file's start (at least 8 + header length bytes) as the header of a file of
// `file_size` bytes. Throws std::invalid_argument naming the tensor and field at fault.
SafetensorsHeader parse_safetensors_header(std::string_view head, uint64_t file_size);

// One fp32 tensor to write: `data` holds product(shape) values, row-major.
struct SafetensorsTensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Writes F32 tensors in the order given, durably like a checkpoint (temporary name, fsync,
// rename; mode 0600). `metadata` values are strings. Throws std::runtime_error naming the path.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata);

// A safetensors file opened for reading tensors one at a time.
class SafetensorsReader {
 public:
  // Throws std::runtime_error naming the path and the problem.
  explicit SafetensorsReader(const std::string& path);
  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Reads an F32, BF16 or F16 tensor into `out` as fp32 (exactly; resized to its element
  // count). Throws std::runtime_error for another dtype (naming it and how to convert) or a
  // failed read.
  void read_f32(const SafetensorsEntry& e, std::vector<float>& out);

 private:
  std::string path_;
  std::ifstream in_;
  SafetensorsHeader header_;
};

}  // namespace railyard
