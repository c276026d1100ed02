#include "railyard/safetensors_export.hpp"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "railyard/durable_file.hpp"

namespace railyard {

void export_safetensors(const LoadedCheckpoint& ckpt, const std::string& out_path) {
  const ParamLayout layout = gpt_param_layout(ckpt.model);
  nlohmann::json header = nlohmann::json::object();
  const GptConfig& m = ckpt.model;
  // safetensors metadata values must be strings.
  header["__metadata__"] = {
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
  uint64_t offset = 0;
  for (const TensorSpec& t : layout.tensors()) {
    const uint64_t bytes = t.numel * sizeof(float);
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data starts 8-byte aligned (allowed by the format).
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = out_path + ".tmp-" + std::to_string(getpid());
  remove_file(tmp);
  create_private_file(tmp);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const TensorSpec& t : layout.tensors()) {
      out.write(reinterpret_cast<const char*>(ckpt.state.params.data() + t.offset),
                static_cast<std::streamsize>(t.numel * sizeof(float)));
    }
    out.close();
    if (!out) throw std::runtime_error("writing " + tmp + " failed (disk full?)");
    fsync_file(tmp);
    durable_rename(tmp, out_path);
  } catch (const std::exception& e) {
    remove_file(tmp);
    throw std::runtime_error("safetensors export to " + out_path + ": " + e.what());
  }
}

}  // namespace railyard
