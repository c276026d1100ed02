// The engine's CUTLASS LM-head weight gradient (head_weight_grad_cutlass.hpp) in each of its
// tiles against float64: dW[O,I] = dY[N,O]^T X[N,I] ("=") and dW += dY^T X ("+=", in place) at
// GPT-2 124M's head chunk (the engine's plan at B=16, T=1024, head_chunks.hpp: 5504 positions,
// 50304 vocabulary, 768 wide) and at a small shape no tile divides; the same bits on a second run
// and from a CUDA graph; operands TMA cannot take refused with an error. Exit 77 without a GPU of
// compute capability 9.0 (the kernels are built for sm_90a alone).

#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dtype.hpp"
#include "gpu_check.hpp"
#include "head_chunks.hpp"
#include "head_weight_grad_cutlass.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::bf16;
using Kernel = cuda::CutlassHeadWeightGrad;

namespace {

constexpr double kTol = 1e-5;  // fp32 output: sums of bf16 products in fp32

struct Problem {
  int n, i, o;   // positions, model width, vocabulary
  int row_step;  // every row_step-th row of dW is checked against float64
  std::string name() const {
    return std::to_string(o) + "x" + std::to_string(i) + " over " + std::to_string(n);
  }
};

struct Product {
  Problem pb;
  DevArray<bf16> dy, x;
  DevArray<float> dw;
  std::vector<double> hdy, hx, hinit;
  Product(std::mt19937_64& rng, const Problem& p)
      : pb(p), dy(size_t(p.n) * p.o), x(size_t(p.n) * p.i), dw(size_t(p.o) * p.i) {
    hdy = dy.upload(random_vec(rng, dy.n));
    hx = x.upload(random_vec(rng, x.n));
    hinit = dw.upload(random_vec(rng, dw.n, 4.0f));
  }
  void run(Kernel& k, bool acc, cudaStream_t s) {
    k.run(dw.ptr(), dy.ptr(), x.ptr(), pb.n, pb.i, pb.o, acc, s);
  }
  void reset() { hinit = dw.upload(std::vector<float>(hinit.begin(), hinit.end())); }
  // The checked rows of dY^T X (+ the initial dW where acc), in float64.
  std::vector<double> reference(bool acc) const {
    std::vector<double> out;
    for (int v = 0; v < pb.o; v += pb.row_step) {
      std::vector<double> row(pb.i, 0.0);
      for (int n = 0; n < pb.n; ++n) {
        const double g = hdy[size_t(n) * pb.o + v];
        for (int c = 0; c < pb.i; ++c) row[c] += g * hx[size_t(n) * pb.i + c];
      }
      for (int c = 0; c < pb.i; ++c) row[c] += acc ? hinit[size_t(v) * pb.i + c] : 0.0;
      out.insert(out.end(), row.begin(), row.end());
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

void check_mode(Report& r, Kernel& k, Product& p, bool acc, const std::string& label) {
  const std::string what = label + " " + p.pb.name() + (acc ? " +=" : " =");
  auto call = [&](cudaStream_t s) {
    if (acc) {
      p.reset();
    } else {
      p.dw.poison();
    }
    p.run(k, acc, s);
  };
  call(nullptr);
  const std::vector<double> first = p.dw.download();
  r.check(what + " dY^T X", p.checked(first), p.reference(acc), kTol);
  call(nullptr);
  r.same_bits(what + " twice", p.dw.download(), first);
  if (acc) p.reset();
  if (!acc) p.dw.poison();
  run_in_graph([&](cudaStream_t s) { p.run(k, acc, s); });
  r.same_bits(what + " from a graph", p.dw.download(), first);
}

void check_tile(Report& r, std::mt19937_64& rng, Kernel::Tile tile, const char* label,
                const Problem& pb) {
  Kernel k(tile);
  Product p(rng, pb);
  check_mode(r, k, p, false, label);
  check_mode(r, k, p, true, label);
}

// An operand the kernel cannot take must be refused with std::invalid_argument, not run.
void check_refusals(Report& r, std::mt19937_64& rng) {
  Kernel k;
  Product p(rng, Problem{64, 96, 128, 1});
  auto refused = [&r, &k, &p](const std::string& what, float* dw, const bf16* dy, int i, int o) {
    try {
      k.run(dw, dy, p.x.ptr(), 64, i, o, false, nullptr);
      r.fail(what + ": ran instead of being refused");
    } catch (const std::invalid_argument& e) {
      std::printf("ok   %-44s refused: %s\n", what.c_str(), e.what());
    }
  };
  refused("I not a multiple of 8", p.dw.ptr(), p.dy.ptr(), 92, 128);
  refused("O not a multiple of 8", p.dw.ptr(), p.dy.ptr(), 96, 124);
  refused("dW not on 16 bytes", p.dw.ptr() + 1, p.dy.ptr(), 96, 128);
  refused("dY not on 16 bytes", p.dw.ptr(), p.dy.ptr() + 1, 96, 128);
  refused("no dW", nullptr, p.dy.ptr(), 96, 128);
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!Kernel::supports(device)) {
      std::printf(
          "SKIPPED: the CUTLASS head weight gradient runs on compute capability 9.0 only\n");
      return 77;
    }
    uint64_t seed = std::random_device{}();
    std::printf("gpu_cutlass_head_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    Report r;
    const std::pair<Kernel::Tile, const char*> tiles[] = {
        {Kernel::Tile::kPingpong128x128, "pp128x128"},
        {Kernel::Tile::kCooperative256x128, "co256x128"},
        {Kernel::Tile::kCooperative128x256, "co128x256"}};
    const int gpt2_rows = int(cuda::head_chunks(16 * 1024, 50304, sizeof(bf16)).rows);
    for (const auto& [tile, label] : tiles) {
      check_tile(r, rng, tile, label, Problem{gpt2_rows, 768, 50304, 1571});  // GPT-2's head chunk
      // No tile divides it: 300 positions (K, 64-deep), 264 wide, 1000 rows of vocabulary.
      check_tile(r, rng, tile, label, Problem{300, 264, 1000, 7});
    }
    check_refusals(r, rng);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
