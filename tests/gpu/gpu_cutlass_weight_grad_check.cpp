// The CUTLASS layer weight gradients (weight_grad_cutlass.hpp), every variant against float64:
// dW[O,I] = dY[N,O]^T X[N,I] and dW += dY^T X at GPT-2 124M's four layer products (16384
// positions; qkv and fc1 with the ones column, I = 776 read of rows 832 apart) and at a small
// shape no tile divides; the same bits on a second run, from a CUDA graph, and three times in one
// graph through TailZeroedWorkspaces with the barrier memsets hoisted to its head (as the
// engine's step graphs run them); operands the kernels cannot take
// refused with an error. Exit 77 without a GPU of compute capability 9.0 (the kernels are built
// for sm_90a alone).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "gpu_check.hpp"
#include "graph_memsets.hpp"
#include "tail_zeroed_workspaces.hpp"
#include "weight_grad_cutlass.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;
using Kernel = cuda::CutlassWeightGrad;

namespace {

// fp32 sums of 16384 bf16 products, split or not: the head's 4096 came to 5e-6 (bench/NOTES.md),
// the error grows with K; a wrong layout or a lost part of a split is off by O(1).
constexpr double kTol = 5e-5;

struct Problem {
  int n, i, o, ldx;  // positions, columns of dW (of X read), rows of dW, X's row stride
  int row_step;      // every row_step-th row of dW is checked against float64
  std::string name() const {
    return std::to_string(o) + "x" + std::to_string(i) + " over " + std::to_string(n) +
           (ldx != i ? " ldx " + std::to_string(ldx) : "");
  }
};

// The operands of one problem (shared by every variant) and the float64 rows it checks.
struct Product {
  Problem pb;
  DevArray<bf16> dy, x;
  DevArray<float> dw;
  std::vector<double> hdy, hx, hinit, ref;
  Product(std::mt19937_64& rng, const Problem& p)
      : pb(p), dy(size_t(p.n) * p.o), x(size_t(p.n) * p.ldx), dw(size_t(p.o) * p.i) {
    hdy = dy.upload(random_vec(rng, dy.n));
    hx = x.upload(random_vec(rng, x.n));
    hinit = dw.upload(random_vec(rng, dw.n, 4.0f));
    for (int v = 0; v < pb.o; v += pb.row_step) {
      std::vector<double> row(pb.i, 0.0);
      for (int n = 0; n < pb.n; ++n) {
        const double g = hdy[size_t(n) * pb.o + v];
        for (int c = 0; c < pb.i; ++c) row[c] += g * hx[size_t(n) * pb.ldx + c];
      }
      ref.insert(ref.end(), row.begin(), row.end());
    }
  }
  void reset() { hinit = dw.upload(std::vector<float>(hinit.begin(), hinit.end())); }
  // The checked rows of dY^T X (+ the initial dW where acc), in float64.
  std::vector<double> reference(bool acc) const {
    std::vector<double> out = ref;
    for (int v = 0, j = 0; acc && v < pb.o; v += pb.row_step, ++j) {
      for (int c = 0; c < pb.i; ++c) out[size_t(j) * pb.i + c] += hinit[size_t(v) * pb.i + c];
    }
    return out;
  }
  std::vector<double> checked(const std::vector<double>& all) const {
    std::vector<double> out;
    for (int v = 0; v < pb.o; v += pb.row_step) {
      out.insert(out.end(), all.begin() + ptrdiff_t(v) * pb.i,
                 all.begin() + ptrdiff_t(v + 1) * pb.i);
    }
    return out;
  }
};

// A workspace for the kernel at the product's shape (16 bytes where it needs none).
struct Workspace {
  cuda::DeviceBuffer buf;
  Workspace(const Kernel& k, const Problem& p)
      : buf(std::max<size_t>(16, k.workspace_bytes(p.n, p.i, p.o))) {}
};

// Three calls in one graph through TailZeroedWorkspaces as the engine makes them, their barrier
// memsets hoisted (one each where the variant has a workspace): the same bits as eagerly.
void check_hoisted(Report& r, Kernel& k, Product& p, const std::string& what,
                   const std::vector<double>& first) {
  const Problem& pb = p.pb;
  const size_t need = k.workspace_bytes(pb.n, pb.i, pb.o);
  const size_t tail = k.zeroed_tail_bytes(pb.n, pb.i, pb.o);
  cuda::DeviceBuffer mem(
      std::max<size_t>(16, cuda::TailZeroedWorkspaces::bytes_for(need, tail, 3)));
  cuda::TailZeroedWorkspaces arena(mem.as<void>(), need, tail, 3);
  p.dw.poison();
  size_t hoisted = 0;
  run_in_graph(
      [&](cudaStream_t s) {
        for (int i = 0; i < 3; ++i) {
          const auto ws =
              need > 0 ? arena.take(need, tail, s) : cuda::TailZeroedWorkspaces::Workspace{};
          k.run(p.dw.ptr(), p.dy.ptr(), p.x.ptr(), pb.n, pb.i, pb.o, pb.ldx, false, ws.ptr,
                ws.bytes, s);
        }
      },
      [&](cudaGraph_t g) {  // as the step's graphs: hoisted, then the other small ones kernels
        hoisted = cuda::hoist_scratch_memsets(g, arena.arena().first, arena.arena().second);
        cuda::replace_small_memsets(g);
      });
  r.same_bits(what + " thrice in a graph, memsets hoisted", p.dw.download(), first);
  if (hoisted != (need > 0 ? 3u : 0u)) {
    r.fail(what + ": " + std::to_string(hoisted) + " memsets hoisted, expected " +
           (need > 0 ? "3" : "0"));
  }
}

void check_mode(Report& r, Kernel& k, Product& p, bool acc) {
  const std::string what = Kernel::name(k.variant()) + " " + p.pb.name() + (acc ? " +=" : " =");
  Workspace ws(k, p.pb);
  auto run = [&](cudaStream_t s) {
    k.run(p.dw.ptr(), p.dy.ptr(), p.x.ptr(), p.pb.n, p.pb.i, p.pb.o, p.pb.ldx, acc,
          ws.buf.as<void>(), ws.buf.bytes(), s);
  };
  auto fresh = [&] {
    if (acc) {
      p.reset();
    } else {
      p.dw.poison();
    }
  };
  fresh();
  run(nullptr);
  const std::vector<double> first = p.dw.download();
  r.check(what + " dY^T X", p.checked(first), p.reference(acc), kTol);
  fresh();
  run(nullptr);
  r.same_bits(what + " twice", p.dw.download(), first);
  fresh();
  run_in_graph(run);
  r.same_bits(what + " from a graph", p.dw.download(), first);
  if (!acc) check_hoisted(r, k, p, what, first);
}

// Operands a kernel cannot take must be refused with std::invalid_argument, not run.
void check_refusals(Report& r, std::mt19937_64& rng) {
  Kernel k({Kernel::Tile::kCooperative128x128, Kernel::Split::kSplitK, 2});
  Product p(rng, Problem{256, 96, 128, 104, 1});
  Workspace ws(k, p.pb);
  void* w = ws.buf.as<void>();
  const size_t bytes = ws.buf.bytes();
  auto refused = [&](const std::string& what, float* dw, const bf16* dy, int i, int o, int ldx,
                     void* wp, size_t wb) {
    try {
      k.run(dw, dy, p.x.ptr(), 256, i, o, ldx, false, wp, wb, nullptr);
      r.fail(what + ": ran instead of being refused");
    } catch (const std::invalid_argument& e) {
      std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
    }
  };
  refused("I not a multiple of 8", p.dw.ptr(), p.dy.ptr(), 92, 128, 104, w, bytes);
  refused("O not a multiple of 8", p.dw.ptr(), p.dy.ptr(), 96, 124, 104, w, bytes);
  refused("X's stride not a multiple of 8", p.dw.ptr(), p.dy.ptr(), 96, 128, 100, w, bytes);
  refused("X's stride below I", p.dw.ptr(), p.dy.ptr(), 96, 128, 88, w, bytes);
  refused("dW not on 16 bytes", p.dw.ptr() + 1, p.dy.ptr(), 96, 128, 104, w, bytes);
  refused("dY not on 16 bytes", p.dw.ptr(), p.dy.ptr() + 1, 96, 128, 104, w, bytes);
  refused("no dW", nullptr, p.dy.ptr(), 96, 128, 104, w, bytes);
  refused("workspace too small", p.dw.ptr(), p.dy.ptr(), 96, 128, 104, w,
          k.workspace_bytes(256, 96, 128) - 1);
  refused("no workspace", p.dw.ptr(), p.dy.ptr(), 96, 128, 104, nullptr, bytes);
  try {
    Kernel bad({Kernel::Tile::kPingpong128x112, Kernel::Split::kStreamK, 1});
    r.fail("a ping-pong stream-K variant: built instead of being refused");
  } catch (const std::invalid_argument& e) {
    std::printf("ok   %-44s refused: %s\n", "a ping-pong stream-K variant", e.what());
  }
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!Kernel::supports(device)) {
      std::printf("SKIPPED: the CUTLASS weight gradients run on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_weight_grad_check: seed %llu\n",
                static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    Report r;
    std::vector<std::unique_ptr<Kernel>> kernels;
    for (const Kernel::Variant& v : Kernel::all_variants())
      kernels.push_back(std::make_unique<Kernel>(v));
    const Problem problems[] = {
        {16384, 776, 2304, 832, 383},   // qkv with the ones column
        {16384, 776, 3072, 832, 511},   // fc1 with the ones column
        {16384, 3072, 768, 3072, 127},  // fc2
        {16384, 768, 768, 768, 127},    // attention projection
        // No tile divides it: 328 positions (K, 64-deep), 264 of 280 columns, 200 rows.
        {328, 264, 200, 280, 3},
    };
    for (const Problem& pb : problems) {
      Product p(rng, pb);
      for (auto& k : kernels) {
        check_mode(r, *k, p, false);
        check_mode(r, *k, p, true);
      }
    }
    check_refusals(r, rng);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
