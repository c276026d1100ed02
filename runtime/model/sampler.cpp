#include "railyard/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "railyard/gpt_cpu.hpp"

namespace railyard {

int32_t pick_token(std::span<const float> logits, const SampleOptions& opts, uint64_t draw_bits) {
  const auto V = static_cast<int32_t>(logits.size());
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  // Most likely first, the lower id first on ties, so the order is fully determined.
  auto more_likely = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (opts.temperature <= 0) return *std::min_element(ids.begin(), ids.end(), more_likely);
  if (opts.top_k > 0 && opts.top_k < V) {
    std::partial_sort(ids.begin(), ids.begin() + opts.top_k, ids.end(), more_likely);
    ids.resize(static_cast<size_t>(opts.top_k));
  }
  const float top = logits[*std::min_element(ids.begin(), ids.end(), more_likely)];
  std::vector<double> weight(ids.size());
  double total = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    weight[i] = std::exp((static_cast<double>(logits[ids[i]]) - top) / opts.temperature);
    total += weight[i];
  }
  const double u = static_cast<double>(draw_bits >> 11) * 0x1.0p-53 * total;  // [0, total)
  double cum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cum += weight[i];
    if (u < cum) return ids[i];
  }
  return ids.back();  // u within rounding of total
}

std::vector<int32_t> sample_gpt(const GptConfig& cfg, std::span<const float> params,
                                std::span<const int32_t> prompt, const SampleOptions& opts) {
  if (prompt.empty()) throw std::invalid_argument("the prompt needs at least one token");
  if (opts.tokens < 0) {
    throw std::invalid_argument("--tokens must be zero or positive (got " +
                                std::to_string(opts.tokens) + ")");
  }
  const size_t total = prompt.size() + static_cast<size_t>(opts.tokens);
  const int window = static_cast<int>(std::min<size_t>(total, static_cast<size_t>(cfg.max_seq)));
  GptCpu<float> model(cfg, 1, window);
  if (params.size() != model.layout().total()) {
    throw std::invalid_argument("sample: " + std::to_string(params.size()) +
                                " parameters, the model needs " +
                                std::to_string(model.layout().total()));
  }
  std::vector<int32_t> seq(prompt.begin(), prompt.end());
  std::mt19937_64 rng(opts.seed);
  const auto Vp = static_cast<size_t>(cfg.padded_vocab);
  for (int i = 0; i < opts.tokens; ++i) {
    const size_t T = std::min(seq.size(), static_cast<size_t>(window));
    const std::span<const int32_t> ctx(seq.data() + seq.size() - T, T);
    const std::span<const float> logits = model.logits(params.data(), ctx, 1, static_cast<int>(T));
    const std::span<const float> last =
        logits.subspan((T - 1) * Vp, static_cast<size_t>(cfg.vocab));
    seq.push_back(pick_token(last, opts, rng()));
  }
  return {seq.begin() + static_cast<std::ptrdiff_t>(prompt.size()), seq.end()};
}

}  // namespace railyard
