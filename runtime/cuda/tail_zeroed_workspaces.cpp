#include "tail_zeroed_workspaces.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"

namespace railyard::cuda {
namespace {

constexpr size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

// The eager region, then the arena: the largest workspace, and for each call its tail and the
// alignment it may skip (each call ends at most tail + kAlign past the one before, the first at
// `largest`).
size_t TailZeroedWorkspaces::bytes_for(size_t largest, size_t tail, size_t calls) {
  return 2 * round_up(largest, kAlign) + calls * (tail + kAlign);
}

TailZeroedWorkspaces::TailZeroedWorkspaces(void* base, size_t largest, size_t tail, size_t calls)
    : eager_(static_cast<char*>(base)),
      arena_(eager_ + round_up(largest, kAlign)),
      largest_(largest),
      tail_(tail),
      arena_bytes_(bytes_for(largest, tail, calls) - round_up(largest, kAlign)) {}

TailZeroedWorkspaces::Workspace TailZeroedWorkspaces::take(size_t need, size_t tail,
                                                           cudaStream_t stream) {
  if (need > largest_ || tail > tail_) {
    throw std::invalid_argument("TailZeroedWorkspaces: a workspace of " + std::to_string(need) +
                                " bytes with a zeroed tail of " + std::to_string(tail) +
                                ", sized for " + std::to_string(largest_) + " and " +
                                std::to_string(tail_) + ": size the memory by bytes_for()");
  }
  const Workspace eager{eager_, largest_};
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  RY_CUDA(cudaStreamGetCaptureInfo(stream, &status, &id));
  if (status != cudaStreamCaptureStatusActive) return eager;
  if (id != capture_id_) {  // a new capture: a new graph, which may use the whole arena
    capture_id_ = id;
    frontier_ = 0;
  }
  // The tail, [start + need - tail, start + need), begins at or after the frontier.
  const size_t start = round_up(frontier_ + tail > need ? frontier_ + tail - need : 0, kAlign);
  if (start + need > arena_bytes_) {
    if (!full_logged_) {
      std::fprintf(stderr,
                   "railyard: warning: more products in one CUDA graph than the CUTLASS workspace "
                   "arena holds (%zu bytes): the rest keep their memsets (same results, slower)\n",
                   arena_bytes_);
      full_logged_ = true;
    }
    return eager;
  }
  frontier_ = std::max(frontier_, start + need);
  return {arena_ + start, need};
}

}  // namespace railyard::cuda
