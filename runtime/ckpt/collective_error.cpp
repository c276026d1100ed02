#include "collective_error.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "railyard/communicator.hpp"

namespace railyard {

void raise_if_any(Communicator* comm, const std::string& error) {
  if (comm == nullptr || comm->size() == 1) {
    if (!error.empty()) throw std::runtime_error(error);
    return;
  }
  if (comm->allreduce_max(error.empty() ? 0 : 1) == 0) return;
  const std::vector<std::string> all = comm->gather_strings(error, 0);
  std::string joined;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    if (!joined.empty()) joined += "; ";
    joined += "rank " + std::to_string(r) + ": " + all[r];
  }
  broadcast_string(*comm, joined, 0);
  throw std::runtime_error(joined);
}

void broadcast_string(Communicator& comm, std::string& s, int root) {
  uint64_t len = s.size();
  comm.broadcast(&len, sizeof len, root);
  s.resize(len);
  if (len > 0) comm.broadcast(s.data(), len, root);
}

}  // namespace railyard
