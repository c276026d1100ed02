#include "railyard/chunk_pipeline.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace railyard {
namespace {

struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  size_t filled = 0, drained = 0;
  bool stop = false;
  std::exception_ptr fill_error;
};

void fill_all(Shared& sh, size_t chunks, const std::vector<float*>& buffers,
              const std::function<void(size_t, float*)>& fill) {
  const size_t nbuf = buffers.size();
  for (size_t i = 0; i < chunks; ++i) {
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.cv.wait(lock, [&] { return sh.stop || i - sh.drained < nbuf; });
      if (sh.stop) return;
    }
    try {
      fill(i, buffers[i % nbuf]);
    } catch (...) {
      std::lock_guard<std::mutex> lock(sh.mu);
      sh.fill_error = std::current_exception();
      sh.stop = true;
      sh.cv.notify_all();
      return;
    }
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.filled = i + 1;
    sh.cv.notify_all();
  }
}

}  // namespace

void run_chunk_pipeline(size_t chunks, const std::vector<float*>& buffers,
                        const std::function<void(size_t, float*)>& fill,
                        const std::function<void(size_t, float*)>& drain) {
  if (buffers.empty()) throw std::invalid_argument("run_chunk_pipeline: no staging buffer");
  Shared sh;
  std::thread helper([&] { fill_all(sh, chunks, buffers, fill); });
  std::exception_ptr drain_error;
  for (size_t i = 0; i < chunks; ++i) {
    {
      std::unique_lock<std::mutex> lock(sh.mu);
      sh.cv.wait(lock, [&] { return sh.stop || sh.filled > i; });
      if (sh.filled <= i) break;  // the fill failed before this chunk
    }
    try {
      drain(i, buffers[i % buffers.size()]);
    } catch (...) {
      drain_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(sh.mu);
    if (drain_error) {
      sh.stop = true;
    } else {
      sh.drained = i + 1;
    }
    sh.cv.notify_all();
    if (drain_error) break;
  }
  helper.join();
  // A fill error came first when the drain stopped for lack of its chunk.
  if (sh.fill_error && !drain_error) std::rethrow_exception(sh.fill_error);
  if (drain_error) std::rethrow_exception(drain_error);
}

}  // namespace railyard
