// The .npy header parser against NumPy's own output and hostile headers, and .npy token files
// read through TokenDataset.
#include "railyard/npy_array.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "railyard/token_dataset.hpp"

namespace railyard {
namespace {

namespace fs = std::filesystem;

// A version-1 file's bytes: header text `dict` (padded like NumPy does) and `data_bytes` zeros.
std::string npy_v1(const std::string& dict, size_t data_bytes) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(data_bytes, '\0');
}

NpyArray parse(const std::string& file) {
  return parse_npy_header(file, file.size());
}

void expect_refused(const std::string& file, const std::string& needle) {
  try {
    parse(file);
    FAIL() << "accepted a header that should fail with '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(NpyHeader, ParsesWhatNumpyWrites) {
  // np.save of np.arange(5, dtype=np.uint16), byte for byte.
  const std::string f = npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (5,), }", 10);
  const NpyArray a = parse(f);
  EXPECT_EQ(a.descr, "<u2");
  EXPECT_EQ(a.item_bytes, 2);
  EXPECT_EQ(a.shape, std::vector<uint64_t>{5});
  EXPECT_EQ(a.count, 5u);
  EXPECT_EQ(a.data_offset, 128u);  // 10 + 58 + 1 rounded up to a multiple of 64
}

TEST(NpyHeader, WriterOutputParsesBack) {
  const std::string h = npy_header("<f4", {3, 7});
  EXPECT_EQ(h.size() % 64, 0u);
  const NpyArray a = parse(h + std::string(3 * 7 * 4, '\0'));
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{3, 7}));
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(parse(npy_header("<u4", {9}) + std::string(36, '\0')).count, 9u);
}

TEST(NpyHeader, VersionTwoHasAFourByteLength) {
  std::string dict = "{'shape': (2,), 'fortran_order': False, 'descr': '<u4'}\n";
  std::string f = "\x93NUMPY";
  f += '\x02';
  f += '\x00';
  f += std::string(1, static_cast<char>(dict.size())) + std::string(3, '\0');
  f += dict + std::string(8, '\0');
  const NpyArray a = parse(f);
  EXPECT_EQ(a.count, 2u);
  EXPECT_EQ(a.data_offset, 12 + dict.size());
}

TEST(NpyHeader, RefusesHostileHeaders) {
  const std::string ok = "{'descr': '<u2', 'fortran_order': False, 'shape': (5,), }";
  expect_refused("\x93NUMPX" + npy_v1(ok, 10).substr(6), "magic");
  expect_refused("\x93NUMPY", "magic");
  std::string v9 = npy_v1(ok, 10);
  v9[6] = 9;
  expect_refused(v9, "format version 9");
  std::string long_len = npy_v1(ok, 10);
  long_len[8] = '\xff';
  long_len[9] = '\x7f';
  expect_refused(long_len, "runs past the end");
  std::string no_newline = npy_v1(ok, 0);
  no_newline.back() = ' ';
  expect_refused(no_newline, "newline");
  expect_refused(npy_v1(ok, 9), "truncated or trailing");
  expect_refused(npy_v1(ok, 12), "truncated or trailing");
  expect_refused(npy_v1("{'descr': '<u2', 'fortran_order': True, 'shape': (5,)}", 10), "C order");
  expect_refused(npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (5)}", 10),
                 "not a tuple");
  expect_refused(
      npy_v1("{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (5,)}", 10),
      "twice");
  expect_refused(npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (5,), 'x': 1}", 10),
                 "unknown key 'x'");
  expect_refused(npy_v1("{'descr': '<u2', 'shape': (5,)}", 10), "needs the keys");
  expect_refused(npy_v1("{'descr': 'O', 'fortran_order': False, 'shape': (5,)}", 10), "descr 'O'");
  expect_refused(npy_v1("{'descr': '<u3', 'fortran_order': False, 'shape': (5,)}", 10),
                 "item size");
  expect_refused(npy_v1("{'descr': '<u2, 'fortran_order': False, 'shape': (5,)}", 10), "");
  expect_refused(npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (5,)} x", 10),
                 "after the header dict");
  expect_refused(npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (-5,)}", 10),
                 "non-negative integer");
  // Dimensions whose product overflows must not wrap around to a small size.
  expect_refused(
      npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (4294967296,4294967296,)}", 10),
      "too large");
  expect_refused(
      npy_v1("{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999999999,)}", 10),
      "too large");
}

class NpyTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("railyard_npy_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path dir_;
};

TEST_F(NpyTokens, ReadsUint16AndUint32Arrays) {
  const std::vector<uint16_t> t16 = {5, 0, 65535, 7};
  std::string b16 = npy_header("<u2", {4});
  b16.append(reinterpret_cast<const char*>(t16.data()), 8);
  const std::vector<uint32_t> t32 = {70000, 1};
  std::string b32 = npy_header("<u4", {2});
  b32.append(reinterpret_cast<const char*>(t32.data()), 8);
  TokenDataset d({write("a.npy", b16), write("b.npy", b32)});
  ASSERT_EQ(d.size(), 6u);
  std::vector<int32_t> out(6);
  d.read(0, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5, 0, 65535, 7, 70000, 1}));
  EXPECT_EQ(d.files()[0].format, "npy");
  EXPECT_EQ(d.files()[0].vocab, 65536);  // no declared vocabulary: largest token + 1
  EXPECT_EQ(d.vocab(), 70001);
}

TEST_F(NpyTokens, RefusesOtherArraysNamingTheFile) {
  auto refused = [&](const std::string& name, const std::string& bytes, const std::string& needle) {
    const std::string p = write(name, bytes);
    try {
      TokenDataset d({p});
      ADD_FAILURE() << name << " accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused("f4.npy", npy_header("<f4", {2}) + std::string(8, '\0'), "uint16 or uint32");
  refused("be.npy", npy_header(">u2", {2}) + std::string(4, '\0'), "little-endian");
  refused("2d.npy", npy_header("<u2", {2, 2}) + std::string(8, '\0'), "2-D");
  refused("short.npy", npy_header("<u2", {100}) + std::string(8, '\0'), "truncated");
  refused("empty.npy", npy_header("<u2", {0}), "no tokens");
}

}  // namespace
}  // namespace railyard
