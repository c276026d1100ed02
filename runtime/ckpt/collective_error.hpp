#pragma once
// Error agreement for collective checkpoint steps: every rank reports its error (empty when
// none); if any rank failed, all throw the same message, so none is left waiting in a collective
// call the others abandoned.

#include <string>

namespace railyard {

class Communicator;

// `comm` == nullptr: a lone process; throws when `error` is not empty. Throws std::runtime_error
// with the failing ranks' messages ("rank 1: ...").
void raise_if_any(Communicator* comm, const std::string& error);

// Broadcasts a string from `root`.
void broadcast_string(Communicator& comm, std::string& s, int root);

}  // namespace railyard
