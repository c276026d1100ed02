#include "dataset_checksum.hpp"

#include <cstring>
#include <stdexcept>

namespace railyard {

uint64_t xxh3_64(const void* data, size_t bytes) {
  return XXH3_64bits(data, bytes);
}

Xxh3Stream::Xxh3Stream() {
  if (XXH3_64bits_reset(&state_) != XXH_OK) throw std::runtime_error("XXH3_64bits_reset failed");
}

void Xxh3Stream::update(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (XXH3_64bits_update(&state_, data, bytes) != XXH_OK) {
    throw std::runtime_error("XXH3_64bits_update failed");
  }
}

void Xxh3Stream::adopt(const void* bytes) {
  const unsigned char* own_secret = state_.extSecret;
  std::memcpy(&state_, bytes, sizeof state_);
  state_.extSecret = own_secret;
}

uint64_t Xxh3Stream::digest() const {
  return XXH3_64bits_digest(&state_);
}

}  // namespace railyard
