#include "background_writer.hpp"

#include <stdexcept>
#include <utility>

namespace railyard {

BackgroundWriter::~BackgroundWriter() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::start(std::function<SaveResult()> job) {
  if (thread_.joinable()) throw std::logic_error("BackgroundWriter: a job is still running");
  result_.reset();
  error_ = nullptr;
  finished_.store(false, std::memory_order_release);
  thread_ = std::thread([this, job = std::move(job)] {
    try {
      result_ = job();
    } catch (...) {
      error_ = std::current_exception();
    }
    finished_.store(true, std::memory_order_release);
  });
}

std::optional<SaveResult> BackgroundWriter::join() {
  if (thread_.joinable()) thread_.join();
  std::optional<SaveResult> out = std::move(result_);
  result_.reset();
  if (error_) {
    std::exception_ptr e = std::move(error_);
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return out;
}

}  // namespace railyard
