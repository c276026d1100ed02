#include "zeroed_arrays.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <thread>

namespace railyard {

namespace {

struct Range {
  uintptr_t begin;
  size_t bytes;
};

// The whole pages of each array's storage (n floats from data()), in 64 MiB pieces.
std::vector<Range> page_ranges(const std::vector<std::vector<float>*>& arrays, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kPiece = size_t{64} << 20;
  std::vector<Range> out;
  for (const std::vector<float>* a : arrays) {
    const auto p = reinterpret_cast<uintptr_t>(a->data());
    const uintptr_t b = (p + page - 1) / page * page, e = (p + n * sizeof(float)) / page * page;
    for (uintptr_t x = b; x < e; x += kPiece) out.push_back({x, std::min<size_t>(kPiece, e - x)});
  }
  return out;
}

void populate(const std::vector<Range>& ranges) {
#ifdef MADV_POPULATE_WRITE
  std::atomic<size_t> next{0};
  std::atomic<bool> unsupported{false};
  auto work = [&] {
    for (size_t k; !unsupported && (k = next.fetch_add(1)) < ranges.size();) {
      // EINVAL: a kernel before 5.14; the fill below then takes the faults. Other failures
      // (ENOMEM) surface the same way, in the fill, as the allocation's bad_alloc would.
      if (madvise(reinterpret_cast<void*>(ranges[k].begin), ranges[k].bytes, MADV_POPULATE_WRITE) !=
          0) {
        unsupported = true;
      }
    }
  };
  const size_t nthreads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                             std::min<size_t>(16, ranges.size()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < nthreads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
#else
  (void)ranges;
#endif
}

}  // namespace

void assign_zeroed(const std::vector<std::vector<float>*>& arrays, size_t n) {
  for (std::vector<float>* a : arrays) {
    std::vector<float>().swap(*a);  // no old contents to copy on growth
    a->reserve(n);
  }
  populate(page_ranges(arrays, n));
  std::vector<std::future<void>> fills;
  for (size_t i = 1; i < arrays.size(); ++i) {
    fills.push_back(std::async(std::launch::async, [a = arrays[i], n] { a->assign(n, 0.0f); }));
  }
  if (!arrays.empty()) arrays[0]->assign(n, 0.0f);
  for (std::future<void>& f : fills) f.get();
}

}  // namespace railyard
