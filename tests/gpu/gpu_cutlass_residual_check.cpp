// The engine's CUTLASS residual forward (residual_gemm_cutlass.hpp) and bias-only forward
// (bias_gemm_cutlass.hpp) in each of their tiles against float64: Y = X W^T + bias + R at GPT-2
// 124M's attention projection (16384 x 768 x 768) and fc2 (16384 x 768 x 3072), Y = X W^T + bias
// at its QKV projection (16384 x 2304 x 768, X's rows 776 apart as the engine's ln1), and each at
// a small shape no tile divides, with X's rows padded; R (the residual stream, the epilogue's C)
// left as it was; the same bits on a second run and from a CUDA graph; operands TMA cannot take
// refused with an error. Exit 77 without a GPU of compute capability 9.0 (the kernels are built
// for sm_90a alone).

#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bias_gemm_cutlass.hpp"
#include "cutlass_forward_operands.hpp"
#include "dtype.hpp"
#include "gpu_check.hpp"
#include "residual_gemm_cutlass.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;
using Residual = cuda::CutlassResidualForward;
using Bias = cuda::CutlassBiasForward;

namespace {

constexpr double kTol = 1e-2;  // bf16 outputs, as gpu_kernels_check

using Problem = ForwardShape;

// The residual product's operands, its residual input R and its output on the device.
struct ResidualProduct : ForwardOperands {
  DevArray<bf16> res, y;
  std::vector<double> hres;
  ResidualProduct(std::mt19937_64& rng, const Problem& p)
      : ForwardOperands(rng, p), res(size_t(p.n) * p.o), y(size_t(p.n) * p.o) {
    hres = res.upload(random_vec(rng, res.n));
  }
  void run(Residual& k, cudaStream_t s) {
    k.run(y.ptr(), x.ptr(), sh.ldx, w.ptr(), b.ptr(), res.ptr(), sh.n, sh.i, sh.o, s);
  }
  // The checked rows of Y from float64 (X W^T + b + R), and R kept.
  void check_values(Report& r, const std::string& what) const {
    std::vector<double> ry = reference();
    const std::vector<double> rres = checked(hres);
    for (size_t j = 0; j < ry.size(); ++j) ry[j] += rres[j];
    r.check(what + " X W^T + b + R", checked(y.download()), ry, kTol);
    r.same_bits(what + " R kept", res.download(), hres);
  }
};

// The bias-only product's operands and its output on the device.
struct BiasProduct : ForwardOperands {
  DevArray<bf16> y;
  BiasProduct(std::mt19937_64& rng, const Problem& p)
      : ForwardOperands(rng, p), y(size_t(p.n) * p.o) {}
  void run(Bias& k, cudaStream_t s) {
    k.run(y.ptr(), x.ptr(), sh.ldx, w.ptr(), b.ptr(), sh.n, sh.i, sh.o, s);
  }
  void check_values(Report& r, const std::string& what) const {
    r.check(what + " X W^T + b", checked(y.download()), reference(), kTol);
  }
};

template <class Product, class Kernel>
void check_tile(Report& r, std::mt19937_64& rng, typename Kernel::Tile tile, const char* label,
                const Problem& pb) {
  const std::string what = std::string(label) + " " + pb.name();
  Kernel k(tile);
  Product p(rng, pb);
  p.y.poison();
  p.run(k, nullptr);
  p.check_values(r, what);
  const auto first = p.y.download();
  p.y.poison();
  p.run(k, nullptr);
  r.same_bits(what + " twice", p.y.download(), first);
  p.y.poison();
  run_in_graph([&](cudaStream_t s) { p.run(k, s); });
  r.same_bits(what + " from a graph", p.y.download(), first);
}

// An operand the kernel cannot take must be refused with std::invalid_argument, not run.
template <class Run>
void expect_refused(Report& r, const std::string& what, Run run) {
  try {
    run();
    r.fail(what + ": ran instead of being refused");
  } catch (const std::invalid_argument& e) {
    std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
  }
}

// The refusals both forwards share, on a 64 x 96 -> 128 product: `refused(what, X's row stride,
// I, O, X's offset in elements, with a bias)` runs the kernel, which must refuse.
template <class Refused>
void operand_refusals(Refused refused) {
  refused("I not a multiple of 8", 104, 92, 128, 0, true);
  refused("O not a multiple of 8", 104, 96, 124, 0, true);
  refused("X's row stride not on 16 bytes", 100, 96, 128, 0, true);
  refused("X's row stride below I", 88, 96, 128, 0, true);
  refused("X not on 16 bytes", 104, 96, 128, 1, true);
  refused("no bias", 104, 96, 128, 0, false);
}

void check_residual_refusals(Report& r, std::mt19937_64& rng) {
  Residual k;
  ResidualProduct p(rng, Problem{64, 96, 128, 104, 1});
  auto refused = [&r, &k, &p](const std::string& what, int ldx, int i, int o, int x_offset,
                              bool bias, const bf16* res) {
    expect_refused(r, "residual: " + what, [&] {
      k.run(p.y.ptr(), p.x.ptr() + x_offset, ldx, p.w.ptr(), bias ? p.b.ptr() : nullptr, res, 64, i,
            o, nullptr);
    });
  };
  const bf16* res = p.res.ptr();
  operand_refusals([&](const std::string& what, int ldx, int i, int o, int x_offset, bool bias) {
    refused(what, ldx, i, o, x_offset, bias, res);
  });
  refused("no residual", 104, 96, 128, 0, true, nullptr);
  refused("the residual not on 16 bytes", 104, 96, 128, 0, true, res + 1);
  refused("the residual is Y", 104, 96, 128, 0, true, p.y.ptr());
}

void check_bias_refusals(Report& r, std::mt19937_64& rng) {
  Bias k;
  BiasProduct p(rng, Problem{64, 96, 128, 104, 1});
  auto refused = [&r, &k, &p](const std::string& what, int ldx, int i, int o, int x_offset,
                              bool bias, bf16* y) {
    expect_refused(r, "bias-only: " + what, [&] {
      k.run(y, p.x.ptr() + x_offset, ldx, p.w.ptr(), bias ? p.b.ptr() : nullptr, 64, i, o, nullptr);
    });
  };
  bf16* y = p.y.ptr();
  operand_refusals([&](const std::string& what, int ldx, int i, int o, int x_offset, bool bias) {
    refused(what, ldx, i, o, x_offset, bias, y);
  });
  refused("no Y", 104, 96, 128, 0, true, nullptr);
  refused("Y not on 16 bytes", 104, 96, 128, 0, true, y + 1);
}

// Each tile of each class at the engine's shapes and at a small one no tile divides (300 rows,
// K 200 (64-deep), 264 outputs; X's rows padded to 216).
void check_tiles(Report& r, std::mt19937_64& rng) {
  const std::pair<Residual::Tile, const char*> residual_tiles[] = {
      {Residual::Tile::kPingpong128x128, "residual pp128x128"},
      {Residual::Tile::kCooperative256x128, "residual co256x128"},
      {Residual::Tile::kCooperative128x256, "residual co128x256"}};
  for (const auto& [tile, label] : residual_tiles) {
    auto check = check_tile<ResidualProduct, Residual>;
    check(r, rng, tile, label, Problem{16 * 1024, 768, 768, 768, 257});    // attn proj
    check(r, rng, tile, label, Problem{16 * 1024, 3072, 768, 3072, 257});  // fc2
    check(r, rng, tile, label, Problem{300, 200, 264, 216, 1});
  }
  const std::pair<Bias::Tile, const char*> bias_tiles[] = {
      {Bias::Tile::kPingpong128x128, "bias pp128x128"},
      {Bias::Tile::kCooperative128x256, "bias co128x256"},
      {Bias::Tile::kCooperative128x192, "bias co128x192"}};
  for (const auto& [tile, label] : bias_tiles) {
    auto check = check_tile<BiasProduct, Bias>;
    check(r, rng, tile, label, Problem{16 * 1024, 768, 2304, 776, 257});  // qkv, ln1's stride
    check(r, rng, tile, label, Problem{300, 200, 264, 216, 1});
  }
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!Residual::supports(device) || !Bias::supports(device)) {
      std::printf("SKIPPED: the CUTLASS forwards run on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_residual_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    Report r;
    check_tiles(r, rng);
    check_residual_refusals(r, rng);
    check_bias_refusals(r, rng);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
