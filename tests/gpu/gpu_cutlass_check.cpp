// The engine's CUTLASS GELU products (gelu_gemm_cutlass.hpp) against float64:
//   forward   GELU(X W^T + bias) and the value before GELU, at GPT-2 124M's fc (B=16 T=1024:
//             16384 x 3072 x 768) with ln2's rows packed and padded;
//   backward  (dY W) * GELU'(pre), at fc2's backward-input (16384 x 3072, K 768);
// each also at a small shape no tile divides; the same bits on a second run and in a CUDA graph
// as the engine's step replays it; operands TMA cannot take refused with an error. Exit 77
// without a GPU of compute capability 9.0 (the kernels are built for sm_90a alone).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "gelu_gemm_cutlass.hpp"
#include "gpu_check.hpp"
#include "railyard/cpu_kernels.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;

namespace {

constexpr double kTol = 1e-2;  // bf16 outputs, as gpu_kernels_check

using Outputs = std::vector<std::pair<std::string, std::vector<double>>>;

// The sampled rows (every row_step-th) of a row-major [rows, cols] matrix.
std::vector<double> sampled_rows(const std::vector<double>& m, int rows, int cols, int row_step) {
  std::vector<double> out;
  for (int n = 0; n < rows; n += row_step) {
    out.insert(out.end(), m.begin() + ptrdiff_t(n) * cols, m.begin() + ptrdiff_t(n + 1) * cols);
  }
  return out;
}

// The fc forward's operands on the device, X's padding (columns I..ldx) NaN: read, it shows.
struct ForwardOperands {
  using Kernel = cuda::CutlassGeluForward;
  struct Shape {
    int n, i, o, ldx;
    int row_step;  // every row_step-th row is checked against float64
  };
  Shape sh;
  DevArray<bf16> x, w, b, y, pre;
  std::vector<double> hx, hw, hb;
  ForwardOperands(std::mt19937_64& rng, const Shape& s)
      : sh(s),
        x(size_t(s.n) * s.ldx),
        w(size_t(s.o) * s.i),
        b(s.o),
        y(size_t(s.n) * s.o),
        pre(size_t(s.n) * s.o) {
    std::vector<float> vx = random_vec(rng, x.n);
    for (int r = 0; r < s.n; ++r) {
      for (int c = s.i; c < s.ldx; ++c) vx[size_t(r) * s.ldx + c] = std::nanf("");
    }
    hx = x.upload(vx);
    hw = w.upload(random_vec(rng, w.n, 0.05f));
    hb = b.upload(random_vec(rng, b.n));
  }
  std::string name() const {
    return "fwd " + std::to_string(sh.n) + "x" + std::to_string(sh.o) + "x" + std::to_string(sh.i) +
           " ldx " + std::to_string(sh.ldx);
  }
  void poison() {
    y.poison();
    pre.poison();
  }
  void launch(Kernel& k, cudaStream_t s) {
    k.run(y.ptr(), pre.ptr(), x.ptr(), sh.ldx, w.ptr(), b.ptr(), sh.n, sh.i, sh.o, s);
  }
  Outputs outputs() const { return {{"Y", y.download()}, {"value before GELU", pre.download()}}; }
  // The checked rows of Y and pre from float64 beside the device's.
  void check_rows(Report& r) const {
    std::vector<double> xs;
    for (int n = 0; n < sh.n; n += sh.row_step) {
      xs.insert(xs.end(), hx.begin() + ptrdiff_t(n) * sh.ldx,
                hx.begin() + ptrdiff_t(n) * sh.ldx + sh.i);
    }
    const int m = int(xs.size() / size_t(sh.i));
    std::vector<double> rpre(size_t(m) * sh.o), ry(rpre.size());
    cpu::matmul_forward<double>(rpre.data(), xs.data(), hw.data(), hb.data(), m, sh.i, sh.o);
    cpu::gelu_forward<double>(ry.data(), rpre.data(), int64_t(ry.size()));
    r.check(name() + " GELU(X W^T + b)", sampled_rows(y.download(), sh.n, sh.o, sh.row_step), ry,
            kTol);
    r.check(name() + " value before GELU", sampled_rows(pre.download(), sh.n, sh.o, sh.row_step),
            rpre, kTol);
  }
};

// fc2's backward-input operands: dY [N,O], W [O,I] as the Linear stores it, pre and dX [N,I].
struct BackwardOperands {
  using Kernel = cuda::CutlassGeluBackward;
  struct Shape {
    int n, i, o;
    int row_step;
  };
  Shape sh;
  DevArray<bf16> dy, w, pre, dx;
  std::vector<double> hdy, hw, hpre;
  BackwardOperands(std::mt19937_64& rng, const Shape& s)
      : sh(s),
        dy(size_t(s.n) * s.o),
        w(size_t(s.o) * s.i),
        pre(size_t(s.n) * s.i),
        dx(size_t(s.n) * s.i) {
    hdy = dy.upload(random_vec(rng, dy.n));
    hw = w.upload(random_vec(rng, w.n, 0.05f));
    hpre = pre.upload(random_vec(rng, pre.n, 3.0f));  // GELU's curved part and both tails
  }
  std::string name() const {
    return "bwd " + std::to_string(sh.n) + "x" + std::to_string(sh.i) + "x" + std::to_string(sh.o);
  }
  void poison() { dx.poison(); }
  void launch(Kernel& k, cudaStream_t s) {
    k.run(dx.ptr(), dy.ptr(), w.ptr(), pre.ptr(), sh.n, sh.i, sh.o, s);
  }
  Outputs outputs() const { return {{"dX", dx.download()}}; }
  // dX's checked rows: (dY W) * GELU'(pre) in float64 beside the device's.
  void check_rows(Report& r) const {
    std::vector<double> ref, acc(sh.i);
    for (int n = 0; n < sh.n; n += sh.row_step) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int k = 0; k < sh.o; ++k) {
        const double g = hdy[size_t(n) * sh.o + k];
        for (int c = 0; c < sh.i; ++c) acc[c] += g * hw[size_t(k) * sh.i + c];
      }
      std::vector<double> row(sh.i, 0.0);  // gelu_backward accumulates
      cpu::gelu_backward<double>(row.data(), &hpre[size_t(n) * sh.i], acc.data(), sh.i);
      ref.insert(ref.end(), row.begin(), row.end());
    }
    r.check(name() + " (dY W) * GELU'(pre)", sampled_rows(dx.download(), sh.n, sh.i, sh.row_step),
            ref, kTol);
  }
};

void same_outputs(Report& r, const std::string& what, const Outputs& out, const Outputs& ref) {
  for (size_t i = 0; i < out.size(); ++i)
    r.same_bits(out[i].first + what, out[i].second, ref[i].second);
}

// The second run, eager and then replayed from a graph captured on its own stream: both the
// first run's bits.
template <class Op>
void check_same_bits(Report& r, Op& op, typename Op::Kernel& k) {
  const Outputs first = op.outputs();
  op.poison();
  op.launch(k, nullptr);
  same_outputs(r, " " + op.name() + ", twice", op.outputs(), first);
  cudaStream_t s = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  op.poison();
  RY_CUDA(cudaDeviceSynchronize());  // the poison (legacy stream) before s, which does not wait
  RY_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  op.launch(k, s);
  RY_CUDA(cudaStreamEndCapture(s, &graph));
  RY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  RY_CUDA(cudaGraphLaunch(exec, s));
  RY_CUDA(cudaStreamSynchronize(s));
  same_outputs(r, " " + op.name() + " from a CUDA graph", op.outputs(), first);
  RY_CUDA(cudaGraphExecDestroy(exec));
  RY_CUDA(cudaGraphDestroy(graph));
  RY_CUDA(cudaStreamDestroy(s));
}

template <class Op>
void check_product(Report& r, std::mt19937_64& rng, typename Op::Kernel& k,
                   const typename Op::Shape& s) {
  Op op(rng, s);
  op.poison();
  op.launch(k, nullptr);
  op.check_rows(r);
  check_same_bits(r, op, k);
}

// An operand the kernel cannot take must be refused with std::invalid_argument, not run.
void check_refused(Report& r, const std::string& what, const std::function<void()>& call) {
  try {
    call();
    r.fail(what + ": ran instead of being refused");
  } catch (const std::invalid_argument& e) {
    std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
  }
}

void check_forward_refusals(Report& r, std::mt19937_64& rng, cuda::CutlassGeluForward& k) {
  ForwardOperands op(rng, {64, 96, 128, 104, 1});
  auto run = [&op, &k](int ldx, int i, int o, int x_offset) {
    return [&op, &k, ldx, i, o, x_offset] {
      k.run(op.y.ptr(), op.pre.ptr(), op.x.ptr() + x_offset, ldx, op.w.ptr(), op.b.ptr(), 64, i, o,
            nullptr);
    };
  };
  check_refused(r, "fwd: I not a multiple of 8", run(104, 92, 128, 0));
  check_refused(r, "fwd: O not a multiple of 8", run(104, 96, 124, 0));
  check_refused(r, "fwd: X's row stride not on 16 bytes", run(100, 96, 128, 0));
  check_refused(r, "fwd: X's row stride below I", run(88, 96, 128, 0));
  check_refused(r, "fwd: X not on 16 bytes", run(104, 96, 128, 1));
  check_refused(r, "fwd: no bias", [&op, &k] {
    k.run(op.y.ptr(), op.pre.ptr(), op.x.ptr(), 104, op.w.ptr(), nullptr, 64, 96, 128, nullptr);
  });
}

void check_backward_refusals(Report& r, std::mt19937_64& rng, cuda::CutlassGeluBackward& k) {
  BackwardOperands op(rng, {64, 128, 96, 1});
  auto run = [&op, &k](int i, int o, int dx_offset, int dy_offset, bool with_pre) {
    return [&op, &k, i, o, dx_offset, dy_offset, with_pre] {
      k.run(op.dx.ptr() + dx_offset, op.dy.ptr() + dy_offset, op.w.ptr(),
            with_pre ? op.pre.ptr() : nullptr, 64, i, o, nullptr);
    };
  };
  check_refused(r, "bwd: I not a multiple of 8", run(124, 96, 0, 0, true));
  check_refused(r, "bwd: O not a multiple of 8", run(128, 92, 0, 0, true));
  check_refused(r, "bwd: dX not on 16 bytes", run(128, 96, 1, 0, true));
  check_refused(r, "bwd: dY not on 16 bytes", run(128, 96, 0, 1, true));
  check_refused(r, "bwd: no value before GELU", run(128, 96, 0, 0, false));
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!cuda::cutlass_sm90_supports(device)) {
      std::printf("SKIPPED: the CUTLASS GELU products run on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    cuda::CutlassGeluForward fwd;
    cuda::CutlassGeluBackward bwd;
    Report r;
    // GPT-2 124M's fc at B=16 T=1024 (every 257th row against float64), packed as today.
    check_product<ForwardOperands>(r, rng, fwd, {16 * 1024, 768, 3072, 768, 257});
    // The same with ln2's rows padded to 776 (a ones column and alignment).
    check_product<ForwardOperands>(r, rng, fwd, {16 * 1024, 768, 3072, 776, 257});
    // No tile divides it: 300 rows (128-row tiles), K 200 (64-deep), 264 outputs (128 wide).
    check_product<ForwardOperands>(r, rng, fwd, {300, 200, 264, 216, 1});
    // fc2's backward-input at B=16 T=1024: d4 [16384, 3072] from dresid [16384, 768].
    check_product<BackwardOperands>(r, rng, bwd, {16 * 1024, 3072, 768, 257});
    // No tile divides it: 300 rows, 264 inputs (128 wide), K 200 (64-deep).
    check_product<BackwardOperands>(r, rng, bwd, {300, 264, 200, 1});
    check_forward_refusals(r, rng, fwd);
    check_backward_refusals(r, rng, bwd);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
