// Inputs that are not regular files, and outputs that are an input, are refused.
#include "railyard/input_file.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace railyard {
namespace {

namespace fs = std::filesystem;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("railyard_input_file_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(p("in.txt")) << "hello";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(InputFileTest, ProblemsSayWhatThePathIs) {
  EXPECT_EQ(input_file_problem(p("in.txt")), "");
  EXPECT_NE(input_file_problem(dir_.string()).find("is a directory"), std::string::npos);
  EXPECT_NE(input_file_problem("/dev/zero").find("is a character device"), std::string::npos);
  EXPECT_NE(input_file_problem(p("none")).find("does not exist"), std::string::npos);
  EXPECT_NE(input_file_problem(p("in.txt"), 3).find("is 5 bytes, more than the 3 allowed"),
            std::string::npos);
}

TEST_F(InputFileTest, AnOutputThatIsAnInputIsRefusedThroughAnyPath) {
  EXPECT_NO_THROW(refuse_output_over_input(p("out.txt"), p("in.txt")));
  EXPECT_THROW(refuse_output_over_input(p("in.txt"), p("in.txt")), std::invalid_argument);
  fs::create_hard_link(p("in.txt"), p("hard.txt"));
  fs::create_symlink(p("in.txt"), p("soft.txt"));
  EXPECT_THROW(refuse_output_over_input(p("hard.txt"), p("in.txt")), std::invalid_argument);
  EXPECT_THROW(refuse_output_over_input(p("soft.txt"), p("in.txt")), std::invalid_argument);
  EXPECT_THROW(refuse_output_over_input(dir_.string() + "/./in.txt", p("in.txt")),
               std::invalid_argument);
}

// The tools that write an output refuse to write it over their input (which they would
// truncate before reading it), and leave the input as it was.
TEST_F(InputFileTest, ToolsRefuseToWriteOverTheirInput) {
  const std::string tools = std::string(RAILYARD_BUILD_DIR) + "/runtime/tools/";
  const std::string in = p("in.txt");
  for (const std::string& cmd :
       {tools + "railyard-data text " + in + " -o " + in,
        tools + "railyard-report " + in + " -o " + in,
        tools + "railyard-ckpt export " + in + " --format safetensors -o " + in}) {
    const int status = std::system((cmd + " >/dev/null 2>&1").c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << cmd << ": " << status;
    std::ifstream f(in);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_EQ(text, "hello") << cmd;
  }
}

}  // namespace
}  // namespace railyard
