#include "railyard/model_memory.hpp"

#include <cstdio>

#include "railyard/host_memory.hpp"
#include "railyard/train_config.hpp"

namespace railyard {

double host_bytes_needed(const GptConfig& model, bool cpu_engine, int micro_batch, int seq) {
  const double params = gpt_param_count(model);
  if (!cpu_engine) return 12.0 * params;
  // Per token: the logits over the padded vocabulary and ~16 dim-wide activations per layer.
  const double tokens = static_cast<double>(micro_batch) * seq;
  const double per_token = model.padded_vocab + 16.0 * model.layers * model.dim;
  return 16.0 * params + 4.0 * tokens * per_token;
}

void check_model_fits(const GptConfig& model, bool cpu_engine, int micro_batch, int seq) {
  const auto mem = read_host_memory();
  if (!mem || mem->limit == 0) return;
  const double need = host_bytes_needed(model, cpu_engine, micro_batch, seq);
  if (need <= static_cast<double>(mem->limit)) return;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "the model (vocab %d, dim %d, layers %d, seq %d, batch %d) has %.3g parameters "
                "and needs about %.1f GiB of host memory%s; this job may use %.1f GiB "
                "(memory.max or MemTotal): lower --dim, --layers, --vocab, --seq or --batch",
                model.vocab, model.dim, model.layers, seq, micro_batch, gpt_param_count(model),
                need / (1u << 30),
                cpu_engine ? " for weights, gradients, Adam moments and activations"
                           : " for the checkpoint snapshot of weights and Adam moments",
                static_cast<double>(mem->limit) / (1u << 30));
  throw UsageError(buf);
}

}  // namespace railyard
