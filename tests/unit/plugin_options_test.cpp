#include "railyard/plugin_options.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "railyard/step_env.hpp"

namespace railyard {
namespace {

AdminConfig admin(std::vector<std::string> args) {
  return parse_admin_args(args);
}

// The message of the invalid_argument that `f` throws; fails the test when it throws none.
template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(AdminArgs, NoArgumentsGiveDefaultsAndEveryOverride) {
  const AdminConfig a = admin({});
  EXPECT_TRUE(a.defaults.enabled);
  EXPECT_EQ(a.defaults.gpu_choice, GpuChoice::kClosest);
  EXPECT_EQ(a.defaults.visible_devices, VisibleDevices::kRotate);
  EXPECT_TRUE(a.topology_path.empty());
  EXPECT_FALSE(a.defaults.force);
  EXPECT_FALSE(a.defaults.gpu_index.has_value());
  EXPECT_EQ(a.user_may_override.size(), user_option_specs().size());
}

TEST(AdminArgs, EveryKeyIsParsed) {
  const AdminConfig a = admin(
      {"topology=/etc/railyard/node.xml", "nic_include=mlx5_*", "nic_exclude=mlx5_4,mlx5_5",
       "socket_ifname=ib0", "gdr_level=PHB", "default_enable=off", "default_gpu=rank",
       "default_visible=isolate", "default_cpu_bind=off", "default_net=off", "default_verbose=on",
       "default_cuda=12.0", "user_override=visible,gpu,verbose", "force=1", "gpu_index=minor"});
  EXPECT_EQ(a.topology_path, "/etc/railyard/node.xml");
  EXPECT_EQ(a.defaults.nic_include, std::vector<std::string>{"mlx5_*"});
  EXPECT_EQ(a.defaults.nic_exclude, (std::vector<std::string>{"mlx5_4", "mlx5_5"}));
  EXPECT_EQ(a.defaults.socket_ifname, "ib0");
  EXPECT_EQ(a.defaults.gdr_level, "PHB");
  EXPECT_FALSE(a.defaults.enabled);
  EXPECT_EQ(a.defaults.gpu_choice, GpuChoice::kRank);
  EXPECT_EQ(a.defaults.visible_devices, VisibleDevices::kIsolate);
  EXPECT_FALSE(a.defaults.cpu_bind);
  EXPECT_FALSE(a.defaults.net_env);
  EXPECT_TRUE(a.defaults.verbose);
  EXPECT_EQ(a.defaults.required_cuda, "12.0");
  EXPECT_EQ(a.user_may_override,
            (std::set<UserOption>{UserOption::kVisible, UserOption::kGpu, UserOption::kVerbose}));
  EXPECT_TRUE(a.defaults.force);
  EXPECT_EQ(a.defaults.gpu_index, GpuIndex::kMinor);
  EXPECT_EQ(admin({"gpu_index=PCI"}).defaults.gpu_index, GpuIndex::kPci);
  const std::string m = message_of([] { admin({"gpu_index=bus"}); });
  EXPECT_TRUE(contains(m, "gpu_index=bus")) << m;
  EXPECT_TRUE(contains(m, "pci, minor")) << m;
}

TEST(AdminArgs, UnknownKeyNamesItAndListsTheKeys) {
  const std::string m = message_of([] { admin({"topolgy=/etc/x.xml"}); });
  EXPECT_TRUE(contains(m, "plugstack.conf argument 'topolgy=/etc/x.xml'")) << m;
  EXPECT_TRUE(contains(m, "unknown key 'topolgy'")) << m;
  EXPECT_TRUE(contains(m, "topology, nic_include")) << m;
}

TEST(AdminArgs, MalformedValueNamesArgumentValueAndAllowed) {
  const std::string m = message_of([] { admin({"default_visible=some"}); });
  EXPECT_TRUE(contains(m, "default_visible=some")) << m;
  EXPECT_TRUE(contains(m, "'some'")) << m;
  EXPECT_TRUE(contains(m, "rotate, isolate, all")) << m;
}

TEST(AdminArgs, RejectsBadForms) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"verbose"},
           {"=1"},
           {"topology=relative/node.xml"},
           {"topology="},
           {"topology=/etc/a\nb.xml"},
           {"topology=/etc/caf\xc3\xa9.xml"},
           {"force=maybe"},
           {"user_override=gpu,colour"},
           {"user_override="},
           {"default_cuda=twelve"},
           {"default_cuda=0.5"},
           {"gdr_level=FAR"},
           {"nic_include="},
           {"socket_ifname=a_very_long_interface_name"},
           {"default_gpu=rank", "default_gpu=closest"},
           {"nic_include=" + std::string(5000, 'm')},
       }) {
    EXPECT_THROW(parse_admin_args(args), std::invalid_argument) << args.front();
  }
}

TEST(AdminArgs, UserOverrideAllAndNone) {
  EXPECT_EQ(admin({"user_override=none"}).user_may_override.size(), 0u);
  EXPECT_EQ(admin({"user_override=all"}).user_may_override.size(), user_option_specs().size());
}

TEST(AdminArgs, ControlCharactersAreEscapedInMessages) {
  const std::string m = message_of([] { admin({std::string("bad\x01key=1")}); });
  EXPECT_TRUE(contains(m, "bad\\x01key")) << m;
}

TEST(UserOptions, SpecsAreNamedForSrun) {
  for (const auto& spec : user_option_specs()) {
    EXPECT_TRUE(spec.name.starts_with("railyard")) << spec.name;
    EXPECT_LE(spec.name.size(), 75u);  // SPANK_OPTION_MAXLEN
    EXPECT_FALSE(spec.usage.empty());
  }
  EXPECT_EQ(user_option_spec(UserOption::kGpu).name, "railyard-gpu");
  EXPECT_TRUE(user_option_spec(UserOption::kVerbose).arginfo.empty());
}

TEST(UserOptions, ValidValuesPass) {
  EXPECT_NO_THROW(validate_user_value(UserOption::kEnable, "off"));
  EXPECT_NO_THROW(validate_user_value(UserOption::kGpu, "rank"));
  EXPECT_NO_THROW(validate_user_value(UserOption::kVisible, "all"));
  EXPECT_NO_THROW(validate_user_value(UserOption::kCpuBind, "on"));
  EXPECT_NO_THROW(validate_user_value(UserOption::kNet, "no"));
  EXPECT_NO_THROW(validate_user_value(UserOption::kVerbose, std::nullopt));
  EXPECT_NO_THROW(validate_user_value(UserOption::kCuda, "12.4"));
}

TEST(UserOptions, BadValueNamesOptionValueAndAllowed) {
  const std::string m = message_of([] { validate_user_value(UserOption::kGpu, "near"); });
  EXPECT_TRUE(contains(m, "--railyard-gpu=near")) << m;
  EXPECT_TRUE(contains(m, "'near'")) << m;
  EXPECT_TRUE(contains(m, "closest, rank")) << m;
  EXPECT_THROW(validate_user_value(UserOption::kCuda, "12.x"), std::invalid_argument);
  EXPECT_THROW(validate_user_value(UserOption::kCuda, "0"), std::invalid_argument);
  EXPECT_THROW(validate_user_value(UserOption::kGpu, std::nullopt), std::invalid_argument);
  EXPECT_THROW(validate_user_value(UserOption::kVerbose, "yes"), std::invalid_argument);
  EXPECT_THROW(validate_user_value(UserOption::kEnable, std::string(2000, 'o')),
               std::invalid_argument);
}

TEST(ResolvePolicy, UserSettingsApplyInOrder) {
  const AdminConfig a = admin({"default_visible=isolate"});
  const std::vector<UserSetting> settings = {{UserOption::kVisible, "all"},
                                             {UserOption::kGpu, "rank"},
                                             {UserOption::kVerbose, std::nullopt},
                                             {UserOption::kCuda, "12"},
                                             {UserOption::kVisible, "rotate"}};
  const Policy p = resolve_policy(a, settings);
  EXPECT_EQ(p.visible_devices, VisibleDevices::kRotate);
  EXPECT_EQ(p.gpu_choice, GpuChoice::kRank);
  EXPECT_TRUE(p.verbose);
  EXPECT_EQ(p.required_cuda, "12.0");
}

TEST(ResolvePolicy, AdminKeepsWhatUsersMayNotChange) {
  const AdminConfig a = admin({"user_override=visible,verbose", "nic_include=mlx5_*"});
  const std::vector<UserSetting> ok = {{UserOption::kVisible, "isolate"}};
  EXPECT_EQ(resolve_policy(a, ok).nic_include, std::vector<std::string>{"mlx5_*"});
  const std::vector<UserSetting> denied = {{UserOption::kGpu, "rank"}};
  try {
    resolve_policy(a, denied);
    FAIL() << "expected OverrideDenied";
  } catch (const OverrideDenied& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "--railyard-gpu")) << m;
    EXPECT_TRUE(contains(m, "visible, verbose")) << m;
  }
}

TEST(ResolvePolicy, OffSwitchNeedsPermissionToo) {
  const AdminConfig a = admin({"user_override=none"});
  const std::vector<UserSetting> off = {{UserOption::kEnable, "off"}};
  EXPECT_THROW(resolve_policy(a, off), OverrideDenied);
  EXPECT_FALSE(resolve_policy(admin({}), off).enabled);
}

TEST(StepEnv, IndicesFromSlurmWithRenumberedCudaNames) {
  const StepGpus g = step_gpus_from_env("2,3", std::nullopt, "0,1");
  EXPECT_EQ(g.step_gpus, (std::vector<std::string>{"2", "3"}));
  EXPECT_EQ(g.cuda_names, (std::vector<std::string>{"0", "1"}));
}

TEST(StepEnv, JobGpusWhenNoStepGpus) {
  const StepGpus g = step_gpus_from_env(std::nullopt, "0,1,2,3", "0,1,2,3");
  EXPECT_EQ(g.step_gpus.size(), 4u);
  EXPECT_EQ(g.cuda_names, g.step_gpus);
}

TEST(StepEnv, MigUuidsNameTheGpus) {
  const StepGpus g = step_gpus_from_env("0,1", std::nullopt, "MIG-aaaa,MIG-bbbb");
  EXPECT_EQ(g.step_gpus, (std::vector<std::string>{"MIG-aaaa", "MIG-bbbb"}));
  EXPECT_EQ(g.cuda_names, g.step_gpus);
}

TEST(StepEnv, NoGpus) {
  EXPECT_TRUE(step_gpus_from_env(std::nullopt, std::nullopt, std::nullopt).step_gpus.empty());
  EXPECT_TRUE(step_gpus_from_env(std::nullopt, std::nullopt, "NoDevFiles").step_gpus.empty());
  EXPECT_TRUE(step_gpus_from_env("", std::nullopt, "").step_gpus.empty());
  // A CUDA_VISIBLE_DEVICES without Slurm's GPU list is the user's.
  EXPECT_TRUE(step_gpus_from_env(std::nullopt, std::nullopt, "0,1").step_gpus.empty());
}

TEST(StepEnv, OnlySafeNamesAndValuesAreWritten) {
  EXPECT_TRUE(safe_env_name("NCCL_IB_HCA"));
  EXPECT_FALSE(safe_env_name("1ABC"));
  EXPECT_FALSE(safe_env_name("A=B"));
  EXPECT_FALSE(safe_env_name(""));
  EXPECT_TRUE(safe_env_value("=mlx5_1:1,mlx5_3:1"));
  EXPECT_TRUE(safe_env_value(""));
  EXPECT_FALSE(safe_env_value("ib0\nLD_PRELOAD=/tmp/x.so"));
  EXPECT_FALSE(safe_env_value(std::string("a\0b", 3)));
  EXPECT_FALSE(safe_env_value(std::string(5000, 'x')));
}

TEST(StepEnv, PluginOwnsCudaVisibleDevicesAndItsOwnVariables) {
  EXPECT_TRUE(plugin_owned_env("CUDA_VISIBLE_DEVICES"));
  EXPECT_TRUE(plugin_owned_env("RAILYARD_LOCAL_RANK"));
  EXPECT_FALSE(plugin_owned_env("NCCL_IB_HCA"));
  EXPECT_FALSE(plugin_owned_env("CUDA_DEVICE_ORDER"));
}

}  // namespace
}  // namespace railyard
