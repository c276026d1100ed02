#include "railyard/step_env.hpp"

#include <algorithm>
#include <cctype>

#include "railyard/contract_env.hpp"
#include "railyard/strings.hpp"

namespace railyard {
namespace {

// Slurm's and CUDA's device lists: an empty entry ("0,,1", a trailing comma) names nothing.
std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> out = split(value, ',');
  std::erase(out, std::string());
  return out;
}

bool is_uuid(const std::string& name) {
  return name.starts_with("GPU-") || name.starts_with("MIG-");
}

}  // namespace

StepGpus step_gpus_from_env(const std::optional<std::string>& slurm_step_gpus,
                            const std::optional<std::string>& slurm_job_gpus,
                            const std::optional<std::string>& cuda_visible_devices) {
  // "NoDevFiles" is what Slurm writes into CUDA_VISIBLE_DEVICES when a step has no GPUs.
  std::vector<std::string> cuda;
  if (cuda_visible_devices && *cuda_visible_devices != "NoDevFiles") {
    cuda = split_list(*cuda_visible_devices);
  }
  const std::optional<std::string>& slurm = slurm_step_gpus ? slurm_step_gpus : slurm_job_gpus;
  std::vector<std::string> indices = slurm ? split_list(*slurm) : std::vector<std::string>{};

  // Without Slurm's own list the step has no GPUs from Slurm: a CUDA_VISIBLE_DEVICES then is
  // the user's choice (or an outer step's) and stays as it is.
  StepGpus out;
  if (indices.empty()) return out;
  if (!cuda.empty() && std::all_of(cuda.begin(), cuda.end(), is_uuid)) {
    out.step_gpus = cuda;
    out.cuda_names = cuda;
  } else {
    out.step_gpus = indices;
    if (cuda.size() == indices.size()) out.cuda_names = cuda;
  }
  return out;
}

bool safe_env_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

bool safe_env_value(std::string_view value) {
  return value.size() <= 4096 && std::all_of(value.begin(), value.end(),
                                             [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
}

bool plugin_owned_env(std::string_view name) {
  return name == "CUDA_VISIBLE_DEVICES" || name.starts_with(contract_env::kPrefix);
}

}  // namespace railyard
