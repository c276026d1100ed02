#pragma once
// The GPT as its checkpoints hold it: the GptConfig as the /model attributes (kGptConfigFields,
// int64 each, in that order) and its parameter layout as named tensors. The one bridge between
// the model and the checkpoint layer, which knows neither the other.

#include "railyard/checkpoint_schema.hpp"
#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"

namespace railyard {

// The attributes of `cfg`, in kGptConfigFields order.
Attributes gpt_attributes(const GptConfig& cfg);

// The config `attrs` give. Throws std::invalid_argument naming the attribute when one is
// missing, out of order, not an integer, outside [1, INT_MAX], or the config is invalid
// (GptConfig::validate).
GptConfig gpt_config_from(const Attributes& attrs);

// The layout's tensors, names, shapes and offsets unchanged.
StoredTensors gpt_stored_tensors(const ParamLayout& layout);

// The GPT's schema: kGptConfigFields as int64 attributes, gpt_param_layout's tensors.
const CheckpointSchema& gpt_checkpoint_schema();

}  // namespace railyard
