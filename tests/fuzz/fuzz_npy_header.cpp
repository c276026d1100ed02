// Fuzzes the .npy header parser (token files are untrusted input). The input is a whole file.
// A bad header may only be refused with std::invalid_argument; an accepted one must describe
// data that fills the rest of the file exactly, and the header written back for it must parse
// to the same array.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "railyard/npy_array.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  railyard::NpyArray a;
  try {
    a = railyard::parse_npy_header(file, size);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  require(a.data_offset <= size);
  require(a.count * static_cast<uint64_t>(a.item_bytes) == size - a.data_offset);
  uint64_t n = 1;
  for (uint64_t d : a.shape) n *= d;
  require(n == a.count);
  const std::string again = railyard::npy_header(a.descr, a.shape);
  const railyard::NpyArray b =
      railyard::parse_npy_header(again, again.size() + (size - a.data_offset));
  require(b.descr == a.descr && b.shape == a.shape && b.data_offset == again.size());
  return 0;
}
