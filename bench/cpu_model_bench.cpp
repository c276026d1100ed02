// Training throughput of the CPU engine, and where the time goes per kernel. Under mpirun each
// rank trains its own batch and the gradients are averaged, as in railyard-train; rank 0
// reports the global rate.
//
//   cpu_model_bench [--layers 4] [--dim 256] [--heads 4] [--seq 256] [--batch 4] [--vocab 256]
//                   [--steps 5] [--threads 0]
//
// Prints tokens/s of full steps (forward, backward, AdamW) and a per-kernel profile measured
// by running each layer function with the model's shapes (one layer's worth, scaled by the
// layer count), so the table adds up to roughly one step.

#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "railyard/communicator.hpp"
#include "railyard/cpu_engine.hpp"
#include "railyard/cpu_kernels.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Mean wall seconds per call, and the process CPU seconds per call (all threads) in *cpu: on
// a loaded machine the CPU time of a single-threaded run is the steadier number.
double seconds_of(const std::function<void()>& f, int reps, double* cpu = nullptr) {
  f();  // warm caches and BLAS buffers
  const double c0 = cpu_now();
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) f();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count() / reps;
  if (cpu != nullptr) *cpu = (cpu_now() - c0) / reps;
  return wall;
}

int int_arg(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) {
      char* end = nullptr;
      const long v = std::strtol(argv[i + 1], &end, 10);
      if (*end != '\0' || v < 0) {
        std::fprintf(stderr, "%s: expected a non-negative integer, got '%s'\n", name, argv[i + 1]);
        std::exit(2);
      }
      return static_cast<int>(v);
    }
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace railyard;
  GptConfig cfg;
  cfg.layers = int_arg(argc, argv, "--layers", 4);
  cfg.dim = int_arg(argc, argv, "--dim", 256);
  cfg.heads = int_arg(argc, argv, "--heads", 4);
  const int T = int_arg(argc, argv, "--seq", 256);
  const int B = int_arg(argc, argv, "--batch", 4);
  cfg.vocab = int_arg(argc, argv, "--vocab", 256);
  cfg.padded_vocab = (cfg.vocab + 127) / 128 * 128;
  cfg.max_seq = T;
  const int steps = int_arg(argc, argv, "--steps", 5);
  EngineOptions opts;
  opts.micro_batch = B;
  opts.seq = T;
  opts.cpu_threads = int_arg(argc, argv, "--threads", 0);

  Communicator& comm = Communicator::world();
  CpuEngine engine(cfg, opts, comm, 1);
  const size_t n = static_cast<size_t>(B) * T;
  std::vector<int32_t> tokens(n), targets(n);
  std::mt19937 gen(1);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<int32_t>(gen() % cfg.vocab);
  for (size_t i = 0; i < n; ++i) targets[i] = tokens[(i + 1) % n];

  const bool root = comm.rank() == 0;
  if (root) {
    std::printf("model: %d layers, dim %d, %d heads, vocab %d (padded %d), %zu parameters\n",
                cfg.layers, cfg.dim, cfg.heads, cfg.vocab, cfg.padded_vocab,
                engine.layout().total());
    std::printf("batch %d x seq %d = %zu tokens/step per rank, %d rank(s), %s\n", B, T, n,
                comm.size(), engine.describe().c_str());
  }

  auto step = [&] {
    engine.zero_grad();
    engine.forward_backward(tokens, targets, B, T, 1.0f, true);
    engine.reduce_gradients();
    engine.optimizer_step(AdamWParams{}, 1e-4f);
  };
  double step_cpu = 0;
  const double step_s = seconds_of(step, steps, &step_cpu);
  const double tok_s = static_cast<double>(n) * comm.size() / step_s;
  if (root) {
    std::printf(
        "step: %.1f ms wall, %.1f ms CPU (rank 0, all its threads); %.0f tokens/s wall "
        "(all ranks), %.0f tokens per CPU-second; %.2f GFLOP/s (model FLOPs, wall)\n",
        step_s * 1e3, step_cpu * 1e3, tok_s, static_cast<double>(n) / step_cpu,
        tok_s * cfg.flops_per_token(T) / 1e9);
  }
  if (comm.size() > 1) {
    const double reduce_s = seconds_of([&] { engine.reduce_gradients(); }, steps);
    if (root) std::printf("gradient all-reduce alone: %.1f ms wall\n", reduce_s * 1e3);
    return 0;  // the kernel profile below is a one-rank measurement
  }
  const double fwd_s = seconds_of([&] { engine.evaluate(tokens, targets, B, T); }, steps);
  std::printf("forward only: %.1f ms\n", fwd_s * 1e3);

  // Per-kernel profile with the model's shapes.
  const int N = B * T, C = cfg.dim, L = cfg.layers, H = cfg.heads, Vp = cfg.padded_vocab;
  std::vector<float> x(static_cast<size_t>(N) * 4 * C, 0.01f), y(x.size()), w(16 * C * C, 0.01f),
      bias(4 * C, 0.0f), dx(x.size()), dw(w.size()), db(bias.size()),
      qkv(3 * static_cast<size_t>(N) * C), att(static_cast<size_t>(B) * H * T * T),
      scratch(static_cast<size_t>(T) * T), logits(static_cast<size_t>(N) * Vp),
      wte(static_cast<size_t>(Vp) * C, 0.01f), mean(N), rstd(N), losses(N), dl(N, 1.0f / N);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.001f * static_cast<float>(i % 97);
  const int reps = std::max(1, steps);
  struct Row {
    const char* name;
    double wall, cpu;
  };
  std::vector<Row> rows;
  // Times f (the kernels of one layer, or of the head) and counts it `times` per step.
  auto row = [&](const char* name, int times, const std::function<void()>& f) {
    double cpu = 0;
    const double wall = seconds_of(f, reps, &cpu);
    rows.push_back({name, times * wall, times * cpu});
  };
  auto mm = [&](int ic, int oc) {
    cpu::matmul_forward(y.data(), x.data(), w.data(), bias.data(), N, ic, oc);
  };
  auto mmb = [&](int ic, int oc) {
    cpu::matmul_backward(dx.data(), dw.data(), db.data(), x.data(), y.data(), w.data(), N, ic, oc);
  };
  row("matmul fwd (qkv, proj, fc, fcproj)", L, [&] {
    mm(C, 3 * C);
    mm(C, C);
    mm(C, 4 * C);
    mm(4 * C, C);
  });
  row("matmul bwd", L, [&] {
    mmb(C, 3 * C);
    mmb(C, C);
    mmb(C, 4 * C);
    mmb(4 * C, C);
  });
  row("attention fwd", L,
      [&] { cpu::attention_forward(y.data(), att.data(), qkv.data(), B, T, C, H); });
  row("attention bwd", L, [&] {
    cpu::attention_backward(dx.data(), scratch.data(), y.data(), qkv.data(), att.data(), B, T, C,
                            H);
  });
  row("layernorm fwd+bwd", 2 * L + 1, [&] {
    cpu::layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N,
                           C);
    cpu::layernorm_backward(dx.data(), dw.data(), db.data(), y.data(), x.data(), w.data(),
                            mean.data(), rstd.data(), N, C);
  });
  row("gelu fwd+bwd", L, [&] {
    cpu::gelu_forward(y.data(), x.data(), 4 * static_cast<int64_t>(N) * C);
    cpu::gelu_backward(dx.data(), x.data(), y.data(), 4 * static_cast<int64_t>(N) * C);
  });
  row("residual fwd", 2 * L, [&] { cpu::residual_forward(y.data(), x.data(), y.data(), N * C); });
  row("lm head matmul fwd+bwd", 1, [&] {
    cpu::matmul_forward(logits.data(), x.data(), wte.data(), static_cast<const float*>(nullptr), N,
                        C, Vp);
    cpu::matmul_backward(dx.data(), wte.data(), static_cast<float*>(nullptr), logits.data(),
                         x.data(), wte.data(), N, C, Vp);
  });
  row("softmax cross-entropy fwd+bwd", 1, [&] {
    cpu::softmax_crossentropy_forward(losses.data(), logits.data(), logits.data(), targets.data(),
                                      N, cfg.vocab, Vp);
    cpu::softmax_crossentropy_backward(logits.data(), logits.data(), dl.data(), targets.data(), N,
                                       cfg.vocab, Vp);
  });
  std::vector<float> p(engine.layout().total()), g(p.size(), 1e-3f), m(p.size()), v(p.size());
  row("adamw + grad norm", 1, [&] {
    adamw_step(engine.layout(), p.data(), g.data(), m.data(), v.data(), AdamWParams{}, 1e-4f, 1.0f,
               1);
    global_norm(g.data(), g.size());
  });
  double total_wall = 0, total_cpu = 0;
  for (const Row& r : rows) {
    total_wall += r.wall;
    total_cpu += r.cpu;
  }
  std::printf("\nkernel profile (model shapes, summed over layers):\n");
  std::printf("  %-36s %10s %10s %7s\n", "", "wall ms", "CPU ms", "CPU %");
  for (const Row& r : rows) {
    std::printf("  %-36s %10.2f %10.2f %6.1f%%\n", r.name, r.wall * 1e3, r.cpu * 1e3,
                100.0 * r.cpu / total_cpu);
  }
  std::printf("  %-36s %10.2f %10.2f  (measured step: %.2f wall, %.2f CPU)\n", "sum",
              total_wall * 1e3, total_cpu * 1e3, step_s * 1e3, step_cpu * 1e3);
  return 0;
}
