#include "railyard/resume_check.hpp"

#include <nlohmann/json.hpp>

namespace railyard {
namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return "[" + out + "]";
}

}  // namespace

std::vector<std::string> resume_differences(const TrainConfig& cfg, int world,
                                            const std::string& saved_config_json, int saved_world) {
  std::vector<std::string> out;
  const nlohmann::json saved = nlohmann::json::parse(saved_config_json, nullptr, false);
  if (saved.is_discarded() || !saved.is_object() || !saved.contains("data") ||
      !saved.contains("batch") || !saved["batch"].is_number_integer()) {
    out.push_back(
        "the checkpoint's config_json is not a railyard configuration: cannot check "
        "that --data and --batch match the saved run");
    return out;
  }
  std::vector<std::string> saved_data;
  for (const auto& d : saved["data"]) {
    if (d.is_string()) saved_data.push_back(d.get<std::string>());
  }
  if (saved_data != cfg.data) {
    out.push_back("resuming with --data " + joined(cfg.data) + ", the checkpoint was trained on " +
                  joined(saved_data) +
                  ": the saved loader position continues the data order only for the same "
                  "token files (same content, same order)");
  }
  const long long saved_global = static_cast<long long>(saved_world) * saved["batch"].get<int>();
  const long long global = static_cast<long long>(world) * cfg.batch;
  if (saved_global != global) {
    out.push_back("resuming with a global batch of " + std::to_string(global) + " sequences (" +
                  std::to_string(world) + " ranks x --batch " + std::to_string(cfg.batch) +
                  "), the checkpoint's was " + std::to_string(saved_global) + " (" +
                  std::to_string(saved_world) + " x " + std::to_string(saved["batch"].get<int>()) +
                  "): the data order and the losses will differ from an uninterrupted run; keep "
                  "ranks x --batch the same to continue it exactly");
  }
  return out;
}

}  // namespace railyard
