#pragma once
// SplitMix64, railyard's one source of pseudo-random numbers: its output is fixed by its
// definition (unlike the standard library's distributions), so the same seed gives the same
// numbers with every compiler, platform and backend.

#include <cstdint>

namespace railyard {

inline constexpr uint64_t kSplitmix64Gamma = 0x9e3779b97f4a7c15ULL;

// The output for counter `x`: element i of a sequence needs no state from element i-1.
constexpr uint64_t splitmix64(uint64_t x) {
  x += kSplitmix64Gamma;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The next number of the stream whose state is `state`, advancing it.
constexpr uint64_t splitmix64_next(uint64_t& state) {
  const uint64_t out = splitmix64(state);
  state += kSplitmix64Gamma;
  return out;
}

}  // namespace railyard
