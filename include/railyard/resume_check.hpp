#pragma once
// What a resume changes against the run that saved the checkpoint (its configuration is stored
// in the checkpoint's config_json). The loader position only continues the saved data order
// with the same token files and the same global batch (ranks x --batch); a change is allowed
// (moved files, a job resumed on other ranks) but said, with what it costs.

#include <string>
#include <vector>

#include "railyard/train_config.hpp"

namespace railyard {

// One warning per difference in --data or in the global batch, naming both values and why it
// matters; none when the saved configuration is the same (or unreadable: said as a warning).
std::vector<std::string> resume_differences(const TrainConfig& cfg, int world,
                                            const std::string& saved_config_json, int saved_world);

}  // namespace railyard
