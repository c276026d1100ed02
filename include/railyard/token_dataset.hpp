#pragma once
// A read-only stream of training tokens from one or more files, concatenated in the order
// given. Formats: HDF5 with a 1-D `/tokens` dataset (uint16 or uint32) and a `vocab_size`
// attribute (on the dataset or the file root), and llm.c `.bin` shards (256 int32 header:
// magic 20240520, version 1, token count; then uint16 tokens; GPT-2 vocabulary, 50257), and
// NumPy .npy 1-D arrays of little-endian uint16/uint32 (no declared vocabulary: the largest
// token + 1).
//
// Files are validated when opened (empty, truncated, tokens outside the declared vocabulary)
// and then mapped or loaded into memory, so reading calls no HDF5 function: the checkpoint
// writer's background thread may use HDF5 meanwhile (Debian's HDF5 is not thread-safe).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace railyard {

// Bad or unusable token data; what() names the file and the problem.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TokenFileInfo {
  std::string path;
  std::string format;   // "hdf5", "llmc-bin" or "npy"
  int token_bytes = 0;  // 2 or 4
  size_t tokens = 0;
  int vocab = 0;           // declared vocabulary size
  uint32_t max_token = 0;  // largest token present
};

class TokenDataset {
 public:
  // Opens and validates every file; throws DataError naming the file when one is missing, of an
  // unknown format, empty, or holds a token >= its declared vocabulary.
  explicit TokenDataset(const std::vector<std::string>& paths);
  ~TokenDataset();
  TokenDataset(TokenDataset&&) noexcept;
  TokenDataset& operator=(TokenDataset&&) noexcept;

  size_t size() const { return total_; }
  // The largest vocabulary any file declares.
  int vocab() const;
  const std::vector<TokenFileInfo>& files() const { return infos_; }
  // Throws DataError naming the first file with a token >= vocab.
  void check_vocab(int vocab) const;
  // Copies tokens [offset, offset + out.size()) of the concatenated stream.
  void read(size_t offset, std::span<int32_t> out) const;

  struct Source;  // one opened file; defined in the implementation

 private:
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<TokenFileInfo> infos_;
  std::vector<size_t> starts_;  // first global token of each source
  size_t total_ = 0;
};

// Writes `tokens` as an HDF5 token file (uint16 when vocab <= 65536, else uint32) with the
// `vocab_size` attribute. Throws DataError on any HDF5 failure or a token >= vocab.
void write_token_file(const std::string& path, std::span<const uint32_t> tokens, int vocab);

}  // namespace railyard
