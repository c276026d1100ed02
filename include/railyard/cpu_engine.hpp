#pragma once
// The Engine for --device cpu: the fp32 GPT of gpt_cpu.hpp with AdamW on the host. Gradients
// are averaged over the ranks with MPI all-reduce in buckets of about kBucketBytes, last layer
// first (the order backward produces them), so every rank applies the same update and the
// parameters stay identical everywhere.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "railyard/engine.hpp"
#include "railyard/gpt_cpu.hpp"

namespace railyard {

class CpuEngine final : public Engine {
 public:
  // Throws std::invalid_argument for a bad config, batch or a CUDA-only option.
  CpuEngine(const GptConfig& cfg, const EngineOptions& opts, Communicator& comm, uint64_t seed);

  const GptConfig& config() const override { return model_.config(); }
  const ParamLayout& layout() const override { return model_.layout(); }
  std::string describe() const override;

  void zero_grad() override;
  // Gradients are exchanged in reduce_gradients (MPI is not overlapped with backward on CPU),
  // so last_micro_step changes nothing here.
  float forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int T, float grad_scale, bool last_micro_step) override;
  float evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                 int T) override;
  void reduce_gradients() override;
  float optimizer_step(const AdamWParams& hp, float lr) override;

  void save_state(ModelState& out) override;
  void load_state(const ModelState& in) override;

  std::span<const float> params() const { return params_; }
  std::span<const float> grads() const { return grads_; }
  // The kernels' thread count (cpu_parallel.hpp) is process-wide: the engine constructed last
  // sets it. It changes the speed, never the bits.
  int threads() const { return threads_; }
  // [begin, end) ranges of the flat buffer, in all-reduce order.
  const std::vector<std::pair<size_t, size_t>>& buckets() const { return buckets_; }

  static constexpr size_t kBucketBytes = size_t{4} << 20;

 private:
  GptCpu<float> model_;
  Communicator& comm_;
  int threads_ = 1;
  std::vector<float> params_, grads_, m_, v_;
  int64_t adam_step_ = 0;
  std::vector<std::pair<size_t, size_t>> buckets_;
};

}  // namespace railyard
