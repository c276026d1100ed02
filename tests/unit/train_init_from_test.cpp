// --init-from: the model's shape comes from the directory's config.json; options that say
// otherwise, and directories that are not GPT-2, are usage errors naming both values.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "railyard/hf_gpt2.hpp"
#include "railyard/train_config.hpp"

namespace railyard {
namespace {

namespace fs = std::filesystem;

class TrainInitFrom : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("railyard_init_from_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_ / "hf");
    std::ofstream(dir_ / "a.h5") << "x";
    GptConfig g;
    g.vocab = 50257;
    g.padded_vocab = 50304;
    g.max_seq = 128;
    g.layers = 3;
    g.heads = 6;
    g.dim = 96;
    config_ = nlohmann::json::parse(hf_gpt2_config_json(g));
    write_config();
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write_config() { std::ofstream(dir_ / "hf" / "config.json") << config_.dump(); }

  TrainConfig parse(std::vector<std::string> extra) {
    std::vector<std::string> args = {"railyard-train", "--data", (dir_ / "a.h5").string(),
                                     "--init-from", (dir_ / "hf").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return parse_train_config(static_cast<int>(argv.size()), argv.data());
  }
  std::string usage_error(std::vector<std::string> extra) {
    try {
      parse(extra);
    } catch (const UsageError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no UsageError";
    return "";
  }

  fs::path dir_;
  nlohmann::json config_;
};

TEST_F(TrainInitFrom, ShapeComesFromConfigJson) {
  const TrainConfig c = parse({});
  EXPECT_EQ(c.layers, 3);
  EXPECT_EQ(c.heads, 6);
  EXPECT_EQ(c.dim, 96);
  EXPECT_EQ(c.vocab, 50257);
  EXPECT_EQ(c.positions, 128);
  EXPECT_EQ(c.seq, 128);  // the default 256 does not fit 128 positions
  EXPECT_EQ(parse({"--seq", "64"}).seq, 64);
  EXPECT_EQ(parse({"--layers", "3", "--dim", "96"}).layers, 3);  // agreeing is fine
  EXPECT_NE(c.to_json().find("\"init_from\""), std::string::npos);
}

TEST_F(TrainInitFrom, ContradictionsNameBothValues) {
  const std::string cfg = (dir_ / "hf" / "config.json").string();
  EXPECT_EQ(usage_error({"--layers", "4"}),
            "--layers 4 contradicts n_layer 3 in " + cfg +
                " (leave --layers out: --init-from sets the model's shape)");
  EXPECT_NE(usage_error({"--dim", "64"}).find("--dim 64 contradicts n_embd 96"), std::string::npos);
  EXPECT_NE(usage_error({"--heads", "4"}).find("--heads 4 contradicts n_head 6"),
            std::string::npos);
  EXPECT_NE(usage_error({"--vocab", "50304"}).find("--vocab 50304 contradicts vocab_size 50257"),
            std::string::npos);
  EXPECT_EQ(usage_error({"--seq", "256"}), "--seq 256 exceeds n_positions 128 in " + cfg);
}

TEST_F(TrainInitFrom, RefusesWhatIsNotGpt2) {
  config_["model_type"] = "llama";
  write_config();
  EXPECT_NE(usage_error({}).find("model_type is \"llama\", railyard reads only \"gpt2\""),
            std::string::npos);
  fs::remove(dir_ / "hf" / "config.json");
  EXPECT_NE(usage_error({}).find("config.json cannot be read"), std::string::npos);
  fs::remove_all(dir_ / "hf");
  EXPECT_NE(usage_error({}).find("hf' does not exist"), std::string::npos);
}

}  // namespace
}  // namespace railyard
