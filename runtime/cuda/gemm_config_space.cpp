#include "gemm_config_space.hpp"

#include <algorithm>

namespace railyard::cuda {

namespace {

constexpr int64_t kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int64_t kMaxCustomOptions = 8;
// AUTO and the shapes of at most four CTAs; larger clusters rarely fit two GPT-2-sized operands.
constexpr int64_t kClusterShapes[] = {CUBLASLT_CLUSTER_SHAPE_AUTO,  CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
                                      CUBLASLT_CLUSTER_SHAPE_2x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                                      CUBLASLT_CLUSTER_SHAPE_1x4x1};
constexpr uint32_t kFixedOrderSchemes[] = {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE};

// The ordered list without repeats, closed at `limit`.
class Collector {
 public:
  explicit Collector(size_t limit) : limit_(limit) {}
  void add(const GemmAlgoConfig& c) {
    if (full() || !fixed_order(c)) return;
    if (std::find(out_.begin(), out_.end(), c) == out_.end()) out_.push_back(c);
  }
  bool full() const { return out_.size() >= limit_; }
  std::vector<GemmAlgoConfig> take() { return std::move(out_); }

 private:
  size_t limit_;
  std::vector<GemmAlgoConfig> out_;
};

const GemmAlgoCaps* caps_of(const std::vector<GemmAlgoCaps>& caps, int64_t algo_id) {
  const auto it = std::find_if(caps.begin(), caps.end(),
                               [&](const GemmAlgoCaps& c) { return c.algo_id == algo_id; });
  return it == caps.end() ? nullptr : &*it;
}

// Split-K `parts` with each fixed-order reduction the algorithm offers (none without a split).
void add_splits(Collector& out, GemmAlgoConfig c, const GemmAlgoCaps& caps) {
  for (const int64_t parts : kSplits) {
    if (parts > 1 && !caps.splitk) break;
    c.splitk = parts;
    if (parts == 1) {
      c.reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
      out.add(c);
      continue;
    }
    for (const uint32_t scheme : kFixedOrderSchemes) {
      if ((caps.reduction_mask & scheme) == 0) continue;
      c.reduction = scheme;
      out.add(c);
    }
  }
}

// Each configuration that differs from `seed` in one field.
void add_neighbours(Collector& out, const GemmAlgoConfig& seed, const GemmAlgoCaps& caps) {
  auto vary = [&](int64_t GemmAlgoConfig::*field, int64_t value) {
    GemmAlgoConfig c = seed;
    c.*field = value;
    out.add(c);
  };
  for (const int64_t t : caps.tiles) vary(&GemmAlgoConfig::tile_id, t);
  for (const int64_t s : caps.stages) vary(&GemmAlgoConfig::stages_id, s);
  add_splits(out, seed, caps);
  if (caps.swizzle) vary(&GemmAlgoConfig::swizzle, seed.swizzle == 1 ? 0 : 1);
  for (int64_t o = 0; o <= std::min(caps.custom_option_max, kMaxCustomOptions - 1); ++o) {
    vary(&GemmAlgoConfig::custom_option, o);
  }
  if (seed.cluster_shape_id < 0) return;  // this cuBLASLt or GPU has no clusters
  for (const int64_t s : kClusterShapes) vary(&GemmAlgoConfig::cluster_shape_id, s);
}

// Every tile x stages pair on top of `base`; "undefined" where the algorithm lists none.
void add_tile_stages(Collector& out, GemmAlgoConfig base, const GemmAlgoCaps& caps) {
  const std::vector<int64_t> undefined = {0};
  const auto& tiles = caps.tiles.empty() ? undefined : caps.tiles;
  const auto& stages = caps.stages.empty() ? undefined : caps.stages;
  for (const int64_t t : tiles) {
    for (const int64_t s : stages) {
      base.tile_id = t, base.stages_id = s;
      out.add(base);
    }
  }
}

}  // namespace

bool fixed_order(const GemmAlgoConfig& c) {
  if (c.splitk <= 1) return true;
  return c.reduction == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE ||
         c.reduction == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
}

std::vector<GemmAlgoConfig> config_space(const std::vector<GemmAlgoConfig>& seeds,
                                         const std::vector<GemmAlgoCaps>& caps, size_t limit) {
  Collector out(limit);
  for (const auto& s : seeds) out.add(s);
  for (const auto& s : seeds) {
    if (const auto* c = caps_of(caps, s.algo_id)) add_neighbours(out, s, *c);
  }
  for (const auto& s : seeds) {
    if (const auto* c = caps_of(caps, s.algo_id)) add_tile_stages(out, s, *c);
  }
  for (const auto& c : caps) {
    const bool seeded = std::any_of(seeds.begin(), seeds.end(), [&](const GemmAlgoConfig& s) {
      return s.algo_id == c.algo_id;
    });
    if (seeded) continue;
    GemmAlgoConfig base;
    base.algo_id = c.algo_id, base.splitk = 1, base.reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    base.swizzle = 0, base.custom_option = 0, base.inner_shape_id = 0, base.cluster_shape_id = 0;
    add_tile_stages(out, base, c);
  }
  return out.take();
}

namespace {

// A list attribute (array of uint32_t); empty where the algorithm has none.
std::vector<int64_t> cap_ids(const cublasLtMatmulAlgo_t& algo,
                             cublasLtMatmulAlgoCapAttributes_t a) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, a, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0) {
    return {};
  }
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, a, ids.data(), ids.size() * sizeof(uint32_t),
                                        &written) != CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  ids.resize(written / sizeof(uint32_t));
  return {ids.begin(), ids.end()};
}

// A scalar attribute of 4 bytes (int32 or uint32); 0 where this cuBLASLt cannot say.
uint32_t cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t a) {
  uint32_t v = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, a, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return 0;
  }
  return v;
}

}  // namespace

std::vector<GemmAlgoCaps> algo_caps(cublasLtHandle_t handle, cublasComputeType_t compute,
                                    cudaDataType_t scale, cudaDataType_t ab, cudaDataType_t cd) {
  std::vector<int> ids(256);
  int found = 0;
  if (cublasLtMatmulAlgoGetIds(handle, compute, scale, ab, ab, cd, cd, static_cast<int>(ids.size()),
                               ids.data(), &found) != CUBLAS_STATUS_SUCCESS) {
    return {};
  }
  std::vector<GemmAlgoCaps> out;
  for (int i = 0; i < found; ++i) {
    cublasLtMatmulAlgo_t algo{};
    if (cublasLtMatmulAlgoInit(handle, compute, scale, ab, ab, cd, cd, ids[i], &algo) !=
        CUBLAS_STATUS_SUCCESS) {
      continue;
    }
    GemmAlgoCaps c;
    c.algo_id = ids[i];
    c.tiles = cap_ids(algo, CUBLASLT_ALGO_CAP_TILE_IDS);
    c.stages = cap_ids(algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
    c.splitk = cap_value(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    c.reduction_mask = cap_value(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    c.swizzle = cap_value(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT) != 0;
    c.custom_option_max = cap_value(algo, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace railyard::cuda
