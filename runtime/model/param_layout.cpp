#include "railyard/param_layout.hpp"

#include <stdexcept>

namespace railyard {

const TensorSpec& ParamLayout::add(std::string name, std::vector<int64_t> shape, bool decay) {
  if (find(name) != nullptr) {
    throw std::invalid_argument("ParamLayout: duplicate tensor name '" + name + "'");
  }
  size_t numel = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      throw std::invalid_argument("ParamLayout: tensor '" + name +
                                  "' has a non-positive dimension");
    }
    numel *= static_cast<size_t>(d);
  }
  TensorSpec spec;
  spec.name = std::move(name);
  spec.shape = std::move(shape);
  spec.offset = total_;
  spec.numel = numel;
  spec.decay = decay;
  total_ += (numel + kAlign - 1) / kAlign * kAlign;
  tensors_.push_back(std::move(spec));
  return tensors_.back();
}

const TensorSpec* ParamLayout::find(const std::string& name) const {
  for (const TensorSpec& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorSpec& ParamLayout::at(const std::string& name) const {
  const TensorSpec* t = find(name);
  if (t == nullptr) throw std::out_of_range("ParamLayout: no tensor named '" + name + "'");
  return *t;
}

}  // namespace railyard
