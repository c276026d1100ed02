// The engine's CUTLASS fc forward (gelu_gemm_cutlass.hpp) against float64: GELU(X W^T + bias)
// and the value before GELU, at GPT-2 124M's shape (B=16 T=1024: 16384 x 3072 x 768) and at a
// small shape no tile divides, with X's rows padded; the same bits on a second run, and in a CUDA
// graph as the engine's step replays it; operands TMA cannot take refused with an error. Exit 77
// without a GPU of compute capability 9.0 (the kernel is built for sm_90a alone).

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "cutlass_forward_operands.hpp"
#include "dtype.hpp"
#include "gelu_gemm_cutlass.hpp"
#include "gpu_check.hpp"
#include "railyard/cpu_kernels.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;

namespace {

constexpr double kTol = 1e-2;  // bf16 outputs, as gpu_kernels_check

using Shape = ForwardShape;

// One product's operands and outputs on the device.
struct Operands : ForwardOperands {
  DevArray<bf16> y, pre;
  Operands(std::mt19937_64& rng, const Shape& s)
      : ForwardOperands(rng, s), y(size_t(s.n) * s.o), pre(size_t(s.n) * s.o) {}
  void run(cuda::CutlassGeluForward& k, cudaStream_t s) {
    y.poison();
    pre.poison();
    k.run(y.ptr(), pre.ptr(), x.ptr(), sh.ldx, w.ptr(), b.ptr(), sh.n, sh.i, sh.o, s);
  }
};

// The checked rows of Y and pre from float64, and the same rows of the device's outputs.
void check_rows(Report& r, const std::string& what, const Operands& op) {
  const std::vector<double> rpre = op.reference();
  std::vector<double> ry(rpre.size());
  cpu::gelu_forward<double>(ry.data(), rpre.data(), int64_t(ry.size()));
  r.check(what + " GELU(X W^T + b)", op.checked(op.y.download()), ry, kTol);
  r.check(what + " value before GELU", op.checked(op.pre.download()), rpre, kTol);
}

// The second run, eager and then replayed from a graph captured on its own stream: both the
// first run's bits.
void check_same_bits(Report& r, const std::string& what, Operands& op,
                     cuda::CutlassGeluForward& k) {
  const auto y1 = op.y.download(), pre1 = op.pre.download();
  op.run(k, nullptr);
  r.same_bits(what + " Y, twice", op.y.download(), y1);
  r.same_bits(what + " value before GELU, twice", op.pre.download(), pre1);
  op.y.poison();
  op.pre.poison();
  run_in_graph([&](cudaStream_t s) {
    k.run(op.y.ptr(), op.pre.ptr(), op.x.ptr(), op.sh.ldx, op.w.ptr(), op.b.ptr(), op.sh.n, op.sh.i,
          op.sh.o, s);
  });
  r.same_bits(what + " Y from a CUDA graph", op.y.download(), y1);
  r.same_bits(what + " value before GELU from a graph", op.pre.download(), pre1);
}

void check_product(Report& r, std::mt19937_64& rng, cuda::CutlassGeluForward& k, const Shape& s) {
  const std::string what = s.name();
  Operands op(rng, s);
  op.run(k, nullptr);
  check_rows(r, what, op);
  check_same_bits(r, what, op, k);
}

// An operand the kernel cannot take must be refused with std::invalid_argument, not run.
void check_refused(Report& r, cuda::CutlassGeluForward& k, const std::string& what,
                   const std::function<void(cuda::CutlassGeluForward&)>& call) {
  try {
    call(k);
    r.fail(what + ": ran instead of being refused");
  } catch (const std::invalid_argument& e) {
    std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
  }
}

void check_refusals(Report& r, std::mt19937_64& rng, cuda::CutlassGeluForward& k) {
  Operands op(rng, Shape{64, 96, 128, 104, 1});
  auto run = [&op](int ldx, int i, int o, int x_offset) {
    return [&op, ldx, i, o, x_offset](cuda::CutlassGeluForward& kk) {
      kk.run(op.y.ptr(), op.pre.ptr(), op.x.ptr() + x_offset, ldx, op.w.ptr(), op.b.ptr(), 64, i, o,
             nullptr);
    };
  };
  check_refused(r, k, "I not a multiple of 8", run(104, 92, 128, 0));
  check_refused(r, k, "O not a multiple of 8", run(104, 96, 124, 0));
  check_refused(r, k, "X's row stride not on 16 bytes", run(100, 96, 128, 0));
  check_refused(r, k, "X's row stride below I", run(88, 96, 128, 0));
  check_refused(r, k, "X not on 16 bytes", run(104, 96, 128, 1));
  check_refused(r, k, "no bias", [&op](cuda::CutlassGeluForward& kk) {
    kk.run(op.y.ptr(), op.pre.ptr(), op.x.ptr(), 104, op.w.ptr(), nullptr, 64, 96, 128, nullptr);
  });
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!cuda::CutlassGeluForward::supports(device)) {
      std::printf("SKIPPED: the CUTLASS fc forward runs on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    cuda::CutlassGeluForward k;
    Report r;
    // GPT-2 124M's fc at B=16 T=1024 (every 257th row against float64), packed as today.
    check_product(r, rng, k, Shape{16 * 1024, 768, 3072, 768, 257});
    // The same with ln2's rows padded to 776 (a ones column and alignment).
    check_product(r, rng, k, Shape{16 * 1024, 768, 3072, 776, 257});
    // No tile divides it: 300 rows (128-row tiles), K 200 (64-deep), 264 outputs (128 wide).
    check_product(r, rng, k, Shape{300, 200, 264, 216, 1});
    check_refusals(r, rng, k);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
