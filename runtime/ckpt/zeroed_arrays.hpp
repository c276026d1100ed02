#pragma once
// Sizes float arrays to n zeros each, fast for large n: a warm checkpoint load copies from the
// page cache at memory speed, so the first touch of its fresh arrays (one page fault per 4 KiB,
// each a trap and a page zeroed by the kernel) was the largest part of it.

#include <cstddef>
#include <vector>

namespace railyard {

// Every array of `arrays` ends with n elements, all 0. Their pages are faulted in by the kernel
// first (madvise MADV_POPULATE_WRITE, Linux 5.14 and later) in 64 MiB pieces on several threads;
// where the kernel does not offer that, the fill itself takes the faults, one thread per array.
void assign_zeroed(const std::vector<std::vector<float>*>& arrays, size_t n);

}  // namespace railyard
