#pragma once
// Ranks and collectives over MPI, for control messages and CPU gradients.
// Works under srun --mpi=pmix, mpirun, and as a lone process (MPI singleton).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace railyard {

// The MPI communicator behind a Communicator, complete in railyard/mpi_comm.hpp. Declared here
// only, so that mpi.h reaches just the files that call MPI themselves.
struct MpiComm;

class Communicator {
 public:
  // Initialises MPI (thread level FUNNELED) on first use; finalises at exit.
  static Communicator& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // "srun", "mpirun" or "none" (a single process started without a launcher).
  const std::string& launcher() const { return launcher_; }
  // MPI's handle, for libraries that take an MPI_Comm (parallel HDF5); converts to MPI_Comm
  // where railyard/mpi_comm.hpp is included.
  const MpiComm& native() const { return *mpi_; }

  void allreduce_sum(float* data, size_t n);
  void allreduce_sum(double* data, size_t n);
  int64_t allreduce_max(int64_t v);
  int64_t allreduce_min(int64_t v);
  // Bitwise OR over ranks, in place (e.g. values that exactly one rank knows, zero elsewhere).
  void allreduce_or(uint64_t* data, size_t n);
  // Every rank's `mine` (the same count on every rank), concatenated in rank order, everywhere.
  std::vector<uint64_t> allgather(const std::vector<uint64_t>& mine);
  void broadcast(void* data, size_t bytes, int root);
  // Point to point: a send matches the recv of the same size and tag on its peer; large
  // buffers go in chunks. Tags are below 32767 (the smallest upper bound MPI allows).
  void send(const void* data, size_t bytes, int dest, int tag);
  void recv(void* data, size_t bytes, int source, int tag);
  void barrier();
  // Every rank's string, in rank order, on `root` (empty elsewhere): for logging bindings.
  std::vector<std::string> gather_strings(const std::string& mine, int root);
  // Ends every rank of the job with `code`: for failures that other ranks may not see, which
  // would otherwise leave them waiting in a collective.
  [[noreturn]] void abort(int code);

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

 private:
  Communicator();
  std::unique_ptr<MpiComm> mpi_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string launcher_;
};

}  // namespace railyard
