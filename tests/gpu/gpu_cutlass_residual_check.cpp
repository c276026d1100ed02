// The engine's CUTLASS residual forward (residual_gemm_cutlass.hpp) in each of its tiles against
// float64: Y = X W^T + bias + R at GPT-2 124M's attention projection (16384 x 768 x 768) and fc2
// (16384 x 768 x 3072) and at a small shape no tile divides, with X's rows padded; R (the
// residual stream, the epilogue's C) left as it was; the same bits on a second run and from a
// CUDA graph; operands TMA cannot take refused with an error. Exit 77 without a GPU of compute
// capability 9.0 (the kernels are built for sm_90a alone).

#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cutlass_forward_operands.hpp"
#include "dtype.hpp"
#include "gpu_check.hpp"
#include "residual_gemm_cutlass.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;
using Kernel = cuda::CutlassResidualForward;

namespace {

constexpr double kTol = 1e-2;  // bf16 outputs, as gpu_kernels_check

using Problem = ForwardShape;

// The product's operands, its residual input R and its output on the device.
struct Product : ForwardOperands {
  DevArray<bf16> res, y;
  std::vector<double> hres;
  Product(std::mt19937_64& rng, const Problem& p)
      : ForwardOperands(rng, p), res(size_t(p.n) * p.o), y(size_t(p.n) * p.o) {
    hres = res.upload(random_vec(rng, res.n));
  }
  void run(Kernel& k, cudaStream_t s) {
    k.run(y.ptr(), x.ptr(), sh.ldx, w.ptr(), b.ptr(), res.ptr(), sh.n, sh.i, sh.o, s);
  }
};

// The checked rows of Y from float64 (X W^T + b + R), and R kept.
void check_values(Report& r, const std::string& what, const Product& p) {
  std::vector<double> ry = p.reference();
  const std::vector<double> rres = p.checked(p.hres);
  for (size_t j = 0; j < ry.size(); ++j) ry[j] += rres[j];
  r.check(what + " X W^T + b + R", p.checked(p.y.download()), ry, kTol);
  r.same_bits(what + " R kept", p.res.download(), p.hres);
}

void check_tile(Report& r, std::mt19937_64& rng, Kernel::Tile tile, const char* label,
                const Problem& pb) {
  const std::string what = std::string(label) + " " + pb.name();
  Kernel k(tile);
  Product p(rng, pb);
  p.y.poison();
  p.run(k, nullptr);
  check_values(r, what, p);
  const auto first = p.y.download();
  p.y.poison();
  p.run(k, nullptr);
  r.same_bits(what + " twice", p.y.download(), first);
  p.y.poison();
  run_in_graph([&](cudaStream_t s) { p.run(k, s); });
  r.same_bits(what + " from a graph", p.y.download(), first);
}

// An operand the kernel cannot take must be refused with std::invalid_argument, not run.
void check_refusals(Report& r, std::mt19937_64& rng) {
  Kernel k;
  Product p(rng, Problem{64, 96, 128, 104, 1});
  auto refused = [&r, &k, &p](const std::string& what, int ldx, int i, int o, int x_offset,
                              bool bias, const bf16* res) {
    try {
      k.run(p.y.ptr(), p.x.ptr() + x_offset, ldx, p.w.ptr(), bias ? p.b.ptr() : nullptr, res, 64, i,
            o, nullptr);
      r.fail(what + ": ran instead of being refused");
    } catch (const std::invalid_argument& e) {
      std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
    }
  };
  const bf16* res = p.res.ptr();
  refused("I not a multiple of 8", 104, 92, 128, 0, true, res);
  refused("O not a multiple of 8", 104, 96, 124, 0, true, res);
  refused("X's row stride not on 16 bytes", 100, 96, 128, 0, true, res);
  refused("X's row stride below I", 88, 96, 128, 0, true, res);
  refused("X not on 16 bytes", 104, 96, 128, 1, true, res);
  refused("no bias", 104, 96, 128, 0, false, res);
  refused("no residual", 104, 96, 128, 0, true, nullptr);
  refused("the residual not on 16 bytes", 104, 96, 128, 0, true, res + 1);
  refused("the residual is Y", 104, 96, 128, 0, true, p.y.ptr());
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!Kernel::supports(device)) {
      std::printf("SKIPPED: the CUTLASS residual forward runs on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_residual_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    Report r;
    const std::pair<Kernel::Tile, const char*> tiles[] = {
        {Kernel::Tile::kPingpong128x128, "pp128x128"},
        {Kernel::Tile::kCooperative256x128, "co256x128"},
        {Kernel::Tile::kCooperative128x256, "co128x256"}};
    for (const auto& [tile, label] : tiles) {
      check_tile(r, rng, tile, label, Problem{16 * 1024, 768, 768, 768, 257});    // attn proj
      check_tile(r, rng, tile, label, Problem{16 * 1024, 3072, 768, 3072, 257});  // fc2
      // No tile divides it: 300 rows, K 200 (64-deep), 264 outputs; X's rows padded to 216.
      check_tile(r, rng, tile, label, Problem{300, 200, 264, 216, 1});
    }
    check_refusals(r, rng);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
