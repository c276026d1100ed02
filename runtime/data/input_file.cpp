#include "railyard/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace railyard {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string input_file_problem(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? "does not exist (no such file)"
                           : std::string("cannot be read: ") + strerror(errno);
  }
  if (!S_ISREG(st.st_mode))
    return std::string("is ") + kind_of(st.st_mode) + ", not a regular file";
  // Opening (not access()) tells what this process may really read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::string("cannot be read: ") + strerror(errno);
  ::close(fd);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return "is " + std::to_string(st.st_size) + " bytes, more than the " +
           std::to_string(max_bytes) + " allowed";
  }
  return "";
}

void refuse_output_over_input(const std::string& output, const std::string& input) {
  struct stat out {
  }, in{};
  const bool same =
      output == input || (stat(output.c_str(), &out) == 0 && stat(input.c_str(), &in) == 0 &&
                          out.st_dev == in.st_dev && out.st_ino == in.st_ino);
  if (same) {
    throw std::invalid_argument("-o '" + output + "' is the input file '" + input +
                                "'; writing it would destroy the input: choose another output");
  }
}

}  // namespace railyard
