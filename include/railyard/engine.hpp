#pragma once
// A training engine: one model on one device (CPU or CUDA), with its parameters, gradients and
// optimizer state, and the gradient exchange between ranks. The trainer drives any engine the
// same way, so data, schedule, checkpoints and preemption are shared by every backend.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "railyard/adamw.hpp"  // AdamWParams
#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"
#include "railyard/state_snapshot.hpp"
#include "railyard/train_state.hpp"

namespace railyard {

class Communicator;

struct EngineOptions {
  std::string device = "cpu";      // "cpu", "cuda" or "auto"
  std::string precision = "fp32";  // "fp32" or "bf16" (CUDA only)
  int zero_stage = 0;              // 0 or 1
  bool recompute = false;
  bool reduce_bf16 = false;       // all-reduce gradients in bf16 (CUDA only)
  int micro_batch = 1;            // B, for the allocation plan
  int seq = 1;                    // T
  bool reserve_snapshot = false;  // device memory for periodic-checkpoint snapshots (CUDA)
  bool cuda_graphs = true;        // launch the micro-step as CUDA graphs (CUDA)
  int cpu_threads = 0;            // kernel threads on CPU; 0: this rank's CPUs (affinity mask,
                                  // shared by the local ranks when they are not bound)
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const GptConfig& config() const = 0;
  virtual const ParamLayout& layout() const = 0;
  virtual std::string describe() const = 0;  // e.g. "cpu fp32" or "cuda:0 NVIDIA H200 bf16"

  virtual void zero_grad() = 0;
  // One micro-batch (B sequences of T tokens, row-major): forward and backward; gradients of
  // `grad_scale * mean loss` accumulate. `last_micro_step` lets an engine start the gradient
  // exchange during backward. Returns the mean loss over the B*T positions.
  virtual float forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                                 int B, int T, float grad_scale, bool last_micro_step) = 0;
  // Mean loss without touching gradients.
  virtual float evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int T) = 0;
  // Averages the gradients over all ranks; returns when they are final on this rank.
  virtual void reduce_gradients() = 0;
  // Global-norm clip then AdamW at learning rate `lr`; returns the norm before clipping.
  virtual float optimizer_step(const AdamWParams& hp, float lr) = 0;

  // Host copy of the state (for checkpoints). Called between steps.
  virtual void save_state(ModelState& out) = 0;
  // The state for a checkpoint, read later by the writer (state_snapshot.hpp); called between
  // steps. `training_continues` (a periodic save): it must stay as it is now while training
  // goes on, taken without waiting for the device (a device-side copy). Otherwise (the run
  // stops after the save) it may read the live state until released. nullptr when the engine
  // has no such snapshot (the CPU engine, or no room on the device): use save_state.
  virtual std::shared_ptr<StateSnapshot> snapshot_state(bool /*training_continues*/) {
    return nullptr;
  }
  // What the engine set aside for checkpoints, for the start line ("" when nothing).
  virtual std::string checkpoint_note() const { return ""; }
  // Restores a state whose params cover the whole layout and whose moments cover at least this
  // rank's shard. Throws std::invalid_argument when sizes do not match the layout.
  virtual void load_state(const ModelState& in) = 0;
  // Bytes of device memory in use and in total (0, 0 on CPU).
  virtual std::pair<size_t, size_t> device_memory() const { return {0, 0}; }
};

// Makes the engine for opts.device; parameters are initialised with gpt_init_params(seed).
// "auto" is decided by all ranks together (so every rank must call this): cuda when the build
// has CUDA and every rank sees a GPU, else cpu on every rank (then in fp32, without the GPU-only
// options); describe() tells which. A CUDA failure after choosing cuda throws, as for "cuda".
// Throws std::runtime_error when the device is unavailable (e.g. "cuda" without a GPU or in a
// build without CUDA), naming the fix.
std::unique_ptr<Engine> make_engine(const GptConfig& cfg, const EngineOptions& opts,
                                    Communicator& comm, uint64_t seed);

}  // namespace railyard
