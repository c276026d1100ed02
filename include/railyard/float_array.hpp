#pragma once
// The host arrays of a training state (ModelState): a std::vector<float> whose new elements are
// left unset, not zeroed. A checkpoint load writes every element of 1.5 GB of fresh memory by
// reading the file into it; zeroing it first was a second pass over that memory (and a third,
// with faulting its pages in ahead), each as long as the read itself. Fresh pages from the
// kernel are still zero until written; an element is unset only in memory reused by malloc.

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace railyard {

// std::allocator, except that construct() without arguments default-initialises (for float:
// leaves the value unset) instead of value-initialising (zero).
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// resize(n) and FloatArray(n) leave the new elements unset: write all of them before reading
// (a copy, a read from a file), or size with assign(n, 0.0f) / FloatArray(n, 0.0f) for zeros.
using FloatArray = std::vector<float, DefaultInitAllocator<float>>;

}  // namespace railyard
