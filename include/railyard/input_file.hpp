#pragma once
// Files named on a command line, checked before they are read or written: a directory, a
// device such as /dev/zero or a FIFO is refused with what it is (reading one would fail
// obscurely, block, or never end), and an output that is one of the inputs is refused before
// it is truncated.

#include <cstdint>
#include <string>

namespace railyard {

// "" for a readable regular file of at most `max_bytes`; otherwise why not, e.g. "is a
// directory, not a regular file", "cannot be read: Permission denied", "is 5000000 bytes, more
// than the 1048576 allowed".
std::string input_file_problem(const std::string& path, uint64_t max_bytes = UINT64_MAX);

// Throws std::invalid_argument when `output` is `input` (the same file, through any path or
// link): "-o 'x' is the input file 'y'; writing it would destroy the input: choose another".
void refuse_output_over_input(const std::string& output, const std::string& input);

}  // namespace railyard
