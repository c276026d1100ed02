#include "railyard/train_config.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace railyard {
namespace {

namespace fs = std::filesystem;

class TrainConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("railyard_train_config_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
    for (const char* f : {"a.h5", "b1.h5", "b2.h5"}) std::ofstream(dir_ / f) << "x";
  }
  void TearDown() override {
    fs::remove_all(dir_);
    for (const char* v : {"RAILYARD_STEPS", "RAILYARD_GRAD_ACCUM", "RAILYARD_DATA",
                          "RAILYARD_CONFIG", "RAILYARD_LOCAL_RANK"}) {
      unsetenv(v);
    }
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }

  TrainConfig parse(std::vector<std::string> args) {
    args.insert(args.begin(), "railyard-train");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    return parse_train_config(static_cast<int>(argv.size()), argv.data());
  }

  // Expects a UsageError whose message contains every needle.
  void expect_usage(std::vector<std::string> args, std::vector<std::string> needles) {
    try {
      parse(args);
      ADD_FAILURE() << "no UsageError for " << testing::PrintToString(args);
    } catch (const UsageError& e) {
      for (const std::string& n : needles) {
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << "'" << e.what() << "' lacks '" << n << "'";
      }
    }
  }

  fs::path dir_;
};

TEST_F(TrainConfigTest, DefaultsAndCommandLine) {
  TrainConfig c = parse({"--data", p("a.h5"), "--steps", "7", "--recompute", "--requeue=off"});
  EXPECT_EQ(c.data, std::vector<std::string>{p("a.h5")});
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.layers, 4);
  EXPECT_EQ(c.device, "auto");
  EXPECT_EQ(c.resume, "auto");
  EXPECT_TRUE(c.recompute);
  EXPECT_FALSE(c.requeue);
  EXPECT_EQ(c.signals, "TERM=exit,USR1=requeue");
  EXPECT_EQ(c.cuda_graphs, "on");
  nlohmann::json j = nlohmann::json::parse(c.to_json());
  EXPECT_EQ(j["steps"], 7);
  EXPECT_EQ(j["cuda_graphs"], "on");
  EXPECT_EQ(parse({"--data", p("a.h5"), "--cuda-graphs", "off"}).cuda_graphs, "off");
  EXPECT_EQ(j["data"][0], p("a.h5"));
}

TEST_F(TrainConfigTest, RepeatedAndGlobbedData) {
  TrainConfig c = parse({"--data", p("a.h5"), "--data", p("b*.h5")});
  EXPECT_EQ(c.data, (std::vector<std::string>{p("a.h5"), p("b1.h5"), p("b2.h5")}));
  c = parse({"--data", p("b2.h5"), p("a.h5")});
  EXPECT_EQ(c.data, (std::vector<std::string>{p("b2.h5"), p("a.h5")}));
}

TEST_F(TrainConfigTest, PrecedenceCommandLineThenEnvironmentThenFileThenDefault) {
  std::ofstream(p("run.ini")) << "# comment\nsteps = 30\ngrad-accum = 3\nlayers = 2\n"
                              << "data = " << p("b1.h5") << "\n";
  setenv("RAILYARD_STEPS", "20", 1);
  setenv("RAILYARD_GRAD_ACCUM", "2", 1);
  setenv("RAILYARD_LOCAL_RANK", "0", 1);  // the plugin's variables are not options
  TrainConfig c = parse({"--config", p("run.ini"), "--steps", "10"});
  EXPECT_EQ(c.steps, 10);      // command line
  EXPECT_EQ(c.grad_accum, 2);  // environment
  EXPECT_EQ(c.layers, 2);      // file
  EXPECT_EQ(c.heads, 4);       // default
  EXPECT_EQ(c.data, std::vector<std::string>{p("b1.h5")});
  c = parse({"--config", p("run.ini"), "--data", p("a.h5")});
  EXPECT_EQ(c.data, std::vector<std::string>{p("a.h5")}) << "a stronger source replaces --data";
  setenv("RAILYARD_CONFIG", p("run.ini").c_str(), 1);
  unsetenv("RAILYARD_STEPS");
  c = parse({});
  EXPECT_EQ(c.steps, 30);
}

TEST_F(TrainConfigTest, HelpListsEveryOptionWithDefaults) {
  EXPECT_TRUE(parse({"--help"}).help);
  std::string h = train_config_help();
  for (const char* o : {"--data",         "--val-data",
                        "--steps",        "--batch",
                        "--grad-accum",   "--seq",
                        "--layers",       "--heads",
                        "--dim",          "--vocab",
                        "--lr",           "--warmup",
                        "--weight-decay", "--clip",
                        "--seed",         "--device",
                        "--log-every",    "--log-json",
                        "--val-every",    "--ckpt-dir",
                        "--ckpt-every",   "--ckpt-interval",
                        "--keep",         "--resume",
                        "--save-budget",  "--signals",
                        "--requeue",      "--precision",
                        "--zero",         "--recompute",
                        "--reduce-dtype", "--config",
                        "--metrics-file", "--metrics-interval",
                        "--mem-alert",    "--cuda-graphs"}) {
    EXPECT_NE(h.find(o), std::string::npos) << o;
  }
  EXPECT_NE(h.find("(=256)"), std::string::npos) << h;
  EXPECT_NE(h.find("RAILYARD_"), std::string::npos);
}

TEST_F(TrainConfigTest, AConfigThatIsNotARegularSmallFileIsAnError) {
  const std::string d = p("a.h5");
  expect_usage({"--data", d, "--config", dir_.string()}, {"--config", "is a directory"});
  expect_usage({"--data", d, "--config", "/dev/zero"}, {"--config", "is a character device"});
  expect_usage({"--data", d, "--config", p("none.conf")}, {"--config", "does not exist"});
  std::ofstream(p("huge.conf")) << std::string(2 << 20, '#');
  expect_usage({"--data", d, "--config", p("huge.conf")}, {"--config", "more than the 1048576"});
}

TEST_F(TrainConfigTest, BadValuesNameTheOptionAndWhatIsAllowed) {
  const std::string d = p("a.h5");
  expect_usage({}, {"--data", "required"});
  expect_usage({"--data", p("nope.h5")}, {"--data", "nope.h5", "does not exist"});
  expect_usage({"--data", p("zz*.h5")}, {"--data", "no file matches"});
  expect_usage({"--data", d, "--batch=-3"}, {"--batch", "positive", "-3"});
  expect_usage({"--data", d, "--steps", "0"}, {"--steps", "positive"});
  expect_usage({"--data", d, "--seq=-1"}, {"--seq"});
  expect_usage({"--data", d, "--heads", "3", "--dim", "64"}, {"--heads", "divisor", "64"});
  expect_usage({"--data", d, "--device", "tpu"}, {"--device", "cpu | cuda | auto", "tpu"});
  expect_usage({"--data", d, "--precision", "fp16"}, {"--precision", "bf16 | fp32"});
  expect_usage({"--data", d, "--zero", "2"}, {"--zero", "0 or 1"});
  expect_usage({"--data", d, "--device", "cpu", "--precision", "bf16"},
               {"--precision", "--device cuda"});
  expect_usage({"--data", d, "--device", "cpu", "--zero", "1"}, {"--zero", "--device cuda"});
  EXPECT_EQ(parse({"--data", d, "--device", "cpu"}).precision, "fp32");
  expect_usage({"--data", d, "--requeue", "maybe"}, {"--requeue", "on | off"});
  expect_usage({"--data", d, "--cuda-graphs", "yes"}, {"--cuda-graphs", "on | off", "yes"});
  expect_usage({"--data", d, "--steps", "many"}, {"steps"});
  expect_usage({"--data", d, "--bogus"}, {"bogus"});
  expect_usage({"--data", d, "--mem-alert", "1.5"}, {"--mem-alert", "(0, 1]"});
  expect_usage({"--data", d, "--keep", "0"}, {"--keep"});
  expect_usage({"--data", d, "--cpu-threads=-1"}, {"--cpu-threads"});
  expect_usage({"--data", d, "--ckpt-every", "5"}, {"--ckpt-dir"});
  expect_usage({"--data", d, "--resume", p("none.h5")}, {"--resume", "auto | never | PATH"});
  expect_usage({"--data", d, "--config", p("absent.ini")}, {"--config", "absent.ini"});
  std::ofstream(p("bad.ini")) << "stepz = 3\n";
  expect_usage({"--data", d, "--config", p("bad.ini")}, {"bad.ini", "stepz"});
  setenv("RAILYARD_STEPS", "-4", 1);
  expect_usage({"--data", d}, {"--steps", "-4"});
}

TEST(TrainConfigWarnings, WarmupNotShorterThanTheRun) {
  TrainConfig c;
  c.steps = 50;
  c.warmup = 100;
  const std::vector<std::string> w = train_config_warnings(c, nullptr);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("--warmup 100 is not shorter than --steps 50"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("--warmup 5)"), std::string::npos) << w[0];
  c.warmup = 49;
  EXPECT_TRUE(train_config_warnings(c, nullptr).empty());
}

TEST(TrainConfigWarnings, MisspelledOptionVariablesSuggestTheNearestOption) {
  TrainConfig c;
  const char* env[] = {"RAILYARD_STESP=10",
                       "RAILYARD_GRAD_ACUM=2",
                       "RAILYARD_STEPS=5",
                       "RAILYARD_LOCAL_RANK=0",
                       "RAILYARD_CPUS=0-3",
                       "RAILYARD_NIC=mlx5_0",
                       "RAILYARD_CLUSTER_DIR=/x",
                       "PATH=/bin",
                       nullptr};
  const std::vector<std::string> w = train_config_warnings(c, env);
  ASSERT_EQ(w.size(), 2u) << (w.empty() ? "" : w.back());
  EXPECT_EQ(w[0],
            "RAILYARD_STESP is not an option variable and is ignored; did you mean "
            "RAILYARD_STEPS (--steps)?");
  EXPECT_NE(w[1].find("did you mean RAILYARD_GRAD_ACCUM (--grad-accum)?"), std::string::npos)
      << w[1];
}

}  // namespace
}  // namespace railyard
