#pragma once
// Ranks and collectives over MPI, for control messages and CPU gradients.
// Works under srun --mpi=pmix, mpirun, and as a lone process (MPI singleton).

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace railyard {

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
  MPI_Comm native() const { return comm_; }

  void allreduce_sum(float* data, size_t n);
  void allreduce_sum(double* data, size_t n);
  int64_t allreduce_max(int64_t v);
  int64_t allreduce_min(int64_t v);
  void broadcast(void* data, size_t bytes, int root);
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
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string launcher_;
};

}  // namespace railyard
