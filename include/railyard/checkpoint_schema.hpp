#pragma once
// What a checkpoint holds of a model, as the checkpoint layer sees it: named fp32 tensors in the
// state's flat arrays and typed attributes, never the model itself. The layer that knows the
// model builds these (gpt_checkpoint.hpp for the GPT) and turns the attributes read back into
// its config; the file format is in docs/checkpoint-format.md.

#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace railyard {

// One fp32 tensor: its dataset name, row-major shape, and where its elements lie in each flat
// state array (params, Adam m and v share one layout).
struct StoredTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in elements
  size_t numel = 0;
};

// The tensors in file order, and the length of the flat arrays they lie in (padding included).
struct StoredTensors {
  std::vector<StoredTensor> tensors;
  size_t total = 0;
};

// A typed attribute of the model (the /model group's attributes in the file).
using AttributeValue = std::variant<int64_t, double, std::string>;
struct Attribute {
  std::string name;
  AttributeValue value;
};
using Attributes = std::vector<Attribute>;

// The value as text: an integer, a float in shortest round-trip form, or the string itself.
std::string attribute_text(const AttributeValue& v);

// How the checkpoint layer reads a model back: the attributes to expect and the tensors they
// describe. Implemented by the layer that knows the model.
class CheckpointSchema {
 public:
  virtual ~CheckpointSchema() = default;
  // The attributes' names and types (the alternative each value holds; the values themselves
  // mean nothing), in the fixed order the metadata checksum covers them.
  virtual const Attributes& attribute_types() const = 0;
  // The elements of one flat array the attributes describe (padding included), computed
  // without building the list and without overflow, so a reader can refuse a file too small
  // for them before allocating. Throws std::invalid_argument naming the attribute, its value
  // and what is allowed when they describe no valid model.
  virtual double elements(const Attributes& attrs) const = 0;
  // The tensors, in file order (after elements() accepted the attributes).
  virtual StoredTensors tensors(const Attributes& attrs) const = 0;
};

}  // namespace railyard
