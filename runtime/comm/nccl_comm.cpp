#include "nccl_comm.hpp"

#include "nccl_check.hpp"
#include "railyard/communicator.hpp"

namespace railyard::cuda {

NcclComm::NcclComm(Communicator& comm) : rank_(comm.rank()), size_(comm.size()) {
  ncclUniqueId id{};
  if (rank_ == 0) RY_NCCL(ncclGetUniqueId(&id));
  comm.broadcast(&id, sizeof(id), 0);
  RY_NCCL(ncclCommInitRank(&comm_, size_, id, rank_));
}

NcclComm::~NcclComm() {
  if (comm_ != nullptr) ncclCommDestroy(comm_);
}

void NcclComm::all_reduce_mean(void* data, size_t count, ncclDataType_t type, cudaStream_t stream) {
  RY_NCCL(ncclAllReduce(data, data, count, type, ncclAvg, comm_, stream));
}

void NcclComm::all_gather_in_place(void* data, size_t count, ncclDataType_t type,
                                   cudaStream_t stream) {
  size_t elem = type == ncclBfloat16 ? 2 : 4;
  const void* mine = static_cast<const char*>(data) + size_t(rank_) * count * elem;
  RY_NCCL(ncclAllGather(mine, data, count, type, comm_, stream));
}

}  // namespace railyard::cuda
