#include "railyard/durable_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

namespace fs = std::filesystem;
using namespace railyard;

namespace {

class Durable : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(RAILYARD_BUILD_DIR) + "/tests/unit/scratch-durable-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
            std::to_string(getpid());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  static unsigned mode(const std::string& p) {
    struct stat st {};
    lstat(p.c_str(), &st);
    return st.st_mode & 07777;
  }
  std::string root_;
};

TEST_F(Durable, CreatesMissingDirectoriesPrivate) {
  ensure_private_dir(root_ + "/a/b");
  EXPECT_EQ(mode(root_ + "/a/b"), 0700u);
  EXPECT_EQ(mode(root_ + "/a"), 0700u);
  ensure_private_dir(root_ + "/a/b");  // existing is fine
}

TEST_F(Durable, EmptyOrFileIsNotADirectory) {
  EXPECT_THROW(ensure_private_dir(""), std::invalid_argument);
  fs::create_directories(root_);
  std::ofstream(root_ + "/f") << "x";
  EXPECT_THROW(ensure_private_dir(root_ + "/f"), std::system_error);
}

TEST_F(Durable, PrivateFileIs0600AndExclusive) {
  fs::create_directories(root_);
  const mode_t old = umask(0);
  create_private_file(root_ + "/f");
  umask(old);
  EXPECT_EQ(mode(root_ + "/f"), 0600u);
  EXPECT_THROW(create_private_file(root_ + "/f"), std::system_error);
}

TEST_F(Durable, PrivateFileNeverFollowsASymlink) {
  fs::create_directories(root_);
  fs::create_symlink(root_ + "/target", root_ + "/link");
  EXPECT_THROW(create_private_file(root_ + "/link"), std::system_error);
  EXPECT_FALSE(fs::exists(root_ + "/target"));
}

TEST_F(Durable, RenameReplacesARegularFileDurably) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/tmp") << "new";
  std::ofstream(root_ + "/final") << "old";
  fsync_file(root_ + "/tmp");
  durable_rename(root_ + "/tmp", root_ + "/final");
  std::ifstream in(root_ + "/final");
  std::string s;
  in >> s;
  EXPECT_EQ(s, "new");
  EXPECT_FALSE(fs::exists(root_ + "/tmp"));
}

TEST_F(Durable, RenameRefusesToReplaceASymlink) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/tmp") << "new";
  fs::create_symlink(root_ + "/elsewhere", root_ + "/final");
  try {
    durable_rename(root_ + "/tmp", root_ + "/final");
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("symlink"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(root_ + "/final"));
}

TEST_F(Durable, FsyncRefusesASymlink) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/t") << "x";
  fs::create_symlink(root_ + "/t", root_ + "/l");
  EXPECT_THROW(fsync_file(root_ + "/l"), std::system_error);
}

TEST_F(Durable, RemoveNeverTouchesASymlinkTarget) {
  fs::create_directories(root_);
  std::ofstream(root_ + "/t") << "x";
  fs::create_symlink(root_ + "/t", root_ + "/l");
  EXPECT_THROW(remove_file(root_ + "/l"), std::system_error);
  EXPECT_TRUE(fs::exists(root_ + "/t"));
  remove_file(root_ + "/missing");  // not an error
  remove_file(root_ + "/t");
  EXPECT_FALSE(fs::exists(root_ + "/t"));
}

TEST_F(Durable, FreeBytesOfARealFilesystem) {
  fs::create_directories(root_);
  EXPECT_GT(free_bytes(root_), 0u);
}

}  // namespace
