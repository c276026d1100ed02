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

struct Setup {
  railyard::GptConfig cfg;
  railyard::EngineOptions opts;
  int steps = 5;
};

Setup parse(int argc, char** argv) {
  Setup s;
  s.cfg.layers = int_arg(argc, argv, "--layers", 4);
  s.cfg.dim = int_arg(argc, argv, "--dim", 256);
  s.cfg.heads = int_arg(argc, argv, "--heads", 4);
  s.opts.seq = int_arg(argc, argv, "--seq", 256);
  s.opts.micro_batch = int_arg(argc, argv, "--batch", 4);
  s.cfg.vocab = int_arg(argc, argv, "--vocab", 256);
  s.cfg.padded_vocab = (s.cfg.vocab + 127) / 128 * 128;
  s.cfg.max_seq = s.opts.seq;
  s.steps = int_arg(argc, argv, "--steps", 5);
  s.opts.cpu_threads = int_arg(argc, argv, "--threads", 0);
  return s;
}

struct Row {
  const char* name;
  double wall, cpu;
};

// The kernels of one layer (or of the head) with the model's shapes, each timed and counted as
// often as a step runs it.
class KernelProfile {
 public:
  KernelProfile(const railyard::GptConfig& cfg, int B, int T, int reps)
      : B_(B),
        T_(T),
        N_(B * T),
        C_(cfg.dim),
        H_(cfg.heads),
        V_(cfg.vocab),
        Vp_(cfg.padded_vocab),
        reps_(reps) {
    const size_t N = static_cast<size_t>(N_), C = static_cast<size_t>(C_);
    x_.assign(N * 4 * C, 0.01f);
    y_.resize(x_.size());
    dx_.resize(x_.size());
    w_.assign(16 * C * C, 0.01f);
    dw_.resize(w_.size());
    bias_.assign(4 * C, 0.0f);
    db_.resize(bias_.size());
    qkv_.resize(3 * N * C);
    for (size_t i = 0; i < qkv_.size(); ++i) qkv_[i] = 0.001f * static_cast<float>(i % 97);
    att_.resize(static_cast<size_t>(B) * H_ * T * T);
    logits_.resize(N * Vp_);
    wte_.assign(static_cast<size_t>(Vp_) * C, 0.01f);
    mean_.resize(N);
    rstd_.resize(N);
    losses_.resize(N);
    dl_.assign(N, 1.0f / static_cast<float>(N));
  }

  void row(const char* name, int times, const std::function<void()>& f) {
    double cpu = 0;
    const double wall = seconds_of(f, reps_, &cpu);
    rows_.push_back({name, times * wall, times * cpu});
  }
  void layers(int L);
  void head(const std::vector<int32_t>& targets);
  const std::vector<Row>& rows() const { return rows_; }

 private:
  void mm(int ic, int oc) {
    railyard::cpu::matmul_forward(y_.data(), x_.data(), w_.data(), bias_.data(), N_, ic, oc);
  }
  void mmb(int ic, int oc) {
    railyard::cpu::matmul_backward(dx_.data(), dw_.data(), db_.data(), x_.data(), y_.data(),
                                   w_.data(), N_, ic, oc);
  }

  int B_, T_, N_, C_, H_, V_, Vp_, reps_;
  std::vector<float> x_, y_, dx_, w_, dw_, bias_, db_, qkv_, att_, logits_, wte_, mean_, rstd_,
      losses_, dl_;
  std::vector<Row> rows_;
};

void KernelProfile::layers(int L) {
  namespace cpu = railyard::cpu;
  const int C = C_, N = N_;
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
      [&] { cpu::attention_forward(y_.data(), att_.data(), qkv_.data(), B_, T_, C, H_); });
  row("attention bwd", L, [&] {
    cpu::attention_backward(dx_.data(), y_.data(), qkv_.data(), att_.data(), B_, T_, C, H_);
  });
  row("layernorm fwd+bwd", 2 * L + 1, [&] {
    cpu::layernorm_forward(y_.data(), mean_.data(), rstd_.data(), x_.data(), w_.data(),
                           bias_.data(), N, C);
    cpu::layernorm_backward(dx_.data(), dw_.data(), db_.data(), y_.data(), x_.data(), w_.data(),
                            mean_.data(), rstd_.data(), N, C);
  });
  row("gelu fwd+bwd", L, [&] {
    cpu::gelu_forward(y_.data(), x_.data(), 4 * static_cast<int64_t>(N) * C);
    cpu::gelu_backward(dx_.data(), x_.data(), y_.data(), 4 * static_cast<int64_t>(N) * C);
  });
  row("residual fwd", 2 * L,
      [&] { cpu::residual_forward(y_.data(), x_.data(), y_.data(), N * C); });
}

void KernelProfile::head(const std::vector<int32_t>& targets) {
  namespace cpu = railyard::cpu;
  row("lm head matmul fwd+bwd", 1, [&] {
    cpu::matmul_forward(logits_.data(), x_.data(), wte_.data(), static_cast<const float*>(nullptr),
                        N_, C_, Vp_);
    cpu::matmul_backward(dx_.data(), wte_.data(), static_cast<float*>(nullptr), logits_.data(),
                         x_.data(), wte_.data(), N_, C_, Vp_);
  });
  row("softmax cross-entropy fwd+bwd", 1, [&] {
    cpu::softmax_crossentropy_forward(losses_.data(), logits_.data(), logits_.data(),
                                      targets.data(), N_, V_, Vp_);
    cpu::softmax_crossentropy_backward(logits_.data(), logits_.data(), dl_.data(), targets.data(),
                                       N_, V_, Vp_);
  });
}

void print_rows(const std::vector<Row>& rows, double step_s, double step_cpu) {
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
}

// Full steps (forward, backward, exchange, AdamW): wall seconds per step, CPU seconds in *cpu.
double time_steps(railyard::CpuEngine& engine, const std::vector<int32_t>& tokens,
                  const std::vector<int32_t>& targets, const Setup& s, double* cpu) {
  const int B = s.opts.micro_batch, T = s.opts.seq;
  auto step = [&] {
    engine.zero_grad();
    engine.forward_backward(tokens, targets, B, T, 1.0f, true);
    engine.reduce_gradients();
    engine.optimizer_step(railyard::AdamWParams{}, 1e-4f);
  };
  return seconds_of(step, s.steps, cpu);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace railyard;
  const Setup s = parse(argc, argv);
  const GptConfig& cfg = s.cfg;
  const int B = s.opts.micro_batch, T = s.opts.seq;
  Communicator& comm = Communicator::world();
  CpuEngine engine(cfg, s.opts, comm, 1);
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
  double step_cpu = 0;
  const double step_s = time_steps(engine, tokens, targets, s, &step_cpu);
  const double tok_s = static_cast<double>(n) * comm.size() / step_s;
  if (root) {
    std::printf(
        "step: %.1f ms wall, %.1f ms CPU (rank 0, all its threads); %.0f tokens/s wall "
        "(all ranks), %.0f tokens per CPU-second; %.2f GFLOP/s (model FLOPs, wall)\n",
        step_s * 1e3, step_cpu * 1e3, tok_s, static_cast<double>(n) / step_cpu,
        tok_s * cfg.flops_per_token(T) / 1e9);
  }
  if (comm.size() > 1) {
    const double reduce_s = seconds_of([&] { engine.reduce_gradients(); }, s.steps);
    if (root) std::printf("gradient all-reduce alone: %.1f ms wall\n", reduce_s * 1e3);
    return 0;  // the kernel profile below is a one-rank measurement
  }
  const double fwd_s = seconds_of([&] { engine.evaluate(tokens, targets, B, T); }, s.steps);
  std::printf("forward only: %.1f ms\n", fwd_s * 1e3);

  KernelProfile prof(cfg, B, T, std::max(1, s.steps));
  prof.layers(cfg.layers);
  prof.head(targets);
  std::vector<float> p(engine.layout().total()), g(p.size(), 1e-3f), m(p.size()), v(p.size());
  prof.row("adamw + grad norm", 1, [&] {
    adamw_step(engine.layout(), p.data(), g.data(), m.data(), v.data(), AdamWParams{}, 1e-4f, 1.0f,
               1);
    global_norm(g.data(), g.size());
  });
  print_rows(prof.rows(), step_s, step_cpu);
  return 0;
}
