#pragma once
// Hugging Face GPT-2 directories on disk: config.json plus model.safetensors in transformers'
// GPT2LMHeadModel layout (hf_gpt2.hpp), written from a checkpoint and read to start training.

#include <string>
#include <vector>

#include "railyard/checkpoint.hpp"
#include "railyard/hf_gpt2.hpp"

namespace railyard {

// Writes DIR/config.json and DIR/model.safetensors (each durably: temporary name, fsync,
// rename; mode 0600; DIR created 0700 when missing). Refuses, before writing anything, when
// either file exists and `force` is false. Throws std::runtime_error naming the path.
void export_hf_directory(const LoadedCheckpoint& ckpt, const std::string& dir, bool force);

// The two files of `path`: a directory holding both, or a .safetensors file with config.json
// beside it.
struct HfPaths {
  std::string config;
  std::string weights;
};
HfPaths hf_paths(const std::string& path);

// Reads and checks config.json (parse_hf_gpt2_config); throws std::invalid_argument naming the
// file, the field and both values.
HfGpt2Config read_hf_config(const std::string& path);

// Reads the weights into railyard's flat layout for `cfg` (padding rows zero). Every tensor
// must be there with its shape (with or without the "transformer." prefix); GPT-2's attention
// mask buffers are ignored, lm_head.weight must equal wte; anything else is an error naming the
// tensor. Throws std::invalid_argument (bad content) or std::runtime_error (I/O).
FloatArray read_hf_params(const std::string& path, const GptConfig& cfg);

}  // namespace railyard
