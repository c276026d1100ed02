// Every execution plan cuDNN offers for the attention's SDPA graphs at one shape (issue 12,
// bench/NOTES.md). For the forward graph and for the backward graph in three dQ variants (cuDNN's
// deterministic algorithm as the engine builds it; the same with the frontend's ordered-dQ route,
// CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT=0; the non-deterministic route), under heuristic modes
// A, B and FALLBACK: each plan's name (engine and knobs), workspace, whether it builds, its
// median time over --runs launches after --warmup (CUDA events), whether --bit-runs launches on
// the same inputs give the same bits (O and stats; dQ, dK and dV each), and its largest
// difference from the engine's own plan (CudnnAttention, run first as the reference). The graphs
// are the engine's (runtime/cuda/attention_cudnn_graph). A plan that fails to build or run is a
// row with cuDNN's message; only a device error that poisons the context ends the run early,
// with what was measured so far written out.
//
//   cudnn_sdpa_plans [--batch 16 --seq 1024 --heads 12 --head-dim 64] [--runs 20]
//                    [--warmup 3] [--bit-runs 3] [--json FILE]
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "attention_cudnn.hpp"
#include "attention_cudnn_graph.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"

using namespace railyard::cuda;
namespace fe = cudnn_frontend;
// cudnn_frontend.h brings its own copy of nlohmann::json; the system's as well would put two
// versions of one library into this file.
using json = nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: cudnn_sdpa_plans [--batch 16 --seq 1024 --heads 12 --head-dim 64] [--runs 20]\n"
    "         [--warmup 3] [--bit-runs 3] [--json FILE]\n"
    "Lists, builds, times and checks for repeatable bits every cuDNN SDPA execution plan of\n"
    "the attention's forward and backward graphs (heuristic modes A, B, FALLBACK); a table to\n"
    "stdout, JSON to FILE.\n";

// The frontend's switch between the backward's dP-workspace route and its others (read while
// the graph is built; see Variant).
constexpr const char* kDpLimitVar = "CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT";

struct Options {
  AttentionShape shape{16, 1024, 12, 64};
  int runs = 20, warmup = 3, bit_runs = 3;
  std::string json;
};

// One graph to list plans of. dp_limit: the value of kDpLimitVar while it is built (nullptr:
// unset, the engine's setting). On Hopper the deterministic backward materialises dP in the
// workspace and computes dQ by a separate product; "0" asks for ordered dQ accumulation instead
// (cuDNN >= 9.25; older ones build the dP route again).
struct Variant {
  const char* name;
  bool backward, deterministic;
  const char* dp_limit;
};
constexpr Variant kVariants[] = {
    {"forward", false, false, nullptr},
    {"backward deterministic (engine)", true, true, nullptr},
    {"backward deterministic, ordered dQ", true, true, "0"},
    {"backward non-deterministic", true, false, nullptr},
};

struct Mode {
  fe::HeurMode_t mode;
  const char* name;
};
constexpr Mode kModes[] = {
    {fe::HeurMode_t::A, "A"}, {fe::HeurMode_t::B, "B"}, {fe::HeurMode_t::FALLBACK, "FALLBACK"}};

// A CUDA error that leaves the context unusable: nothing after it can be measured.
struct DeviceLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: " + cudnnGetErrorString(st));
  }
}

// After a failed launch: clears an error that leaves the context usable, throws DeviceLost on
// one that does not.
void recover(cudaStream_t stream) {
  (void)cudaStreamSynchronize(stream);  // its error is the one cudaGetLastError returns next
  const cudaError_t first = cudaGetLastError();
  const cudaError_t again = cudaDeviceSynchronize();
  if (again != cudaSuccess) {
    throw DeviceLost(std::string("device error ") + cudaGetErrorName(again) + " after " +
                     cudaGetErrorName(first) + ": the CUDA context is lost");
  }
}

// Sets (value) or removes (nullptr) an environment variable for its lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    const int rc = value != nullptr ? setenv(name, value, 1) : unsetenv(name);
    if (rc != 0) throw std::runtime_error(std::string("cannot set ") + name);
  }
  ~ScopedEnv() {
    const int rc = old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_);
    if (rc != 0) std::fprintf(stderr, "cudnn_sdpa_plans: cannot restore %s\n", name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class Events {
 public:
  explicit Events(size_t n) : ev_(n, nullptr) {
    for (cudaEvent_t& e : ev_) RY_CUDA(cudaEventCreate(&e));
  }
  ~Events() {
    for (cudaEvent_t e : ev_) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](size_t i) const { return ev_.at(i); }

 private:
  std::vector<cudaEvent_t> ev_;
};

// A run of the graph's outputs: which buffer, element type and which elements (rows of
// row_elems, row_stride apart, from offset), so dQ, dK and dV are told apart inside dQKV.
struct Part {
  const char* name;
  int buffer;  // index into Snapshot
  bool is_float;
  size_t rows, row_elems, row_stride, offset;
  size_t elem_bytes() const { return is_float ? 4 : 2; }
};
using Snapshot = std::vector<std::vector<unsigned char>>;

float value_at(const Part& p, const Snapshot& s, size_t i) {
  const unsigned char* at = s[p.buffer].data() + i * p.elem_bytes();
  if (p.is_float) {
    float f;
    std::memcpy(&f, at, 4);
    return f;
  }
  uint16_t b;
  std::memcpy(&b, at, 2);
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool same_bits(const Part& p, const Snapshot& a, const Snapshot& b) {
  const size_t eb = p.elem_bytes();
  for (size_t r = 0; r < p.rows; ++r) {
    const size_t at = (p.offset + r * p.row_stride) * eb;
    if (std::memcmp(a[p.buffer].data() + at, b[p.buffer].data() + at, p.row_elems * eb) != 0) {
      return false;
    }
  }
  return true;
}

// Largest |a - b| over the part; nullopt where either holds a NaN or an infinity.
std::optional<double> max_diff(const Part& p, const Snapshot& a, const Snapshot& b) {
  double m = 0;
  for (size_t r = 0; r < p.rows; ++r) {
    for (size_t j = 0; j < p.row_elems; ++j) {
      const size_t i = p.offset + r * p.row_stride + j;
      const float x = value_at(p, a, i), y = value_at(p, b, i);
      if (!std::isfinite(x) || !std::isfinite(y)) return std::nullopt;
      m = std::max(m, double(std::fabs(x - y)));
    }
  }
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Timing {
  double median_us = 0, min_us = 0;
  std::string error;
};

// The device data: inputs, the engine's outputs (the reference), one plan's outputs, and a
// workspace that grows to the largest plan's.
class Bench {
 public:
  explicit Bench(const Options& o);
  ~Bench();
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  json engine_reference();
  json run_config(const Variant& v, const Mode& m);

 private:
  void plan_row(json& row, fe::graph::Graph& g, bool backward, int64_t index);
  void measure(json& row, fe::graph::Graph& g, bool backward, int64_t index);
  Timing time_launches(const std::function<std::string()>& launch);
  std::unordered_map<int64_t, void*> pack(bool backward) const;
  std::vector<Part> parts(bool backward) const;
  Snapshot snapshot(bool backward, bool reference) const;
  void poison(bool backward, int byte) const;
  void* workspace(size_t bytes);
  void fill_inputs();

  Options o_;
  AttentionShape s_;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  Events events_;
  DeviceBuffer qkv_, dout_, ref_out_, ref_stats_, ref_dqkv_, out_, stats_, dqkv_, ws_;
  Snapshot ref_fwd_, ref_bwd_;
};

size_t bf16_bytes(size_t n) {
  return n * sizeof(bf16);
}

Bench::Bench(const Options& o)
    : o_(o),
      s_(o.shape),
      events_(2 * size_t(std::max(o.runs, 1))),
      qkv_(bf16_bytes(3 * o.shape.head_elems())),
      dout_(bf16_bytes(o.shape.head_elems())),
      ref_out_(bf16_bytes(o.shape.head_elems())),
      ref_stats_(CudnnAttention::stats_elems(o.shape) * sizeof(float)),
      ref_dqkv_(bf16_bytes(3 * o.shape.head_elems())),
      out_(bf16_bytes(o.shape.head_elems())),
      stats_(CudnnAttention::stats_elems(o.shape) * sizeof(float)),
      dqkv_(bf16_bytes(3 * o.shape.head_elems())) {
  RY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  check_cudnn(cudnnCreate(&handle_), "cudnnCreate");
  check_cudnn(cudnnSetStream(handle_, stream_), "cudnnSetStream");
  fill_inputs();
}

Bench::~Bench() {
  if (handle_ != nullptr) cudnnDestroy(handle_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

// q, k, v and dO from N(0, 1), a fixed seed: every plan sees the same inputs.
void Bench::fill_inputs() {
  std::mt19937_64 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto upload = [&](const DeviceBuffer& to, size_t n) {
    std::vector<bf16> h(n);
    for (bf16& x : h) x = __float2bfloat16(normal(rng));
    RY_CUDA(cudaMemcpy(to.as<void>(), h.data(), bf16_bytes(n), cudaMemcpyHostToDevice));
  };
  upload(qkv_, 3 * s_.head_elems());
  upload(dout_, s_.head_elems());
}

void* Bench::workspace(size_t bytes) {
  if (bytes > ws_.bytes()) {
    ws_ = DeviceBuffer();  // the old one goes first: the dP route's workspace is large
    ws_ = DeviceBuffer(bytes);
  }
  return ws_.as<void>();
}

std::unordered_map<int64_t, void*> Bench::pack(bool backward) const {
  using namespace sdpa;
  const size_t hd = size_t(s_.H) * s_.hd;
  bf16* q = qkv_.as<bf16>();
  if (!backward)
    return {{kQ, q},
            {kK, q + hd},
            {kV, q + 2 * hd},
            {kO, out_.as<void>()},
            {kStats, stats_.as<void>()}};
  bf16* dq = dqkv_.as<bf16>();
  return {{kQ, q},
          {kK, q + hd},
          {kV, q + 2 * hd},
          {kO, ref_out_.as<void>()},
          {kDO, dout_.as<void>()},
          {kStats, ref_stats_.as<void>()},
          {kDQ, dq},
          {kDK, dq + hd},
          {kDV, dq + 2 * hd}};
}

std::vector<Part> Bench::parts(bool backward) const {
  const size_t hd = size_t(s_.H) * s_.hd, rows = size_t(s_.B) * s_.T;
  if (!backward) {
    return {{"o", 0, false, 1, s_.head_elems(), 0, 0},
            {"stats", 1, true, 1, CudnnAttention::stats_elems(s_), 0, 0}};
  }
  return {{"dq", 0, false, rows, hd, 3 * hd, 0},
          {"dk", 0, false, rows, hd, 3 * hd, hd},
          {"dv", 0, false, rows, hd, 3 * hd, 2 * hd}};
}

// The outputs on the host: a plan's, or (reference) the engine's.
Snapshot Bench::snapshot(bool backward, bool reference) const {
  std::vector<const DeviceBuffer*> bufs;
  if (backward) {
    bufs = {reference ? &ref_dqkv_ : &dqkv_};
  } else {
    bufs = {reference ? &ref_out_ : &out_, reference ? &ref_stats_ : &stats_};
  }
  Snapshot snap;
  for (const DeviceBuffer* b : bufs) {
    snap.emplace_back(b->bytes());
    RY_CUDA(cudaMemcpyAsync(snap.back().data(), b->as<void>(), b->bytes(), cudaMemcpyDeviceToHost,
                            stream_));
  }
  RY_CUDA(cudaStreamSynchronize(stream_));
  return snap;
}

// Outputs and workspace set to `byte` before a launch, so an element a plan does not write, or
// a workspace it reads before writing, shows as a difference between launches.
void Bench::poison(bool backward, int byte) const {
  for (const DeviceBuffer* b : backward ? std::vector<const DeviceBuffer*>{&dqkv_, &ws_}
                                        : std::vector<const DeviceBuffer*>{&out_, &stats_, &ws_}) {
    if (b->bytes() > 0) RY_CUDA(cudaMemsetAsync(b->as<void>(), byte, b->bytes(), stream_));
  }
}

Timing Bench::time_launches(const std::function<std::string()>& launch) {
  Timing t;
  for (int i = 0; i < o_.warmup && t.error.empty(); ++i) t.error = launch();
  std::vector<double> us;
  for (int i = 0; i < o_.runs && t.error.empty(); ++i) {
    RY_CUDA(cudaEventRecord(events_[2 * i], stream_));
    t.error = launch();
    RY_CUDA(cudaEventRecord(events_[2 * i + 1], stream_));
  }
  const cudaError_t done = cudaStreamSynchronize(stream_);
  if (done != cudaSuccess && t.error.empty()) {
    t.error = std::string("launch failed on the device: ") + cudaGetErrorString(done);
  }
  if (!t.error.empty()) {
    recover(stream_);
    return t;
  }
  for (int i = 0; i < o_.runs; ++i) {
    float ms = 0;
    RY_CUDA(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
    us.push_back(1e3 * ms);
  }
  t.median_us = median(us);
  t.min_us = *std::min_element(us.begin(), us.end());
  return t;
}

json timing_json(const Timing& t) {
  if (!t.error.empty()) return {{"error", t.error}};
  return {{"median_us", t.median_us}, {"min_us", t.min_us}};
}

// The engine's attention (CudnnAttention, as railyard-train runs it): its outputs are the
// reference every plan is compared with, and its times the ones to beat.
json Bench::engine_reference() {
  ScopedEnv env(kDpLimitVar, nullptr);
  CudnnAttention att;
  void* ws = workspace(att.prepare(s_));
  att.set_workspace(ws, ws_.bytes());
  auto guarded = [](const std::function<void()>& f) -> std::string {
    try {
      f();
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  const bf16* qkv = qkv_.as<bf16>();
  const Timing fwd = time_launches([&] {
    return guarded(
        [&] { att.forward(ref_out_.as<bf16>(), ref_stats_.as<float>(), qkv, s_, stream_); });
  });
  const Timing bwd = time_launches([&] {
    return guarded([&] {
      att.backward(ref_dqkv_.as<bf16>(), dout_.as<bf16>(), ref_out_.as<bf16>(),
                   ref_stats_.as<float>(), qkv, s_, stream_);
    });
  });
  if (!fwd.error.empty() || !bwd.error.empty()) {
    throw std::runtime_error("the engine's cuDNN attention fails at this shape: " + fwd.error +
                             " " + bwd.error);
  }
  ref_fwd_ = snapshot(false, true);
  ref_bwd_ = snapshot(true, true);
  return {{"forward", timing_json(fwd)},
          {"backward", timing_json(bwd)},
          {"plans", att.describe(s_)},  // the heuristic's first, or the pin table's
          {"workspace_bytes", ws_.bytes()}};
}

// Times plan `index`, then launches it bit_runs times on poisoned outputs and compares.
void Bench::measure(json& row, fe::graph::Graph& g, bool backward, int64_t index) {
  int64_t ws_bytes = 0;
  fe::error_t e = g.get_workspace_size_plan_at_index(index, ws_bytes);
  if (e.is_bad()) {
    row["error"] = "workspace size: " + e.get_message();
    return;
  }
  row["workspace_bytes"] = ws_bytes;
  void* ws = workspace(size_t(std::max<int64_t>(ws_bytes, 0)));
  auto vp = pack(backward);
  auto launch = [&]() -> std::string {
    fe::error_t st = g.execute_plan_at_index(handle_, vp, ws, index);
    return st.is_good() ? "" : "execute: " + st.get_message();
  };
  const Timing t = time_launches(launch);
  row["timing"] = timing_json(t);
  if (!t.error.empty()) return;
  std::vector<Snapshot> runs;
  for (int r = 0; r < o_.bit_runs; ++r) {
    poison(backward, r % 2 == 0 ? 0x00 : 0xff);
    const std::string err = launch();
    const cudaError_t done = cudaStreamSynchronize(stream_);
    if (!err.empty() || done != cudaSuccess) {
      row["error"] = err.empty() ? std::string(cudaGetErrorString(done)) : err;
      recover(stream_);
      return;
    }
    runs.push_back(snapshot(backward, false));
  }
  json same = json::object(), diff = json::object();
  for (const Part& p : parts(backward)) {
    bool all = true;
    for (size_t r = 1; r < runs.size(); ++r) all = all && same_bits(p, runs[0], runs[r]);
    same[p.name] = all;
    const auto d = max_diff(p, runs[0], backward ? ref_bwd_ : ref_fwd_);
    diff[p.name] = d ? json(*d) : json(nullptr);
  }
  row["same_bits"] = same;
  row["max_abs_diff_vs_engine"] = diff;
}

std::string knob_name(fe::KnobType_t k) {
  const json j = k;
  return j.is_string() ? j.get<std::string>() : "knob" + std::to_string(int64_t(k));
}

// One plan into `row`: what cuDNN says of it, whether it builds, and (if it does) its
// measurements.
void Bench::plan_row(json& row, fe::graph::Graph& g, bool backward, int64_t index) {
  std::string name;
  fe::error_t e = g.get_plan_name_at_index(index, name);
  row["name"] = e.is_good() ? name : "(no name: " + e.get_message() + ")";
  int64_t engine = -1;
  std::unordered_map<fe::KnobType_t, int64_t> knobs;
  if (g.get_engine_and_knobs_at_index(index, engine, knobs).is_good()) {
    std::map<std::string, int64_t> sorted;
    for (const auto& [k, v] : knobs) sorted[knob_name(k)] = v;
    row["engine_id"] = engine;
    row["knobs"] = sorted;
  }
  std::vector<fe::BehaviorNote_t> notes;
  if (g.get_behavior_notes_for_plan_at_index(index, notes).is_good()) row["behavior_notes"] = notes;
  e = g.build_plan_at_index(index);
  if (e.is_bad()) {
    row["error"] = "build: " + e.get_message();
    return;
  }
  row["built"] = true;
  measure(row, g, backward, index);
}

json Bench::run_config(const Variant& v, const Mode& m) {
  json c = {{"graph", v.name},
            {"backward", v.backward},
            {"deterministic_algorithm", v.backward ? json(v.deterministic) : json(nullptr)},
            {"dp_workspace_limit_env", v.dp_limit ? json(v.dp_limit) : json(nullptr)},
            {"heur_mode", m.name},
            {"plans", json::array()}};
  if (v.dp_limit != nullptr && cudnnGetVersion() < 92500) {
    c["note"] = "cuDNN < 9.25 has no ordered-dQ route: the frontend builds the dP route again";
  }
  std::shared_ptr<fe::graph::Graph> g;
  try {
    ScopedEnv env(kDpLimitVar, v.dp_limit);
    g = v.backward ? sdpa::backward_graph(handle_, s_, v.deterministic)
                   : sdpa::forward_graph(handle_, s_);
    fe::error_t e = g->create_execution_plans({m.mode});
    if (e.is_bad()) throw std::runtime_error("create_execution_plans: " + e.get_message());
  } catch (const std::exception& ex) {
    c["error"] = ex.what();
    return c;
  }
  const int64_t n = g->get_execution_plan_count();
  c["plan_count"] = n;
  bool chosen = false;  // build_plans' default policy takes the first plan that builds
  for (int64_t i = 0; i < n; ++i) {
    json row = {{"index", i}, {"built", false}, {"name", "?"}};
    try {
      plan_row(row, *g, v.backward, i);
    } catch (const DeviceLost&) {
      throw;
    } catch (const std::exception& ex) {  // a failed allocation, say: this plan's row says so
      row["error"] = ex.what();
      recover(stream_);
    }
    row["heuristic_choice"] = !chosen && row["built"].get<bool>();
    chosen = chosen || row["built"].get<bool>();
    c["plans"].push_back(std::move(row));
  }
  return c;
}

std::string fmt(const json& j, const char* key, double scale, const char* f) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, f, j[key].get<double>() * scale);
  return buf;
}

// "yes", "no" or "-" per part, e.g. "dq yes dk yes dv no".
std::string bits_text(const json& row) {
  if (!row.contains("same_bits")) return "-";
  std::string s;
  for (const auto& [part, same] : row["same_bits"].items()) {
    s += part + (same.get<bool>() ? " yes " : " NO ");
  }
  return s;
}

std::string diff_text(const json& row) {
  if (!row.contains("max_abs_diff_vs_engine")) return "-";
  double worst = 0;
  for (const auto& [part, d] : row["max_abs_diff_vs_engine"].items()) {
    if (d.is_null()) return "non-finite";
    worst = std::max(worst, d.get<double>());
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", worst);
  return buf;
}

void print_config(const json& c) {
  std::printf("\n== %s, heuristic mode %s: ", c["graph"].get<std::string>().c_str(),
              c["heur_mode"].get<std::string>().c_str());
  if (c.contains("note")) std::printf("(%s) ", c["note"].get<std::string>().c_str());
  if (c.contains("error")) {
    std::printf("no plans: %s\n", c["error"].get<std::string>().c_str());
    return;
  }
  std::printf("%lld plans (* = the heuristic's choice)\n",
              (long long)c["plan_count"].get<int64_t>());
  std::printf("%4s %5s %10s %10s %10s  %-26s %10s  %s\n", "idx", "built", "ws MiB", "median us",
              "min us", "same bits", "|d| engine", "plan");
  for (const json& p : c["plans"]) {
    const json t = p.value("timing", json::object());
    std::printf("%3lld%s %5s %10s %10s %10s  %-26s %10s  %s\n",
                (long long)p["index"].get<int64_t>(), p["heuristic_choice"].get<bool>() ? "*" : " ",
                p["built"].get<bool>() ? "yes" : "no",
                fmt(p, "workspace_bytes", 1.0 / (1 << 20), "%.1f").c_str(),
                fmt(t, "median_us", 1, "%.1f").c_str(), fmt(t, "min_us", 1, "%.1f").c_str(),
                bits_text(p).c_str(), diff_text(p).c_str(), p["name"].get<std::string>().c_str());
    if (p.contains("error"))
      std::printf("      error: %s\n", p["error"].get<std::string>().c_str());
    if (t.contains("error"))
      std::printf("      error: %s\n", t["error"].get<std::string>().c_str());
  }
  std::fflush(stdout);
}

bool reproducible(const json& p) {
  if (!p.contains("same_bits") || !p.contains("timing") || !p["timing"].contains("median_us")) {
    return false;
  }
  for (const auto& [part, same] : p["same_bits"].items()) {
    if (!same.get<bool>()) return false;
  }
  for (const auto& [part, d] : p["max_abs_diff_vs_engine"].items()) {
    if (d.is_null()) return false;
  }
  return true;
}

// Per direction: the engine's time and the fastest plan whose launches gave the same bits.
json summary(const json& out) {
  json s = json::object();
  for (const char* dir : {"forward", "backward"}) {
    json best;
    for (const json& c : out["configs"]) {
      if (c["backward"].get<bool>() != (std::string(dir) == "backward")) continue;
      for (const json& p : c.value("plans", json::array())) {
        if (!reproducible(p)) continue;
        const double us = p["timing"]["median_us"].get<double>();
        if (best.is_null() || us < best["median_us"].get<double>()) {
          best = {{"graph", c["graph"]}, {"heur_mode", c["heur_mode"]},
                  {"index", p["index"]}, {"name", p["name"]},
                  {"median_us", us},     {"max_abs_diff_vs_engine", p["max_abs_diff_vs_engine"]}};
        }
      }
    }
    s[dir] = {{"engine_median_us", out["engine"][dir].value("median_us", 0.0)},
              {"fastest_reproducible_plan", best}};
  }
  return s;
}

void print_summary(const json& s) {
  std::printf("\n== summary (fastest plan whose launches gave the same bits)\n");
  for (const auto& [dir, d] : s.items()) {
    const json& b = d["fastest_reproducible_plan"];
    std::printf("%-8s engine %.1f us", dir.c_str(), d["engine_median_us"].get<double>());
    if (b.is_null()) {
      std::printf("; no reproducible plan measured\n");
      continue;
    }
    std::printf("; fastest %.1f us: %s, mode %s, plan %lld %s (|d| vs engine %s)\n",
                b["median_us"].get<double>(), b["graph"].get<std::string>().c_str(),
                b["heur_mode"].get<std::string>().c_str(), (long long)b["index"].get<int64_t>(),
                b["name"].get<std::string>().c_str(), diff_text(b).c_str());
  }
}

void write_json(const json& out, const std::string& path) {
  if (path.empty()) return;
  std::ofstream f(path);
  // replace: an odd byte in a library message must not cost the whole file.
  f << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  if (!f) throw std::runtime_error("cannot write " + path + ": check the folder exists");
}

json header(const Options& o) {
  int dev = 0;
  cudaDeviceProp prop{};
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaGetDeviceProperties(&prop, dev));
  const AttentionShape& s = o.shape;
  return {{"gpu", prop.name},
          {"cudnn_backend_version", cudnnGetVersion()},
          {"cudnn_compiled_version", CUDNN_VERSION},
          {"cudnn_frontend_version", CUDNN_FRONTEND_VERSION},
          {"shape", {{"batch", s.B}, {"seq", s.T}, {"heads", s.H}, {"head_dim", s.hd}}},
          {"causal", true},
          {"dtype", "bf16"},
          {"runs", o.runs},
          {"warmup", o.warmup},
          {"bit_runs", o.bit_runs}};
}

int run(const Options& o) {
  json out = header(o);
  std::printf("cudnn_sdpa_plans: %s, cuDNN %lld (frontend %d), B=%d T=%d H=%d hd=%d, causal bf16\n",
              out["gpu"].get<std::string>().c_str(), (long long)cudnnGetVersion(),
              CUDNN_FRONTEND_VERSION, o.shape.B, o.shape.T, o.shape.H, o.shape.hd);
  Bench bench(o);
  out["engine"] = bench.engine_reference();
  std::printf("engine (CudnnAttention): forward %s us, backward %s us (median); %s\n",
              fmt(out["engine"]["forward"], "median_us", 1, "%.1f").c_str(),
              fmt(out["engine"]["backward"], "median_us", 1, "%.1f").c_str(),
              out["engine"]["plans"].get<std::string>().c_str());
  out["configs"] = json::array();
  int rc = 0;
  try {
    for (const Variant& v : kVariants) {
      for (const Mode& m : kModes) {
        out["configs"].push_back(bench.run_config(v, m));
        print_config(out["configs"].back());
        write_json(out, o.json);  // what was measured survives a timeout
      }
    }
  } catch (const std::exception& e) {  // DeviceLost, mostly: what was measured is kept
    std::fprintf(stderr, "cudnn_sdpa_plans: stopped early: %s\n", e.what());
    out["stopped_early"] = e.what();
    rc = 1;
  }
  out["summary"] = summary(out);
  print_summary(out["summary"]);
  write_json(out, o.json);
  return rc;
}

int positive(const std::string& flag, const std::string& value) {
  try {
    size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == value.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(flag + " wants a positive integer, got '" + value + "'");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value (or is unknown)");
    const std::string v = argv[++i];
    if (a == "--json")
      o.json = v;
    else if (a == "--batch")
      o.shape.B = positive(a, v);
    else if (a == "--seq")
      o.shape.T = positive(a, v);
    else if (a == "--heads")
      o.shape.H = positive(a, v);
    else if (a == "--head-dim")
      o.shape.hd = positive(a, v);
    else if (a == "--runs")
      o.runs = positive(a, v);
    else if (a == "--warmup")
      o.warmup = positive(a, v);
    else if (a == "--bit-runs")
      o.bit_runs = positive(a, v);
    else
      throw std::invalid_argument("unknown argument " + a);
  }
  if (o.bit_runs < 2) throw std::invalid_argument("--bit-runs needs at least 2 to compare");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudnn_sdpa_plans: %s\n%s", e.what(), kUsage);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cudnn_sdpa_plans: no CUDA device: run it on the GPU machine\n");
    return 1;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cudnn_sdpa_plans: %s\n", e.what());
    return 1;
  }
}
