#pragma once
// One background job at a time (the periodic checkpoint write), its result or error kept for
// the next join().

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
  // True from start() until the job has returned (not collective; any thread).
  bool busy() const { return busy_.load(); }
  // Waits for the job; returns its result (nullopt when none was started) or rethrows its error.
  std::optional<SaveResult> join();

 private:
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::optional<SaveResult> result_;
  std::exception_ptr error_;
};

}  // namespace railyard
