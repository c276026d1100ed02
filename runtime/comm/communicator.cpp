#include "railyard/communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/launcher.hpp"
#include "railyard/mpi_comm.hpp"

namespace railyard {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw std::runtime_error(std::string("MPI: ") + what + " failed: " + std::string(msg, len));
}

// MPI counts are int; large buffers go in chunks.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 2;

// True when this object called MPI_Init_thread, so it must also call MPI_Finalize; a host
// program that initialised MPI itself keeps ownership.
bool g_we_initialised = false;

}  // namespace

Communicator& Communicator::world() {
  // A function-local static: constructed on first use (MPI_Init), destroyed at exit
  // (MPI_Finalize), also when the process was started without any launcher (singleton MPI).
  static Communicator instance;
  return instance;
}

Communicator::Communicator() : mpi_(std::make_unique<MpiComm>()) {
  launcher_ = detect_launcher();
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  if (!initialised) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    g_we_initialised = true;
    if (provided < MPI_THREAD_FUNNELED) {
      throw std::runtime_error("MPI: the library provides no MPI_THREAD_FUNNELED support");
    }
  }
  // Errors return codes (checked below) instead of aborting the job without a message.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  // A private duplicate, so our collectives never match a host program's messages.
  check(MPI_Comm_dup(MPI_COMM_WORLD, &mpi_->comm), "MPI_Comm_dup");
  check(MPI_Comm_rank(mpi_->comm, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(mpi_->comm, &size_), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(mpi_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
        "MPI_Comm_split_type(SHARED)");
  check(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank(node)");
  check(MPI_Comm_size(node, &local_size_), "MPI_Comm_size(node)");
  check(MPI_Comm_free(&node), "MPI_Comm_free(node)");
}

Communicator::~Communicator() {
  // Destructors must not throw: errors at exit are ignored, MPI is going away anyway.
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  if (mpi_->comm != MPI_COMM_NULL) MPI_Comm_free(&mpi_->comm);
  if (g_we_initialised) MPI_Finalize();
}

void Communicator::allreduce_sum(float* data, size_t n) {
  for (size_t off = 0; off < n; off += kMaxChunk) {
    int count = static_cast<int>(std::min(kMaxChunk, n - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, mpi_->comm),
          "MPI_Allreduce(float)");
  }
}

void Communicator::allreduce_sum(double* data, size_t n) {
  for (size_t off = 0; off < n; off += kMaxChunk) {
    int count = static_cast<int>(std::min(kMaxChunk, n - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_DOUBLE, MPI_SUM, mpi_->comm),
          "MPI_Allreduce(double)");
  }
}

int64_t Communicator::allreduce_max(int64_t v) {
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MAX, mpi_->comm), "MPI_Allreduce(max)");
  return v;
}

int64_t Communicator::allreduce_min(int64_t v) {
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_MIN, mpi_->comm), "MPI_Allreduce(min)");
  return v;
}

void Communicator::allreduce_or(uint64_t* data, size_t n) {
  for (size_t off = 0; off < n; off += kMaxChunk / sizeof(uint64_t)) {
    int count = static_cast<int>(std::min(kMaxChunk / sizeof(uint64_t), n - off));
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_UINT64_T, MPI_BOR, mpi_->comm),
          "MPI_Allreduce(bor)");
  }
}

std::vector<uint64_t> Communicator::allgather(const std::vector<uint64_t>& mine) {
  if (mine.size() > kMaxChunk / sizeof(uint64_t) / static_cast<size_t>(size_)) {
    throw std::invalid_argument("Communicator::allgather: too many values per rank");
  }
  std::vector<uint64_t> all(mine.size() * static_cast<size_t>(size_));
  const int count = static_cast<int>(mine.size());
  check(
      MPI_Allgather(mine.data(), count, MPI_UINT64_T, all.data(), count, MPI_UINT64_T, mpi_->comm),
      "MPI_Allgather");
  return all;
}

void Communicator::send(const void* data, size_t bytes, int dest, int tag) {
  const auto* p = static_cast<const char*>(data);
  for (size_t off = 0; off < bytes; off += kMaxChunk) {
    int count = static_cast<int>(std::min(kMaxChunk, bytes - off));
    check(MPI_Send(p + off, count, MPI_BYTE, dest, tag, mpi_->comm), "MPI_Send");
  }
}

void Communicator::recv(void* data, size_t bytes, int source, int tag) {
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += kMaxChunk) {
    int count = static_cast<int>(std::min(kMaxChunk, bytes - off));
    check(MPI_Recv(p + off, count, MPI_BYTE, source, tag, mpi_->comm, MPI_STATUS_IGNORE),
          "MPI_Recv");
  }
}

void Communicator::broadcast(void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += kMaxChunk) {
    int count = static_cast<int>(std::min(kMaxChunk, bytes - off));
    check(MPI_Bcast(p + off, count, MPI_BYTE, root, mpi_->comm), "MPI_Bcast");
  }
}

void Communicator::barrier() {
  check(MPI_Barrier(mpi_->comm), "MPI_Barrier");
}

std::vector<std::string> Communicator::gather_strings(const std::string& mine, int root) {
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    throw std::invalid_argument("Communicator::gather_strings: string too long");
  }
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank_ == root ? size_ : 0);
  check(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, mpi_->comm), "MPI_Gather");
  std::vector<int> displs(lens.size());
  size_t total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += static_cast<size_t>(lens[i]);
  }
  std::string all(total, '\0');
  check(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                    root, mpi_->comm),
        "MPI_Gatherv");
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i) {
    out.push_back(all.substr(static_cast<size_t>(displs[i]), static_cast<size_t>(lens[i])));
  }
  return out;
}

void Communicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
}

}  // namespace railyard
