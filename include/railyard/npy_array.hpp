#pragma once
// The NumPy .npy container (format versions 1-3): a magic string, a version, a little-endian
// header length, then a Python dict literal {'descr': '<u2', 'fortran_order': False,
// 'shape': (N,), } padded with spaces and '\n', then the raw array bytes. The parser accepts
// exactly that grammar and nothing else: the header is untrusted input, so every size is
// checked against the file's before anyone allocates for it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace railyard {

struct NpyArray {
  std::string descr;            // NumPy dtype string, e.g. "<u2"
  int item_bytes = 0;           // from descr
  std::vector<uint64_t> shape;  // C order (fortran_order False is required)
  uint64_t data_offset = 0;     // bytes from the file's start to the first element
  uint64_t count = 0;           // product of shape
};

// Longest header accepted (NumPy itself refuses to read headers above 10 000 bytes by default).
constexpr uint64_t kNpyMaxHeader = 1 << 16;

// Parses the header at the start of a file of `file_size` bytes; `head` holds the file's first
// bytes (at least the whole header; more is fine). Checks that the data fills the rest of the
// file exactly. Throws std::invalid_argument naming the field and the value found.
NpyArray parse_npy_header(std::string_view head, uint64_t file_size);

// The header bytes (version 1, 64-byte aligned) for a C-order array of `descr` and `shape`.
std::string npy_header(const std::string& descr, const std::vector<uint64_t>& shape);

}  // namespace railyard
