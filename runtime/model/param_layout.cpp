#include "railyard/param_layout.hpp"

#include <stdexcept>

namespace railyard {

const TensorSpec& ParamLayout::add(std::string name, std::vector<int64_t> shape, bool decay) {
  if (index_.count(name) != 0) {
    throw std::invalid_argument("ParamLayout: duplicate tensor name '" + name + "'");
  }
  size_t numel = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      throw std::invalid_argument("ParamLayout: tensor '" + name +
                                  "' has a non-positive dimension");
    }
    // Shapes may come from a damaged file: a wrapped product would under-allocate.
    if (__builtin_mul_overflow(numel, static_cast<size_t>(d), &numel)) {
      throw std::invalid_argument("ParamLayout: tensor '" + name + "' has more than 2^64 elements");
    }
  }
  TensorSpec spec;
  spec.name = std::move(name);
  spec.shape = std::move(shape);
  spec.offset = total_;
  spec.numel = numel;
  spec.decay = decay;
  total_ += (numel + kAlign - 1) / kAlign * kAlign;
  index_.emplace(spec.name, tensors_.size());
  tensors_.push_back(std::move(spec));
  return tensors_.back();
}

const TensorSpec* ParamLayout::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorSpec& ParamLayout::at(const std::string& name) const {
  const TensorSpec* t = find(name);
  if (t == nullptr) throw std::out_of_range("ParamLayout: no tensor named '" + name + "'");
  return *t;
}

}  // namespace railyard
