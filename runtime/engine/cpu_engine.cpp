#include "railyard/cpu_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "railyard/adamw.hpp"
#include "railyard/communicator.hpp"
#include "railyard/cpu_parallel.hpp"

namespace railyard {
namespace {

void reject_cuda_only(const EngineOptions& opts) {
  if (opts.precision != "fp32") {
    throw std::invalid_argument("precision '" + opts.precision +
                                "' needs --device cuda; the CPU engine computes in fp32");
  }
  if (opts.zero_stage != 0) {
    throw std::invalid_argument("ZeRO stage " + std::to_string(opts.zero_stage) +
                                " needs --device cuda; the CPU engine keeps the whole optimizer "
                                "state (zero stage 0)");
  }
  if (opts.recompute) throw std::invalid_argument("recompute needs --device cuda");
  if (opts.reduce_bf16) throw std::invalid_argument("bf16 gradient reduction needs --device cuda");
  if (opts.cpu_threads < 0) {
    throw std::invalid_argument("cpu threads must be >= 0 (0: automatic), got " +
                                std::to_string(opts.cpu_threads));
  }
}

// Kernel threads for this rank (they change the speed, not the bits). A rank bound by the plugin or
// the launcher owns its affinity mask; an unbound rank shares the machine with the other ranks on
// its node.
int pick_threads(const EngineOptions& opts, const Communicator& comm) {
  if (opts.cpu_threads > 0) return opts.cpu_threads;
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int mine = cpu::affinity_cpus();
  if (mine >= hw) mine = std::max(1, hw / std::max(1, comm.local_size()));
  return mine;
}

// Buckets of at most `cap` elements from the end of the buffer backwards, cut at tensor
// boundaries where a whole tensor fits and inside a tensor only where one alone exceeds `cap`.
std::vector<std::pair<size_t, size_t>> plan_buckets(const ParamLayout& layout, size_t cap) {
  std::vector<size_t> bounds;
  for (const TensorSpec& t : layout.tensors()) bounds.push_back(t.offset);
  std::vector<std::pair<size_t, size_t>> buckets;
  size_t end = layout.total();
  while (end > 0) {
    const size_t lo = end > cap ? end - cap : 0;
    auto it = std::lower_bound(bounds.begin(), bounds.end(), lo);
    const size_t begin = (it != bounds.end() && *it < end) ? *it : lo;
    buckets.emplace_back(begin, end);
    end = begin;
  }
  return buckets;
}

}  // namespace

CpuEngine::CpuEngine(const GptConfig& cfg, const EngineOptions& opts, Communicator& comm,
                     uint64_t seed)
    : model_((reject_cuda_only(opts), cfg), opts.micro_batch, opts.seq), comm_(comm) {
  threads_ = pick_threads(opts, comm);
  cpu::set_threads(threads_);
  const size_t n = model_.layout().total();
  params_.resize(n);
  grads_.assign(n, 0.0f);
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  gpt_init_params(cfg, model_.layout(), seed, params_.data());
  buckets_ = plan_buckets(model_.layout(), kBucketBytes / sizeof(float));
}

std::string CpuEngine::describe() const {
  return "cpu fp32, " + std::to_string(threads_) + " thread" + (threads_ == 1 ? "" : "s");
}

void CpuEngine::zero_grad() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
}

float CpuEngine::forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                                  int B, int T, float grad_scale, bool /*last_micro_step*/) {
  const float loss = model_.forward(params_.data(), tokens, targets, B, T);
  model_.backward(params_.data(), grads_.data(), grad_scale);
  return loss;
}

float CpuEngine::evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                          int T) {
  return model_.forward(params_.data(), tokens, targets, B, T);
}

void CpuEngine::reduce_gradients() {
  const int world = comm_.size();
  if (world == 1) return;
  const float inv = 1.0f / static_cast<float>(world);
  for (const auto& [begin, end] : buckets_) {
    comm_.allreduce_sum(grads_.data() + begin, end - begin);
    for (size_t i = begin; i < end; ++i) grads_[i] *= inv;
  }
}

float CpuEngine::optimizer_step(const AdamWParams& hp, float lr) {
  const double norm = global_norm(grads_.data(), grads_.size());
  ++adam_step_;
  adamw_step(model_.layout(), params_.data(), grads_.data(), m_.data(), v_.data(), hp, lr,
             clip_factor(norm, hp.clip), adam_step_);
  return static_cast<float>(norm);
}

void CpuEngine::save_state(ModelState& out) {
  out.params.assign(params_.begin(), params_.end());
  out.m.assign(m_.begin(), m_.end());
  out.v.assign(v_.begin(), v_.end());
  out.shard_begin = 0;
  out.shard_end = params_.size();
  out.adam_step = adam_step_;
}

void CpuEngine::load_state(const ModelState& in) {
  const size_t n = params_.size();
  if (in.params.size() != n) {
    throw std::invalid_argument("checkpoint has " + std::to_string(in.params.size()) +
                                " parameters, this model's layout has " + std::to_string(n) +
                                " (is the model shape --layers/--heads/--dim/--vocab/--seq the "
                                "same?)");
  }
  if (in.shard_begin != 0 || in.shard_end != n) {
    throw std::invalid_argument("checkpoint optimizer state covers elements [" +
                                std::to_string(in.shard_begin) + ", " +
                                std::to_string(in.shard_end) +
                                ") but the CPU engine needs all of [0, " + std::to_string(n) + ")");
  }
  if (in.m.size() != n || in.v.size() != n) {
    throw std::invalid_argument("checkpoint AdamW moments have " + std::to_string(in.m.size()) +
                                " and " + std::to_string(in.v.size()) + " elements, expected " +
                                std::to_string(n));
  }
  if (in.adam_step < 0) {
    throw std::invalid_argument("checkpoint AdamW step is negative (" +
                                std::to_string(in.adam_step) + ")");
  }
  params_.assign(in.params.begin(), in.params.end());
  m_.assign(in.m.begin(), in.m.end());
  v_.assign(in.v.begin(), in.v.end());
  adam_step_ = in.adam_step;
}

}  // namespace railyard
