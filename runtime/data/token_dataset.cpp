#include "railyard/token_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "hdf5_handle.hpp"

#include "railyard/input_file.hpp"
#include "railyard/npy_array.hpp"

namespace railyard {
namespace {

constexpr int32_t kLlmcMagic = 20240520;
constexpr int kLlmcHeaderInts = 256;
constexpr int kGpt2Vocab = 50257;

// Closes an HDF5 handle with the matching function when it goes out of scope.
using H5Handle = h5::Id;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw DataError("token data '" + path + "': " + what);
}

bool starts_with_hdf5_signature(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char sig[8] = {};
  f.read(sig, sizeof sig);
  return f.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

bool starts_with_npy_magic(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char sig[6] = {};
  f.read(sig, sizeof sig);
  return f.gcount() == 6 && std::memcmp(sig, "\x93NUMPY", 6) == 0;
}

}  // namespace

// One file's tokens: a read-only mapping of the file (contiguous little-endian data) or a copy
// in memory (chunked or compressed HDF5 datasets).
struct TokenDataset::Source {
  int token_bytes = 2;
  size_t count = 0;
  const unsigned char* data = nullptr;  // first token
  void* map = nullptr;
  size_t map_len = 0;
  std::vector<unsigned char> owned;

  ~Source() {
    if (map != nullptr) munmap(map, map_len);
  }

  uint32_t at(size_t i) const {
    if (token_bytes == 2) {
      uint16_t v;
      std::memcpy(&v, data + 2 * i, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    return v;
  }

  void map_file(const std::string& path, uint64_t offset, size_t bytes) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    long page = sysconf(_SC_PAGESIZE);
    uint64_t base = offset / static_cast<uint64_t>(page) * static_cast<uint64_t>(page);
    map_len = bytes + (offset - base);
    map = mmap(nullptr, map_len, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(base));
    int err = errno;
    ::close(fd);
    if (map == MAP_FAILED) {
      map = nullptr;
      fail(path, std::string("cannot map: ") + std::strerror(err));
    }
    data = static_cast<const unsigned char*>(map) + (offset - base);
  }
};

namespace {

std::unique_ptr<TokenDataset::Source> open_llmc_bin(const std::string& path, TokenFileInfo& info);
std::unique_ptr<TokenDataset::Source> open_hdf5(const std::string& path, TokenFileInfo& info);
std::unique_ptr<TokenDataset::Source> open_npy(const std::string& path, TokenFileInfo& info);

}  // namespace

TokenDataset::TokenDataset(const std::vector<std::string>& paths) {
  if (paths.empty()) throw DataError("token data: no files given");
  for (const std::string& path : paths) {
    const std::string problem = input_file_problem(path);
    if (!problem.empty()) fail(path, problem);
    TokenFileInfo info;
    info.path = path;
    std::unique_ptr<Source> src = starts_with_hdf5_signature(path) ? open_hdf5(path, info)
                                  : starts_with_npy_magic(path)    ? open_npy(path, info)
                                                                   : open_llmc_bin(path, info);
    if (src->count == 0) fail(path, "holds no tokens (empty dataset)");
    uint32_t mx = 0;
    for (size_t i = 0; i < src->count; ++i) mx = std::max(mx, src->at(i));
    info.max_token = mx;
    // A .npy array declares no vocabulary: the largest token + 1 (--vocab can say more).
    if (info.format == "npy") {
      if (mx >= static_cast<uint32_t>(INT32_MAX)) {
        fail(path, "holds token " + std::to_string(mx) + ", above 2^31 - 2");
      }
      info.vocab = static_cast<int>(mx) + 1;
    }
    info.tokens = src->count;
    info.token_bytes = src->token_bytes;
    if (mx >= static_cast<uint32_t>(info.vocab)) {
      fail(path, "holds token " + std::to_string(mx) + ", outside its vocabulary of " +
                     std::to_string(info.vocab) + " (vocab_size attribute or format default)");
    }
    starts_.push_back(total_);
    total_ += src->count;
    sources_.push_back(std::move(src));
    infos_.push_back(std::move(info));
  }
}

TokenDataset::~TokenDataset() = default;
TokenDataset::TokenDataset(TokenDataset&&) noexcept = default;
TokenDataset& TokenDataset::operator=(TokenDataset&&) noexcept = default;

int TokenDataset::vocab() const {
  int v = 0;
  for (const TokenFileInfo& i : infos_) v = std::max(v, i.vocab);
  return v;
}

void TokenDataset::check_vocab(int vocab) const {
  for (const TokenFileInfo& i : infos_) {
    if (i.max_token >= static_cast<uint32_t>(vocab)) {
      fail(i.path, "holds token " + std::to_string(i.max_token) +
                       ", outside the model's vocab of " + std::to_string(vocab) +
                       " (raise --vocab or leave it to the data)");
    }
  }
}

void TokenDataset::read(size_t offset, std::span<int32_t> out) const {
  if (offset > total_ || out.size() > total_ - offset) {
    throw std::out_of_range("TokenDataset::read: tokens [" + std::to_string(offset) + ", " +
                            std::to_string(offset + out.size()) + ") past the end (" +
                            std::to_string(total_) + ")");
  }
  size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), offset) -
                                 starts_.begin()) -
             1;
  size_t done = 0;
  while (done < out.size()) {
    const Source& src = *sources_[s];
    size_t local = offset + done - starts_[s];
    size_t n = std::min(out.size() - done, src.count - local);
    for (size_t i = 0; i < n; ++i) out[done + i] = static_cast<int32_t>(src.at(local + i));
    done += n;
    ++s;
  }
}

namespace {

std::unique_ptr<TokenDataset::Source> open_llmc_bin(const std::string& path, TokenFileInfo& info) {
  info.format = "llmc-bin";
  std::ifstream f(path, std::ios::binary);
  int32_t header[kLlmcHeaderInts] = {};
  f.read(reinterpret_cast<char*>(header), sizeof header);
  if (f.gcount() == 0) fail(path, "is empty (no header, no tokens)");
  if (f.gcount() < static_cast<std::streamsize>(sizeof header) || header[0] != kLlmcMagic) {
    fail(path, "is neither an HDF5 file nor an llm.c .bin shard (magic " +
                   std::to_string(kLlmcMagic) + ")");
  }
  if (header[1] != 1) {
    fail(path, "is an llm.c shard of version " + std::to_string(header[1]) +
                   "; only version 1 (uint16 GPT-2 tokens) is supported");
  }
  if (header[2] < 0) fail(path, "has a negative token count in its header");
  auto count = static_cast<size_t>(header[2]);
  uint64_t size = std::filesystem::file_size(path);
  uint64_t need = sizeof header + 2 * static_cast<uint64_t>(count);
  if (size != need) {
    fail(path, std::string(size < need ? "is truncated" : "is longer than its header says") +
                   ": the header promises " + std::to_string(count) + " tokens (" +
                   std::to_string(need) + " bytes), the file has " + std::to_string(size) +
                   " (damaged, or not one llm.c shard)");
  }
  info.vocab = kGpt2Vocab;
  auto src = std::make_unique<TokenDataset::Source>();
  src->token_bytes = 2;
  src->count = count;
  if (count > 0) src->map_file(path, sizeof header, 2 * count);
  return src;
}

std::unique_ptr<TokenDataset::Source> open_npy(const std::string& path, TokenFileInfo& info) {
  info.format = "npy";
  const uint64_t size = std::filesystem::file_size(path);
  std::string head(static_cast<size_t>(std::min<uint64_t>(size, kNpyMaxHeader + 12)), '\0');
  std::ifstream f(path, std::ios::binary);
  f.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (f.gcount() != static_cast<std::streamsize>(head.size())) fail(path, "cannot be read");
  NpyArray a;
  try {
    a = parse_npy_header(head, size);
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
  if (a.shape.size() != 1) {
    fail(path, "is a " + std::to_string(a.shape.size()) + "-D array; token arrays must be 1-D");
  }
  if (a.descr != "<u2" && a.descr != "<u4") {
    fail(path, "has dtype '" + a.descr +
                   "'; token arrays must be little-endian uint16 or uint32 ('<u2', '<u4'): "
                   "save arr.astype(np.uint16) or np.uint32");
  }
  auto src = std::make_unique<TokenDataset::Source>();
  src->token_bytes = a.item_bytes;
  src->count = static_cast<size_t>(a.count);
  if (a.count > 0) src->map_file(path, a.data_offset, a.count * a.item_bytes);
  return src;
}

int read_vocab_attr(hid_t obj) {
  if (H5Aexists(obj, "vocab_size") <= 0) return -1;
  H5Handle a(H5Aopen(obj, "vocab_size", H5P_DEFAULT), H5Aclose);
  if (!a.ok()) return -1;
  int64_t v = -1;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) return -1;
  return v > 0 && v <= INT32_MAX ? static_cast<int>(v) : 0;
}

// A dataset that is not mapped is read into memory: its declared length must be backed by
// data in the file first. Unfiltered, every byte is stored; compressed, tokens shrink at most
// kMaxCompression times. An unwritten (empty chunked) dataset would read as fill zeros.
constexpr uint64_t kMaxCompression = 64;

void check_stored_size(const std::string& path, int filters, hsize_t stored, size_t bytes) {
  const uint64_t floor = filters > 0 ? bytes / kMaxCompression : bytes;
  if (filters < 0 || stored < floor) {
    fail(path, "/tokens declares " + std::to_string(bytes) + " bytes of tokens but stores only " +
                   std::to_string(stored) +
                   (filters > 0
                        ? " compressed (more than " + std::to_string(kMaxCompression) + "x smaller)"
                        : "") +
                   ": the dataset is damaged or was never written");
  }
}

// The file's 1-D /tokens dataset; its length goes to `count`.
H5Handle open_tokens(const std::string& path, hid_t file, hsize_t& count) {
  if (H5Lexists(file, "tokens", H5P_DEFAULT) <= 0) {
    fail(path, "has no /tokens dataset");
  }
  H5Handle dset(H5Dopen2(file, "tokens", H5P_DEFAULT), H5Dclose);
  if (!dset.ok()) fail(path, "/tokens is not a dataset");
  H5Handle space(H5Dget_space(dset.get()), H5Sclose);
  if (!space.ok() || H5Sget_simple_extent_ndims(space.get()) != 1) {
    fail(path, "/tokens must be 1-D");
  }
  H5Sget_simple_extent_dims(space.get(), &count, nullptr);
  return dset;
}

H5Handle token_type(const std::string& path, hid_t dset) {
  H5Handle type(H5Dget_type(dset), H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_INTEGER ||
      H5Tget_sign(type.get()) != H5T_SGN_NONE ||
      (H5Tget_size(type.get()) != 2 && H5Tget_size(type.get()) != 4)) {
    fail(path, "/tokens must be uint16 or uint32");
  }
  return type;
}

// vocab_size on /tokens, else on the file root.
int token_vocab(const std::string& path, hid_t file, hid_t dset) {
  int vocab = read_vocab_attr(dset);
  if (vocab < 0) vocab = read_vocab_attr(file);
  if (vocab < 0) fail(path, "has no integer vocab_size attribute on /tokens or the file root");
  if (vocab == 0) fail(path, "has a vocab_size attribute outside [1, 2^31)");
  return vocab;
}

// Maps the tokens where they lie in the file as they are (contiguous, little-endian, fully
// stored); reads them into memory otherwise.
void load_tokens(const std::string& path, hid_t dset, hid_t type, TokenDataset::Source& src) {
  const size_t bytes = src.count * static_cast<size_t>(src.token_bytes);
  hid_t le = src.token_bytes == 2 ? H5T_STD_U16LE : H5T_STD_U32LE;
  H5Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
  haddr_t offset = H5Dget_offset(dset);
  bool mappable = dcpl.ok() && H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS &&
                  offset != HADDR_UNDEF && H5Tequal(type, le) > 0 &&
                  H5Dget_storage_size(dset) == bytes;
  if (mappable) {
    src.map_file(path, offset, bytes);
    return;
  }
  check_stored_size(path, dcpl.ok() ? H5Pget_nfilters(dcpl.get()) : -1, H5Dget_storage_size(dset),
                    bytes);
  src.owned.resize(bytes);
  hid_t mem = src.token_bytes == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
  if (H5Dread(dset, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, src.owned.data()) < 0) {
    fail(path, "reading /tokens failed (damaged file?)");
  }
  src.data = src.owned.data();
}

std::unique_ptr<TokenDataset::Source> open_hdf5(const std::string& path, TokenFileInfo& info) {
  // Held until the handles below are closed; HDF5 errors become DataErrors, not printed stacks.
  const std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  info.format = "hdf5";
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) fail(path, "cannot be opened as HDF5");
  hsize_t n = 0;
  const H5Handle dset = open_tokens(path, file.get(), n);
  const H5Handle type = token_type(path, dset.get());
  info.vocab = token_vocab(path, file.get(), dset.get());
  auto src = std::make_unique<TokenDataset::Source>();
  src->token_bytes = static_cast<int>(H5Tget_size(type.get()));
  src->count = static_cast<size_t>(n);
  if (n > 0) load_tokens(path, dset.get(), type.get(), *src);
  return src;
}

}  // namespace

void write_token_file(const std::string& path, std::span<const uint32_t> tokens, int vocab) {
  const std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  h5::quiet_errors();
  if (vocab <= 0) fail(path, "vocab must be positive");
  for (uint32_t t : tokens) {
    if (t >= static_cast<uint32_t>(vocab)) {
      fail(path,
           "token " + std::to_string(t) + " is outside the vocab of " + std::to_string(vocab));
    }
  }
  const bool narrow = vocab <= 65536;
  H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) fail(path, "cannot be created (directory missing or not writable?)");
  hsize_t n = tokens.size();
  H5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  H5Handle dset(H5Dcreate2(file.get(), "tokens", narrow ? H5T_STD_U16LE : H5T_STD_U32LE,
                           space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                H5Dclose);
  if (!space.ok() || !dset.ok()) fail(path, "cannot create /tokens");
  if (n > 0) {
    herr_t rc;
    if (narrow) {
      std::vector<uint16_t> t16(tokens.begin(), tokens.end());
      rc = H5Dwrite(dset.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, t16.data());
    } else {
      rc = H5Dwrite(dset.get(), H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data());
    }
    if (rc < 0) fail(path, "writing /tokens failed (disk full?)");
  }
  H5Handle aspace(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(
      H5Acreate2(dset.get(), "vocab_size", H5T_STD_I64LE, aspace.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  int64_t v = vocab;
  if (!attr.ok() || H5Awrite(attr.get(), H5T_NATIVE_INT64, &v) < 0) {
    fail(path, "writing the vocab_size attribute failed");
  }
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) fail(path, "flushing failed (disk full?)");
}

}  // namespace railyard
