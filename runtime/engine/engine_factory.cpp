#include <memory>
#include <stdexcept>
#include <string>

#include "railyard/communicator.hpp"
#include "railyard/cpu_engine.hpp"
#include "railyard/engine.hpp"
#ifdef RAILYARD_HAVE_CUDA
#include "railyard/cuda_engine.hpp"
#endif

namespace railyard {
namespace {

// Whether this rank could drive a GPU: a build with CUDA and at least one visible device.
bool gpu_usable_here() {
#ifdef RAILYARD_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

}  // namespace

std::unique_ptr<Engine> make_engine(const GptConfig& cfg, const EngineOptions& opts,
                                    Communicator& comm, uint64_t seed) {
  if (opts.device == "cpu") return std::make_unique<CpuEngine>(cfg, opts, comm, seed);
  if (opts.device == "auto") {
    // Decided once, by all ranks together: the NCCL setup is collective, so either every rank
    // has a GPU and all run on CUDA, or all run on the CPU. After that choice a CUDA error
    // (out of memory included) is an error, never one rank's silent fallback.
    EngineOptions resolved = opts;
    if (comm.allreduce_min(gpu_usable_here() ? 1 : 0) == 1) {
      resolved.device = "cuda";
      return make_engine(cfg, resolved, comm, seed);
    }
    resolved.device = "cpu";
    // Options that only mean something on a GPU fall back to their CPU equivalents.
    resolved.precision = "fp32";
    resolved.zero_stage = 0;
    resolved.recompute = false;
    resolved.reduce_bf16 = false;
    return std::make_unique<CpuEngine>(cfg, resolved, comm, seed);
  }
  if (opts.device == "cuda") {
#ifdef RAILYARD_HAVE_CUDA
    return make_cuda_engine(cfg, opts, comm, seed);
#else
    throw std::runtime_error(
        "--device cuda: this build has no CUDA; rebuild with RAILYARD_CUDA=ON on a machine with "
        "nvcc (or use --device cpu)");
#endif
  }
  throw std::invalid_argument("unknown device '" + opts.device + "' (allowed: cpu, cuda, auto)");
}

}  // namespace railyard
