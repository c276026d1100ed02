// Fuzzes the config.json reader of --init-from (a downloaded directory is untrusted input).
// A bad config may only be refused with std::invalid_argument; an accepted one must give a
// valid railyard model shape whose config.json, written back, parses to the same fields.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "railyard/hf_gpt2.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  railyard::HfGpt2Config h;
  try {
    h = railyard::parse_hf_gpt2_config(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  require(h.n_embd > 0 && h.n_layer > 0 && h.n_head > 0 && h.n_positions > 0 && h.vocab_size > 0);
  require(h.n_embd % h.n_head == 0);
  const railyard::GptConfig c = railyard::gpt_config_from_hf(h);  // validates; must not throw
  require(c.padded_vocab >= c.vocab && c.padded_vocab % 128 == 0);
  const railyard::HfGpt2Config back =
      railyard::parse_hf_gpt2_config(railyard::hf_gpt2_config_json(c));
  require(back.n_embd == h.n_embd && back.n_layer == h.n_layer && back.n_head == h.n_head &&
          back.n_positions == h.n_positions && back.vocab_size == h.vocab_size);
  return 0;
}
