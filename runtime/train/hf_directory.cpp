#include "railyard/hf_directory.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "railyard/durable_file.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/safetensors.hpp"

namespace railyard {
namespace {

namespace fs = std::filesystem;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void write_text_durably(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(getpid());
  remove_file(tmp);
  create_private_file(tmp);
  try {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw std::runtime_error("writing " + tmp + " failed (disk full?)");
    fsync_file(tmp);
    durable_rename(tmp, path);
  } catch (...) {
    remove_file(tmp);
    throw;
  }
}

// A tensor of the file by its transformers name, also without the "transformer." prefix
// (the original GPT-2 upload on the Hub stores "h.0.attn.c_attn.weight", ...).
const SafetensorsEntry* find_hf(const SafetensorsHeader& h, const std::string& hf_name) {
  if (const SafetensorsEntry* e = h.find(hf_name)) return e;
  const std::string prefix = "transformer.";
  return hf_name.rfind(prefix, 0) == 0 ? h.find(hf_name.substr(prefix.size())) : nullptr;
}

bool ignorable(const std::string& name) {
  // GPT-2's causal-mask buffers: constants, not weights.
  for (const char* suffix : {".attn.bias", ".attn.masked_bias"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

}  // namespace

void export_hf_directory(const LoadedCheckpoint& ckpt, const std::string& dir, bool force) {
  const GptConfig m = gpt_config_from(ckpt.model);
  const std::string config = dir + "/config.json", weights = dir + "/model.safetensors";
  if (!force) {
    for (const std::string& p : {config, weights}) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(p, ec))) {
        throw std::runtime_error(p + " exists; pass --force to overwrite it");
      }
    }
  }
  ensure_private_dir(dir);
  const ParamLayout layout = gpt_param_layout(m);
  const std::vector<HfTensor> map = hf_gpt2_tensors(m);
  std::vector<std::vector<float>> data(map.size());
  std::vector<SafetensorsTensorRef> refs;
  for (size_t i = 0; i < map.size(); ++i) {
    size_t n = 1;
    for (int64_t d : map[i].shape) n *= static_cast<size_t>(d);
    data[i].resize(n);
    to_hf_tensor(layout, map[i], ckpt.state.params.data(), data[i].data());
    refs.push_back({map[i].hf_name, map[i].shape, data[i].data()});
  }
  // transformers refuses safetensors files whose metadata lacks format "pt".
  write_safetensors(weights, refs,
                    {{"format", "pt"}, {"railyard_step", std::to_string(ckpt.progress.step)}});
  write_text_durably(config, hf_gpt2_config_json(m));
}

HfPaths hf_paths(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return {path + "/config.json", path + "/model.safetensors"};
  const fs::path p(path);
  return {(p.parent_path().empty() ? fs::path(".") : p.parent_path()).string() + "/config.json",
          path};
}

HfGpt2Config read_hf_config(const std::string& path) {
  const std::string config = hf_paths(path).config;
  std::error_code ec;
  const auto size = fs::file_size(config, ec);
  std::ifstream in(config, std::ios::binary);
  if (ec || !in) {
    throw std::invalid_argument(config +
                                " cannot be read (a Hugging Face GPT-2 directory holds "
                                "config.json and model.safetensors)");
  }
  if (size > (1u << 20)) throw std::invalid_argument(config + " is over 1 MiB");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_hf_gpt2_config(text.str());
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(config + ": " + e.what());
  }
}

FloatArray read_hf_params(const std::string& path, const GptConfig& cfg) {
  const std::string weights = hf_paths(path).weights;
  std::error_code ec;
  if (!fs::is_regular_file(weights, ec)) {
    throw std::invalid_argument(
        weights +
        " does not exist: railyard reads one safetensors file (not pytorch_model.bin "
        "nor a sharded model.safetensors.index.json); write it with "
        "model.save_pretrained(DIR, safe_serialization=True, max_shard_size=\"100GB\")");
  }
  SafetensorsReader reader(weights);
  const SafetensorsHeader& h = reader.header();
  const ParamLayout layout = gpt_param_layout(cfg);
  FloatArray params(layout.total(), 0.0f);
  std::vector<float> buf;
  std::vector<std::string> used;
  for (const HfTensor& t : hf_gpt2_tensors(cfg)) {
    const SafetensorsEntry* e = find_hf(h, t.hf_name);
    if (e == nullptr) {
      throw std::invalid_argument(weights + ": tensor " + t.hf_name + " is missing");
    }
    if (e->shape != t.shape) {
      throw std::invalid_argument(weights + ": tensor " + e->name + " has shape " +
                                  shape_text(e->shape) + ", config.json needs " +
                                  shape_text(t.shape));
    }
    reader.read_f32(*e, buf);
    from_hf_tensor(layout, t, buf.data(), params.data());
    used.push_back(e->name);
  }
  for (const SafetensorsEntry& e : h.tensors) {
    if (std::find(used.begin(), used.end(), e.name) != used.end() || ignorable(e.name)) continue;
    if (e.name == "lm_head.weight") {
      reader.read_f32(e, buf);
      const float* wte = params.data() + layout.at("wte").offset;
      if (buf.size() == static_cast<size_t>(cfg.vocab) * cfg.dim &&
          std::memcmp(buf.data(), wte, buf.size() * sizeof(float)) == 0) {
        continue;
      }
      throw std::invalid_argument(weights +
                                  ": lm_head.weight differs from wte; railyard's LM "
                                  "head is tied to the token embedding");
    }
    throw std::invalid_argument(weights + ": unexpected tensor " + e.name + " " +
                                shape_text(e.shape) + " (not part of a GPT-2 LM)");
  }
  return params;
}

}  // namespace railyard
