#include "railyard/safetensors_export.hpp"

#include "railyard/safetensors.hpp"

namespace railyard {

void export_safetensors(const LoadedCheckpoint& ckpt, const std::string& out_path) {
  // safetensors metadata values must be strings.
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"railyard_step", std::to_string(ckpt.progress.step)},
      {"config_json", ckpt.progress.config_json},
  };
  for (const Attribute& a : ckpt.model) metadata[a.name] = attribute_text(a.value);
  std::vector<SafetensorsTensorRef> tensors;
  for (const StoredTensor& t : ckpt.tensors.tensors) {
    tensors.push_back({t.name, t.shape, ckpt.state.params.data() + t.offset});
  }
  write_safetensors(out_path, tensors, metadata);
}

}  // namespace railyard
