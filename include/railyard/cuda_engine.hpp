#pragma once
// The CUDA engine: GPT on one GPU per rank, NCCL between ranks. Only in builds with CUDA.

#include <cstdint>
#include <memory>

#include "railyard/engine.hpp"

namespace railyard {

// Picks the device (0 when the plugin bound the task, else local rank modulo device count),
// bootstraps NCCL over `comm`, allocates everything once. Throws std::runtime_error naming the
// fix when no usable GPU is present.
std::unique_ptr<Engine> make_cuda_engine(const GptConfig& cfg, const EngineOptions& opts,
                                         Communicator& comm, uint64_t seed);

// CUDA devices this process sees (CUDA_VISIBLE_DEVICES applied); 0 when there is none or no
// usable driver. Never throws.
int cuda_device_count();

}  // namespace railyard
