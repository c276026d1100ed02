#pragma once
// Writes a checkpoint's parameters as a safetensors file (8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the raw data), so a model
// trained here loads with the Python ecosystem's safetensors readers. Tensor names and shapes
// are the checkpoint's (PyTorch [out, in] linear weights); optimizer state is not exported.

#include <string>

#include "railyard/checkpoint.hpp"

namespace railyard {

// Durable like a checkpoint (temporary name, fsync, rename); mode 0600. `__metadata__` holds
// the step, the model shape and the run's configuration. Throws std::runtime_error naming the
// output on failure.
void export_safetensors(const LoadedCheckpoint& ckpt, const std::string& out_path);

}  // namespace railyard
