#include "railyard/token_dataset.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

namespace railyard {
namespace {

namespace fs = std::filesystem;

class TokenDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("railyard_token_dataset_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  void write_bin(const std::string& p, const std::vector<uint16_t>& tokens,
                 int32_t magic = 20240520, int32_t version = 1, int32_t count = -1) {
    std::vector<int32_t> header(256, 0);
    header[0] = magic;
    header[1] = version;
    header[2] = count < 0 ? static_cast<int32_t>(tokens.size()) : count;
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(header.data()), 1024);
    f.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(2 * tokens.size()));
  }

  fs::path dir_;
};

std::vector<int32_t> read_all(const TokenDataset& d) {
  std::vector<int32_t> out(d.size());
  d.read(0, out);
  return out;
}

// Gives the open file `f` a vocab_size attribute.
void put_vocab_size(hid_t f, int vocab) {
  hid_t as = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "vocab_size", H5T_STD_I32LE, as, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT, &vocab), 0);
  H5Aclose(a);
  H5Sclose(as);
}

// Finishes a token file written by hand: its vocab_size, then closes the dataset `d`, its
// creation properties and space, and the file.
void finish_token_file(hid_t f, hid_t d, hid_t dcpl, hid_t space, int vocab) {
  put_vocab_size(f, vocab);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
}

TEST_F(TokenDatasetTest, Hdf5RoundTripUint16AndUint32) {
  std::vector<uint32_t> small = {0, 1, 255, 7, 3};
  write_token_file(path("a.h5"), small, 256);
  TokenDataset a({path("a.h5")});
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a.vocab(), 256);
  EXPECT_EQ(a.files()[0].token_bytes, 2);
  EXPECT_EQ(a.files()[0].max_token, 255u);
  EXPECT_EQ(read_all(a), (std::vector<int32_t>{0, 1, 255, 7, 3}));

  std::vector<uint32_t> wide = {69999, 0, 65536};
  write_token_file(path("b.h5"), wide, 70000);
  TokenDataset b({path("b.h5")});
  EXPECT_EQ(b.files()[0].token_bytes, 4);
  EXPECT_EQ(read_all(b), (std::vector<int32_t>{69999, 0, 65536}));
}

TEST_F(TokenDatasetTest, LlmcShardAndConcatenation) {
  write_bin(path("s.bin"), {10, 20, 30, 50256});
  write_token_file(path("t.h5"), std::vector<uint32_t>{1, 2}, 256);
  TokenDataset d({path("t.h5"), path("s.bin")});
  EXPECT_EQ(d.files()[1].format, "llmc-bin");
  EXPECT_EQ(d.vocab(), 50257);
  EXPECT_EQ(read_all(d), (std::vector<int32_t>{1, 2, 10, 20, 30, 50256}));
  std::vector<int32_t> mid(3);
  d.read(1, mid);  // across the file boundary
  EXPECT_EQ(mid, (std::vector<int32_t>{2, 10, 20}));
  std::vector<int32_t> past(2);
  EXPECT_THROW(d.read(5, past), std::out_of_range);
  EXPECT_THROW(d.check_vocab(256), DataError);
  EXPECT_NO_THROW(d.check_vocab(50257));
}

TEST_F(TokenDatasetTest, ChunkedCompressedHdf5IsLoaded) {
  hid_t f = H5Fcreate(path("c.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = 1000, chunk = 64;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  H5Pset_deflate(dcpl, 4);
  hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint16_t>(i % 97);
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data()), 0);
  finish_token_file(f, d, dcpl, space, 97);
  TokenDataset ds({path("c.h5")});
  EXPECT_EQ(ds.vocab(), 97);
  std::vector<int32_t> all = read_all(ds);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[i], static_cast<int32_t>(i % 97));
}

void expect_error(const std::vector<std::string>& paths, const std::string& needle) {
  try {
    TokenDataset d(paths);
    ADD_FAILURE() << "no error, expected one containing '" << needle << "'";
  } catch (const DataError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(paths.back()), std::string::npos) << "message must name the file: " << msg;
  }
}

TEST_F(TokenDatasetTest, BadFilesAreRejectedWithTheirName) {
  expect_error({path("missing.h5")}, "no such file");
  write_token_file(path("empty.h5"), std::vector<uint32_t>{}, 256);
  expect_error({path("empty.h5")}, "empty");
  write_bin(path("empty.bin"), {});
  expect_error({path("empty.bin")}, "empty");
  std::ofstream(path("zero.bin")).close();
  expect_error({path("zero.bin")}, "empty");
  write_bin(path("big.bin"), {1, 60000});
  expect_error({path("big.bin")}, "outside its vocabulary");
  write_bin(path("trunc.bin"), {1, 2}, 20240520, 1, 10);
  expect_error({path("trunc.bin")}, "truncated");
  write_bin(path("v2.bin"), {1, 2}, 20240520, 2);
  expect_error({path("v2.bin")}, "version 2");
  std::ofstream(path("text.txt")) << "hello, this is not a token file at all; "
                                  << std::string(2000, 'x');
  expect_error({path("text.txt")}, "neither an HDF5 file nor");

  hid_t f = H5Fcreate(path("noattr.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = 4;
  hid_t s = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  uint16_t t[4] = {1, 2, 3, 300};
  H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, t);
  hid_t d2 = H5Dcreate2(f, "floats", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(d2);
  H5Dclose(d);
  H5Sclose(s);
  H5Fclose(f);
  expect_error({path("noattr.h5")}, "vocab_size");

  // A vocab_size attribute smaller than the data's largest token.
  f = H5Fopen(path("noattr.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  put_vocab_size(f, 256);
  H5Fclose(f);
  expect_error({path("noattr.h5")}, "token 300, outside its vocabulary of 256");

  f = H5Fcreate(path("notokens.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  expect_error({path("notokens.h5")}, "no /tokens dataset");
}

TEST_F(TokenDatasetTest, WhatIsNotATokenFileIsNamedForWhatItIs) {
  expect_error({dir_.string()}, "is a directory, not a regular file");
  expect_error({"/dev/zero"}, "is a character device, not a regular file");
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  expect_error({path("fifo")}, "is a FIFO (named pipe), not a regular file");
  // A shard with bytes beyond the tokens its header declares is not silently cut.
  write_bin(path("long.bin"), {1, 2, 3, 4}, 20240520, 1, 2);
  expect_error({path("long.bin")}, "is longer than its header says");
}

TEST_F(TokenDatasetTest, DeclaredTokensMustBeStoredBeforeTheyAreAllocated) {
  // An empty chunked dataset declaring 2^28 tokens: 512 MiB of fill zeros if trusted.
  hid_t f = H5Fcreate(path("hollow.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hsize_t n = hsize_t{1} << 28, chunk = 4096;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);
  hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  finish_token_file(f, d, dcpl, space, 256);
  expect_error({path("hollow.h5")}, "/tokens declares 536870912 bytes of tokens but stores only 0");
}

TEST_F(TokenDatasetTest, WriterRejectsTokensOutsideVocab) {
  EXPECT_THROW(write_token_file(path("x.h5"), std::vector<uint32_t>{256}, 256), DataError);
  EXPECT_THROW(write_token_file(path("nodir/x.h5"), std::vector<uint32_t>{1}, 256), DataError);
}

}  // namespace
}  // namespace railyard
