#pragma once
// The LM head's chunk plan (issue 12): the head and the loss run over the N positions of a batch
// in chunks, so that only one chunk's logits (rows x padded vocabulary) exist at a time. The
// engine (cuda_engine.cpp: the logits buffer's size and loss_head's loop) and the cuBLASLt survey
// (bench/gemm_step_survey.cpp, whose picks key the pin table by the chunk's rows) both take the
// plan from here, so the pinned shapes are the ones the engine runs.
//
// What it promises: the fewest chunks whose logits each fit kHeadLogitsBudget bytes; every chunk
// but the last has `rows` positions, a multiple of kHeadRowsAlign unless one chunk holds all N
// (then rows = N); the last has the rest, between 1 and `rows`; the chunks are as equal as the
// alignment allows (16384 positions of 50304 bf16 logits: 5504, 5504, 5376). Host code only.
// Refuses (std::invalid_argument, naming the fix) N or the row size not positive, a budget below
// kHeadRowsAlign rows, and a chunk of 2^31 logits or more (cuBLASLt's and CUTLASS's int extents,
// the cross-entropy kernel's grid).

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace railyard::cuda {

// 576 MiB of logits per chunk: GPT-2's 16 x 1024 positions at the 50304 padded vocabulary in bf16
// then run in 3 chunks of at most 5504 rows (528 MiB), one "+=" pass over wte's 154 MB fp32
// gradient and one ramp and tail of each head kernel fewer than 4 chunks of 4096; the logits
// outgrow the 478 MB they share with the layer scratch (cuda_engine.cpp, plan_scratch) by 76 MB
// only. 2 chunks (8192 rows, 824 MB) would cost 346 MB more. The A/B with 4 chunks of 4096:
// size_t(4096) * 50304 * 2 here (bench/NOTES.md).
inline constexpr size_t kHeadLogitsBudget = size_t(576) << 20;
// Whole 128-row tiles of the head's products in every chunk but the last.
inline constexpr int64_t kHeadRowsAlign = 128;

struct HeadChunks {
  int64_t rows = 0;   // positions of every chunk but the last, and the logits buffer's rows
  int64_t count = 0;  // chunks
  int64_t last = 0;   // positions of the last chunk
};

inline HeadChunks head_chunks(int64_t positions, int64_t padded_vocab, size_t elem_bytes,
                              size_t budget = kHeadLogitsBudget) {
  const std::string shape = std::to_string(positions) + " positions of " +
                            std::to_string(padded_vocab) + " x " + std::to_string(elem_bytes) +
                            " B logits";
  if (positions < 1 || padded_vocab < 1 || elem_bytes < 1) {
    throw std::invalid_argument("LM head chunks: " + shape + ": each must be positive");
  }
  const size_t row_bytes = size_t(padded_vocab) * elem_bytes;
  HeadChunks h{positions, 1, positions};
  if (size_t(positions) * row_bytes > budget) {
    const int64_t most = int64_t(budget / row_bytes) / kHeadRowsAlign * kHeadRowsAlign;
    if (most == 0) {
      throw std::invalid_argument("LM head chunks: " + shape + ": the budget of " +
                                  std::to_string(budget) + " B holds fewer than " +
                                  std::to_string(kHeadRowsAlign) +
                                  " rows; raise kHeadLogitsBudget (runtime/cuda/head_chunks.hpp)");
    }
    h.count = (positions + most - 1) / most;
    const int64_t even = (positions + h.count - 1) / h.count;
    h.rows = (even + kHeadRowsAlign - 1) / kHeadRowsAlign * kHeadRowsAlign;
    h.last = positions - (h.count - 1) * h.rows;
  }
  if (h.rows * padded_vocab >= (int64_t(1) << 31)) {
    throw std::invalid_argument("LM head chunks: " + shape + ": a chunk of " +
                                std::to_string(h.rows) +
                                " rows has 2^31 logits or more; lower kHeadLogitsBudget "
                                "(runtime/cuda/head_chunks.hpp) or the vocabulary");
  }
  return h;
}

// Positions of chunk i of h (0 <= i < h.count).
inline int64_t head_chunk_rows(const HeadChunks& h, int64_t i) {
  return i + 1 < h.count ? h.rows : h.last;
}

}  // namespace railyard::cuda
