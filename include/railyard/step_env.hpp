#pragma once
// What the SPANK glue reads from a step's environment and what it may write into a task's.
// Pure functions over strings, so the glue stays thin and these are unit-tested.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace railyard {

// The step's GPUs as the planner takes them (PlanRequest::step_gpus and cuda_names).
struct StepGpus {
  std::vector<std::string> step_gpus;   // topology indices ("0", "3") or UUIDs
  std::vector<std::string> cuda_names;  // the same GPUs as CUDA_VISIBLE_DEVICES names them
};

// From SLURM_STEP_GPUS (or, for a job-level allocation, SLURM_JOB_GPUS) and
// CUDA_VISIBLE_DEVICES; nullopt for an unset variable. UUIDs in CUDA_VISIBLE_DEVICES (MIG)
// name the GPUs themselves; indices there are only Slurm's renumbering when they differ from
// SLURM_STEP_GPUS. Without SLURM_STEP_GPUS and SLURM_JOB_GPUS the step has no GPUs (empty
// lists), whatever CUDA_VISIBLE_DEVICES says: then the user set it, and it is theirs.
StepGpus step_gpus_from_env(const std::optional<std::string>& slurm_step_gpus,
                            const std::optional<std::string>& slurm_job_gpus,
                            const std::optional<std::string>& cuda_visible_devices);

// Whether `name` is a variable name the plugin may set ([A-Za-z_][A-Za-z0-9_]*).
bool safe_env_name(std::string_view name);
// Whether `value` may go into the environment: printable ASCII only (no newline or other
// control character, nothing that a shell script reading the environment could misparse
// into a second line), at most 4096 characters.
bool safe_env_value(std::string_view value);

// Whether the plugin owns `name` (always written, since Slurm sets it or the plugin reports
// through it), as opposed to a variable a user may have set on purpose and that the plugin
// leaves alone unless the admin forces it.
bool plugin_owned_env(std::string_view name);

}  // namespace railyard
