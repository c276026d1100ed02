#include "railyard/safetensors_export.hpp"

#include "railyard/safetensors.hpp"

namespace railyard {

void export_safetensors(const LoadedCheckpoint& ckpt, const std::string& out_path) {
  const ParamLayout layout = gpt_param_layout(ckpt.model);
  const GptConfig& m = ckpt.model;
  // safetensors metadata values must be strings.
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"railyard_step", std::to_string(ckpt.progress.step)},
      {"vocab", std::to_string(m.vocab)},
      {"padded_vocab", std::to_string(m.padded_vocab)},
      {"max_seq", std::to_string(m.max_seq)},
      {"layers", std::to_string(m.layers)},
      {"heads", std::to_string(m.heads)},
      {"dim", std::to_string(m.dim)},
      {"config_json", ckpt.progress.config_json},
  };
  std::vector<SafetensorsTensorRef> tensors;
  for (const TensorSpec& t : layout.tensors()) {
    tensors.push_back({t.name, t.shape, ckpt.state.params.data() + t.offset});
  }
  write_safetensors(out_path, tensors, metadata);
}

}  // namespace railyard
