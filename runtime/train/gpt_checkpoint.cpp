#include "railyard/gpt_checkpoint.hpp"

#include <climits>
#include <stdexcept>
#include <string>

namespace railyard {
namespace {

class GptSchema : public CheckpointSchema {
 public:
  GptSchema() {
    for (const GptConfigField& f : kGptConfigFields) types_.push_back({f.name, int64_t{0}});
  }
  const Attributes& attribute_types() const override { return types_; }
  double elements(const Attributes& attrs) const override {
    return gpt_param_count(gpt_config_from(attrs));
  }
  StoredTensors tensors(const Attributes& attrs) const override {
    return gpt_stored_tensors(gpt_param_layout(gpt_config_from(attrs)));
  }

 private:
  Attributes types_;
};

}  // namespace

Attributes gpt_attributes(const GptConfig& cfg) {
  Attributes out;
  for (const GptConfigField& f : kGptConfigFields) out.push_back({f.name, int64_t{cfg.*f.member}});
  return out;
}

GptConfig gpt_config_from(const Attributes& attrs) {
  constexpr size_t kFields = std::size(kGptConfigFields);
  if (attrs.size() != kFields) {
    throw std::invalid_argument(std::to_string(attrs.size()) + " attributes, the GPT has " +
                                std::to_string(kFields));
  }
  GptConfig cfg;
  for (size_t i = 0; i < kFields; ++i) {
    const GptConfigField& f = kGptConfigFields[i];
    const Attribute& a = attrs[i];
    const auto* v = std::get_if<int64_t>(&a.value);
    if (a.name != f.name || v == nullptr) {
      throw std::invalid_argument("attribute " + std::to_string(i) + " is " + a.name +
                                  ", the GPT's is the integer " + f.name);
    }
    if (*v < 1 || *v > INT_MAX) {
      throw std::invalid_argument(a.name + " is " + std::to_string(*v) + ", outside [1, " +
                                  std::to_string(INT_MAX) + "]");
    }
    cfg.*f.member = static_cast<int>(*v);
  }
  cfg.validate();
  return cfg;
}

StoredTensors gpt_stored_tensors(const ParamLayout& layout) {
  StoredTensors out;
  out.total = layout.total();
  out.tensors.reserve(layout.tensors().size());
  for (const TensorSpec& t : layout.tensors())
    out.tensors.push_back({t.name, t.shape, t.offset, t.numel});
  return out;
}

const CheckpointSchema& gpt_checkpoint_schema() {
  static const GptSchema schema;
  return schema;
}

}  // namespace railyard
