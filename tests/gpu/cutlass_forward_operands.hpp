#pragma once
// The operands of a forward product X[N,I] W[O,I]^T + b as the CUTLASS checks use them
// (gpu_cutlass_check, gpu_cutlass_residual_check): bf16 on the device, X's rows ldx apart with
// the padding (columns I..ldx) NaN, so that a kernel reading it shows; the product in float64 on
// every row_step-th row.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "gpu_check.hpp"
#include "railyard/cpu_kernels.hpp"

namespace railyard::gpu_check {

struct ForwardShape {
  int n, i, o, ldx;
  int row_step;  // every row_step-th row is checked against float64
  std::string name() const {
    return std::to_string(n) + "x" + std::to_string(o) + "x" + std::to_string(i) + " ldx " +
           std::to_string(ldx);
  }
};

struct ForwardOperands {
  ForwardShape sh;
  DevArray<cuda::bf16> x, w, b;
  std::vector<double> hx, hw, hb;
  ForwardOperands(std::mt19937_64& rng, const ForwardShape& s)
      : sh(s), x(size_t(s.n) * s.ldx), w(size_t(s.o) * s.i), b(s.o) {
    std::vector<float> vx = random_vec(rng, x.n);
    for (int r = 0; r < s.n; ++r) {
      for (int c = s.i; c < s.ldx; ++c) vx[size_t(r) * s.ldx + c] = std::nanf("");
    }
    hx = x.upload(vx);
    hw = w.upload(random_vec(rng, w.n, 0.05f));
    hb = b.upload(random_vec(rng, b.n));
  }
  std::vector<int> checked_rows() const {
    std::vector<int> rows;
    for (int n = 0; n < sh.n; n += sh.row_step) rows.push_back(n);
    return rows;
  }
  // X W^T + b on checked_rows(), [rows, O].
  std::vector<double> reference() const {
    std::vector<double> xs;
    const std::vector<int> rows = checked_rows();
    for (int n : rows) {
      xs.insert(xs.end(), hx.begin() + ptrdiff_t(n) * sh.ldx,
                hx.begin() + ptrdiff_t(n) * sh.ldx + sh.i);
    }
    std::vector<double> out(rows.size() * size_t(sh.o));
    cpu::matmul_forward<double>(out.data(), xs.data(), hw.data(), hb.data(), int(rows.size()), sh.i,
                                sh.o);
    return out;
  }
  // The checked rows of an [N, O] output.
  std::vector<double> checked(const std::vector<double>& out) const {
    std::vector<double> picked;
    for (int n : checked_rows()) {
      picked.insert(picked.end(), out.begin() + ptrdiff_t(n) * sh.o,
                    out.begin() + ptrdiff_t(n + 1) * sh.o);
    }
    return picked;
  }
};

}  // namespace railyard::gpu_check
