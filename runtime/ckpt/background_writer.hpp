#pragma once
// One background job at a time (the periodic checkpoint write), its result or error kept for
// the next join(), and a flag that says, without blocking, whether the job has finished.

#include <atomic>
#include <exception>
#include <functional>
#include <optional>
#include <thread>

#include "railyard/checkpoint.hpp"

namespace railyard {

class BackgroundWriter {
 public:
  BackgroundWriter() = default;
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  ~BackgroundWriter();  // joins; an error nobody collected is dropped

  // Starts `job` on a new thread; a previous job must have been joined.
  void start(std::function<SaveResult()> job);
  bool running() const { return thread_.joinable(); }
  // True once the job has returned or thrown (its result is ready, join() will not block);
  // the caller can report a save when it became durable, not when the next one starts.
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Waits for the job; returns its result (nullopt when none was started) or rethrows its error.
  std::optional<SaveResult> join();

 private:
  std::thread thread_;
  std::optional<SaveResult> result_;
  std::exception_ptr error_;
  std::atomic<bool> finished_{false};
};

}  // namespace railyard
