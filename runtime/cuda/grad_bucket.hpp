#pragma once
// A bucket of the flat gradient buffer: the unit the gradient exchange averages and the gradient
// norm sums as soon as backward has finished it.

#include <cstddef>

namespace railyard::cuda {

struct GradBucket {
  size_t begin = 0, end = 0;  // elements of the flat gradient buffer
};

}  // namespace railyard::cuda
