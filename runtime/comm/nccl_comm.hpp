#pragma once
// An NCCL communicator over the ranks of a Communicator: bootstrapped by broadcasting
// ncclGetUniqueId over MPI, one GPU per rank. Collectives run on the caller's stream.

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

namespace railyard {
class Communicator;
}

namespace railyard::cuda {

class NcclComm {
 public:
  // Collective over `comm`: every rank must call it, each with its own device current.
  explicit NcclComm(Communicator& comm);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // In-place mean over ranks; `type` is ncclFloat32 or ncclBfloat16.
  void all_reduce_mean(void* data, size_t count, ncclDataType_t type, cudaStream_t stream);
  // In place: rank r's slice [r*count, (r+1)*count) of `data` goes to every rank.
  void all_gather_in_place(void* data, size_t count, ncclDataType_t type, cudaStream_t stream);

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace railyard::cuda
