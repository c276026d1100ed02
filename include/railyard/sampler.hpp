#pragma once
// Text generation from a GPT on the CPU: the model reads the last max_seq tokens of the
// sequence so far and the next token is drawn from its logits over the real vocabulary.
// Deterministic: the same parameters, prompt and options give the same tokens on every machine
// (std::mt19937_64 is specified bit for bit; the draw is built from its raw output).

#include <cstdint>
#include <span>
#include <vector>

#include "railyard/gpt_config.hpp"

namespace railyard {

struct SampleOptions {
  int tokens = 64;           // new tokens to generate
  double temperature = 1.0;  // <= 0: greedy (the most likely token, the lowest id on ties)
  int top_k = 0;             // > 0: draw among the k most likely tokens only
  uint64_t seed = 1;
};

// Picks one token from `logits` (the real vocabulary) as `opts` says, drawing with the 64
// random bits `draw_bits`. Exposed for tests.
int32_t pick_token(std::span<const float> logits, const SampleOptions& opts, uint64_t draw_bits);

// The opts.tokens tokens that follow `prompt` (non-empty, tokens in [0, cfg.vocab)), generated
// with `params` (gpt_param_layout(cfg).total() values). Throws std::invalid_argument on a bad
// prompt or option.
std::vector<int32_t> sample_gpt(const GptConfig& cfg, std::span<const float> params,
                                std::span<const int32_t> prompt, const SampleOptions& opts);

}  // namespace railyard
