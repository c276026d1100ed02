#include "railyard/cpu_parallel.hpp"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace railyard::cpu {
namespace {

// True on the pool's workers and on a caller while it runs a job: a nested parallel_for runs
// inline (the outer job already holds every thread).
thread_local bool t_inside = false;

class Pool {
 public:
  // Every BLAS call made from here on runs on the thread that makes it.
  Pool() { openblas_set_num_threads(1); }
  ~Pool() { stop_workers(); }

  void resize(int n) {
    std::lock_guard job(job_mutex_);
    stop_workers();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { work(); });
    size_ = n;
  }
  int size() const { return size_; }

  void run(int n, const std::function<void(int)>& task) {
    if (n <= 0) return;
    if (n == 1 || workers_.empty() || t_inside) {
      for (int i = 0; i < n; ++i) task(i);
      return;
    }
    std::lock_guard job(job_mutex_);  // one job at a time
    {
      std::lock_guard lock(mutex_);
      task_ = &task;
      count_ = n;
      next_.store(0, std::memory_order_relaxed);
      ++generation_;
    }
    wake_.notify_all();
    t_inside = true;
    drain(task, n);
    t_inside = false;
    // Every index is taken; the job is over once no worker is still inside it.
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return active_ == 0; });
    task_ = nullptr;
  }

 private:
  void drain(const std::function<void(int)>& task, int n) {
    for (int i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) task(i);
  }

  void work() {
    t_inside = true;
    std::unique_lock lock(mutex_);
    uint64_t seen = generation_;
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (task_ == nullptr) continue;  // woken after its job ended
      const std::function<void(int)>& task = *task_;
      const int n = count_;
      ++active_;
      lock.unlock();
      drain(task, n);
      lock.lock();
      if (--active_ == 0) idle_.notify_all();
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    size_ = 1;
  }

  std::mutex job_mutex_;  // serialises jobs and resizes
  std::mutex mutex_;      // guards the fields below but next_
  std::condition_variable wake_, idle_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  int count_ = 0;
  uint64_t generation_ = 0;
  int active_ = 0;
  bool stop_ = false;
  int size_ = 1;
  std::atomic<int> next_{0};
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_threads(int n) {
  if (n < 1) throw std::invalid_argument("CPU threads must be >= 1, got " + std::to_string(n));
  if (n != pool().size()) pool().resize(n);
}

int threads() {
  return pool().size();
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&set));
}

void parallel_for(int n, const std::function<void(int)>& task) {
  pool().run(n, task);
}

}  // namespace railyard::cpu
