#pragma once
// LayerNorm in float64 on the host at layernorm_bench's shapes, from the bench's inputs (bf16
// widened exactly, fp32 statistics as the kernels read them): what the bench measures every
// kernel's error against.

#include <cstddef>
#include <vector>

namespace railyard::bench {

// n values of a device buffer as float (bf16 widened exactly); waits for the device first.
std::vector<float> download_floats(const void* device, size_t n, bool bf16);

// v rounded to the nearest bf16 (ties to even), as the kernels store it.
double round_to_bf16(double v);

// out = LN(x) w + b (eps 1e-5), the statistics of x.
struct ForwardFloat64 {
  std::vector<double> out, mean, rstd;
};
ForwardFloat64 layernorm_forward_float64(const std::vector<float>& x, const std::vector<float>& w,
                                         const std::vector<float>& b, int N, int C);

// dx = dLN/dx^T dy (+ dx0 where given), dw = sum dy xhat, db = sum dy, dsum = the column sums
// of dx as stored (each rounded to bf16), with the given fp32 statistics.
struct BackwardFloat64 {
  std::vector<double> dx, dw, db, dsum;
};
BackwardFloat64 layernorm_backward_float64(const std::vector<float>& dy,
                                           const std::vector<float>& x,
                                           const std::vector<float>& w,
                                           const std::vector<float>& mean,
                                           const std::vector<float>& rstd,
                                           const std::vector<float>* dx0, int N, int C);

// max |a - ref| / max |ref| over rows x cols (a's rows lda apart, ref's cols); 0 where both are
// all zeros, infinite where a holds a value that is not finite.
double relative_error(const std::vector<float>& a, const std::vector<double>& ref, int rows,
                      int cols, int lda);

}  // namespace railyard::bench
