#include <memory>
#include <stdexcept>
#include <string>

#include "railyard/cpu_engine.hpp"
#include "railyard/engine.hpp"
#ifdef RAILYARD_HAVE_CUDA
#include "railyard/cuda_engine.hpp"
#endif

namespace railyard {

std::unique_ptr<Engine> make_engine(const GptConfig& cfg, const EngineOptions& opts,
                                    Communicator& comm, uint64_t seed) {
  if (opts.device == "cpu") return std::make_unique<CpuEngine>(cfg, opts, comm, seed);
  if (opts.device == "auto") {
    EngineOptions resolved = opts;
#ifdef RAILYARD_HAVE_CUDA
    // A GPU when one is usable; make_cuda_engine reports the lack of one as runtime_error.
    resolved.device = "cuda";
    try {
      return make_cuda_engine(cfg, resolved, comm, seed);
    } catch (const std::runtime_error&) {
    }
#endif
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
