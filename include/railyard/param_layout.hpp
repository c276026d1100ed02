#pragma once
// A model's parameters as named tensors packed into one flat fp32 buffer.
// Gradients and optimizer moments use the same layout, so bucketed all-reduce, checkpoint
// datasets (one per tensor) and ZeRO shards are all slices of one index space.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace railyard {

struct TensorSpec {
  std::string name;            // e.g. "h.3.attn.qkv.weight"; also the checkpoint dataset name
  std::vector<int64_t> shape;  // row-major
  size_t offset = 0;           // in elements, into the flat buffer
  size_t numel = 0;
  bool decay = true;  // AdamW weight decay applies (not to biases or LayerNorm)
};

class ParamLayout {
 public:
  // Appends a tensor; offsets are aligned to `kAlign` elements so every tensor starts on a
  // 128-bit boundary in fp32 and bf16 copies. Throws std::invalid_argument on a duplicate name
  // or a non-positive dimension.
  const TensorSpec& add(std::string name, std::vector<int64_t> shape, bool decay);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  // Total elements of the flat buffer, padding included.
  size_t total() const { return total_; }
  // Throws std::out_of_range naming the tensor when it is absent.
  const TensorSpec& at(const std::string& name) const;
  const TensorSpec* find(const std::string& name) const;

  static constexpr size_t kAlign = 8;

 private:
  std::vector<TensorSpec> tensors_;
  // Name -> index into tensors_, so add() and find() stay O(1) with 10^5 layers.
  std::unordered_map<std::string, size_t> index_;
  size_t total_ = 0;
};

}  // namespace railyard
