#pragma once
// Whether a model fits this process's host memory, checked before anything is allocated, so a
// huge --vocab, --dim, --layers or --seq is refused with the memory it would need instead of
// ending in std::bad_alloc (or the OOM killer) minutes into the set-up.

#include <cstdint>

#include "railyard/gpt_config.hpp"

namespace railyard {

// Bytes of host memory a run needs at least: fp32 params, gradients and both Adam moments on
// the CPU engine (a snapshot of params and moments for checkpoints on a GPU engine), plus the
// CPU engine's activations for `micro_batch` x `seq` tokens.
double host_bytes_needed(const GptConfig& model, bool cpu_engine, int micro_batch, int seq);

// Throws UsageError naming the model, the bytes it needs and the limit (the cgroup's memory.max,
// else MemTotal) when it cannot fit; does nothing when the limit is unknown.
void check_model_fits(const GptConfig& model, bool cpu_engine, int micro_batch, int seq);

}  // namespace railyard
