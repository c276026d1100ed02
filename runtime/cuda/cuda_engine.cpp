#include "railyard/cuda_engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "adamw_kernels.hpp"
#include "allocation_plan.hpp"
#include "attention.hpp"
#include "attention_stagger.hpp"
#if RAILYARD_HAVE_CUDNN
#include "attention_cudnn.hpp"
#endif
#include "convert_kernels.hpp"
#include "cross_entropy_kernels.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "device_snapshot.hpp"
#include "dtype.hpp"
#include "embedding_kernels.hpp"
#if RAILYARD_HAVE_CUTLASS
#include "gelu_gemm_cutlass.hpp"
#include "head_weight_grad_cutlass.hpp"
#include "residual_gemm_cutlass.hpp"
#endif
#include "gelu_kernels.hpp"
#include "grad_norm_kernels.hpp"
#include "gradient_exchange.hpp"
#include "head_chunks.hpp"
#include "input_pipeline.hpp"
#include "layernorm_kernels.hpp"
#include "matmul_cublaslt.hpp"
#include "nccl_comm.hpp"
#include "ones_column_kernels.hpp"
#include "railyard/adamw.hpp"
#include "railyard/communicator.hpp"
#include "railyard/contract_env.hpp"
#include "railyard/memory_alert.hpp"
#include "step_graph.hpp"

namespace railyard {
namespace cuda {
namespace {

// The second passes of the LayerNorm backwards' parameter sums (LayerNorm weight and bias, and
// the projection bias gradient fused there): leaves only the optimizer reads, so backward queues
// them and sums them in one launch where they are due (the end, or before each bucket of the
// gradient exchange), each LayerNorm backward's partials in a region of their own (2 L + 1
// regions, 1.2 MB each for GPT-2 124M at 16 x 1024). Same sums, same order, same bits.
// false (the A/B switch): one launch after each LayerNorm backward, one partials region.
constexpr bool kDeferColumnSums = true;

// The gradient norm's share of the qkv and fc weight and bias gradients (40% of GPT-2's) summed
// by the kernels that write them (split_ones_column_product, per-block slots), so that the
// norm's own pass reads only the rest (about 300 of 498 MB). Only where those values are the
// final gradients: one rank without the exchange (an all-reduce changes them after the split).
// The norm's partition differs from the full pass's: other bits, the same every run.
// false (the A/B switch): the full pass over every gradient.
constexpr bool kNormFromSplits = true;

// With kNormFromSplits, the norm's pass, the fixed-order sum of its slots and the clip factor in
// one launch (grad_sumsq_ranges_clip: the last block to finish adds the slots and takes the
// factor), instead of three: between the backward and AdamW, two launches (2.4 + 1.1 us) and the
// idle time around them (~3 us) fewer. Same bits. false (the A/B switch): three launches.
constexpr bool kFusedNormClip = true;

// The forward reads the batch's tokens and targets in the input pipeline's slot (two, used in
// turn) instead of a copy into one fixed buffer: one device-to-device copy (~2 us, and its
// launch gap) fewer a step, one more forward graph (a graph per slot: StepKey::input). Same
// bits. false (the A/B switch): the copy, one forward graph.
constexpr bool kForwardReadsInputSlot = true;

// The token order's copy to the device (sorted on the host while the forward runs) as a branch
// of the backward graph, beside its first kernels and joined before the embedding backward,
// instead of a copy on the input pipeline's stream that the compute stream waits for between
// the forward and backward graphs: that event wait sat in the step's largest gap (6.7 us between
// the graphs). One backward graph per input slot (StepKey::input: the copy reads the slot's
// host staging). Same bits. false (the A/B switch): the wait between the graphs.
constexpr bool kOrderCopyInBackward = true;

// The start line's words for the two switches above; the fused norm needs kNormFromSplits.
std::string step_edges_description(bool norm_from_splits) {
  std::string d;
  if (kFusedNormClip) {
    d += norm_from_splits ? " norm-clip:fused" : " norm-clip:3-launches (full pass)";
  }
  if (kForwardReadsInputSlot) d += " input:in-slot";
  if (kOrderCopyInBackward) d += " token-order:in-backward";
  return d;
}

// cuDNN's attention calls at staggered workspaces, so that the small memsets each issues into
// its workspace (24 a GPT-2 step, each a ~1.6 us kernel in the graphs) are hoisted to one zeroing
// kernel at the head of each step graph (memset_stagger.hpp, attention_stagger.hpp). Needs the
// graphs; same bits (a memset writes constants). false (the A/B switch): one shared workspace,
// the memsets in place. The stagger takes at most kAttentionStaggerBudget bytes a direction,
// reserved in the layer scratch (which the larger LM-head logits chunk overlays at GPT-2's size:
// no memory of its own there). 16 MiB: cuDNN 9.14's backward memsets end 768 KiB into its
// workspace on an H200 at B=16 T=1024, 12 x 768 KiB apart (4 MiB kept them in place).
constexpr bool kStaggerAttentionWorkspace = true;
constexpr size_t kAttentionStaggerBudget = size_t(16) << 20;

// The attention projection's weight gradients (dW = dh^T atty, 768 x 768 for GPT-2) of this many
// consecutive layers as one strided-batch product: one alone is 36 output tiles for an H200's
// 132 multiprocessors, so cuBLASLt splits its K in 4 and adds the parts in a kernel of its own;
// 3 are 108 tiles, one wave, no split. Groups from the top (L-1..L-3, ...; the lowest smaller
// where L is not a multiple), the batch issued at the group's lowest layer. Each layer's dh (the
// residual gradient after its ln2 backward) must live until then: the residual gradient rotates
// through one buffer per layer of the group (ln1's backward writes the layer below's buffer
// instead of adding in place). Only where no gradient exchange runs during the backward and
// without --recompute (proj_group_). 1 (the A/B switch): one product per layer, one buffer.
constexpr int kProjWeightGroup = 3;

#if RAILYARD_HAVE_CUTLASS
// The attention projection's forward (bf16 on compute capability 9.0): CUTLASS's residual kernel
// (true) or cuBLASLt's beta-1 product (false). One line, so that one tree times both.
constexpr bool kCutlassResidualForward = true;
// The LM head's weight gradient "+=" (bf16 on compute capability 9.0): CUTLASS's kernel (true),
// whose epilogue runs under its other warp group's products, or cuBLASLt's (false). One line.
constexpr bool kCutlassHeadWeightGrad = true;
#endif

// Device 0 when the plugin bound the task (it rotates CUDA_VISIBLE_DEVICES so the task's GPU
// comes first and says so in RAILYARD_GPU_PCI), else local rank modulo the devices visible.
int select_device(const Communicator& comm) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    throw std::runtime_error("--device cuda: no usable GPU (" +
                             std::string(cudaGetErrorString(err)) +
                             "); check CUDA_VISIBLE_DEVICES and the driver, or use --device cpu");
  }
  const char* bound = std::getenv(contract_env::kGpuPci);
  if (bound != nullptr && *bound != '\0') return 0;
  return comm.local_rank() % count;
}

struct LayerParams {
  size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, mpw, mpb;
  size_t begin, end;  // the layer's slice of the flat buffer (its gradient bucket)
};

template <typename T>
struct LayerActs {
  T* resid;  // the layer's input (the residual stream)
  // ln1 and ln2 are [N, ln_ld_] with a ones column after their C (the qkv and fc bias gradients
  // come out of the weight gradients' products: ones_column_kernels.hpp).
  T* ln1;
  float *ln1_mean, *ln1_rstd;
  T* qkvp;       // q, k, v per head; with cuDNN the projection's output [N, 3, H, hd] itself
  T* probs;      // attention probabilities (built-in attention only)
  float* stats;  // softmax log-sum-exp per row (cuDNN attention only)
  T* atty;       // attention output, heads side by side
  T* resid_mid;
  T* ln2;
  float *ln2_mean, *ln2_rstd;
  T* fc;    // MLP pre-activation
  T* gelu;  // MLP activation
};

template <typename T>
class CudaEngine final : public Engine {
 public:
  CudaEngine(const GptConfig& cfg, const EngineOptions& opts, Communicator& comm, uint64_t seed);
  ~CudaEngine() override;

  const GptConfig& config() const override { return cfg_; }
  const ParamLayout& layout() const override { return layout_; }
  std::string describe() const override { return describe_ + " " + graphs_->describe(); }

  void zero_grad() override;
  float forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int Tn, float grad_scale, bool last_micro_step) override;
  float evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                 int Tn) override;
  void reduce_gradients() override;
  float optimizer_step(const AdamWParams& hp, float lr) override;
  void save_state(ModelState& out) override;
  std::shared_ptr<StateSnapshot> snapshot_state(bool training_continues) override;
  // With --zero 1 on several ranks the snapshot holds this rank's shard of the moments; the
  // store writes it into a part file of its own (docs/checkpoint-format.md).
  std::string checkpoint_note() const override { return snapshots_->note(); }
  void load_state(const ModelState& in) override;
  std::pair<size_t, size_t> device_memory() const override;

 private:
  static constexpr bool kFp32 = std::is_same_v<T, float>;

  // Where one layer's activations lie in the allocation plan.
  struct LayerOffsets {
    size_t resid, ln1, ln1m, ln1r, qkvp, probs, stats, atty, mid, ln2, ln2m, ln2r, fc, gelu;
  };
  // Construction, in order: the options checked, the parameters located in the flat buffer and
  // sharded, the memory planned, the state initialised, the gradient exchange set up.
  void check_options() const;
  void locate_params();
  void shard_params();
  void init_state(uint64_t seed);
  void setup_exchange();
  // The flat gradient buffer cut into the exchange's buckets: one per layer, then the
  // embeddings (embedding_bucket(), final only after the whole backward), then the final
  // LayerNorm (final first).
  std::vector<GradBucket> grad_buckets() const;
  size_t embedding_bucket() const { return size_t(L_); }
  // Offsets in the allocation plan of the step's state (weights, gradients, moments, inputs,
  // losses) and of the buffers outside the layers (final LayerNorm, logits and scratch).
  struct StateOffsets {
    size_t master, grads, m, v, decay, compute, rs, norm, clip, ticket, step_batch, loss;
    std::array<size_t, 2> batch;
  };
  struct ScratchOffsets {
    size_t rfinal, lnf, lnfm, lnfr, logits, qkv, attn_ws, d4, dA, oh, dprobs, dqkvp, dB, dresid,
        partials, wb_prod, norm_slots, split_sumsq, norm_ranges, emb_partials;
    size_t attn_region_bytes, d4_bytes;  // the region cuDNN's workspace and d4 share (fused)
  };
  void plan_memory();
  StateOffsets plan_state(AllocationPlan& plan) const;
  void bind_state(const StateOffsets& so);
  ScratchOffsets plan_scratch(AllocationPlan& plan, bool fused, size_t attn_ws) const;
  void bind_scratch(const ScratchOffsets& sc, bool fused, size_t attn_ws);
  std::vector<LayerOffsets> plan_layers(AllocationPlan& plan, bool fused) const;
  void bind_layers(const std::vector<LayerOffsets>& lo, bool fused);
  // Throws the out-of-memory message (the plan, the batch, what to change) when it does not fit.
  void check_plan_fits(const AllocationPlan& plan) const;
  int check_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                  int Tn) const;
  void forward(int B, int Tn);
  // The LM head and the loss, in chunks of head_.rows positions so only one chunk's logits exist
  // at a time; with grad, also the head's backward: dlnf into dB_, the wte gradient (+)= .
  void loss_head(int N, float dscale, bool grad, bool acc);
  void head_weight_grad(const T* x, int rows, bool acc);
  // The attention block of layer l: from ln1 to atty, and from d(atty) in dB_ to dqkv in qkv_.
  void attention_block_forward(int l, LayerActs<T>& a, const LayerParams& p,
                               const AttentionShape& s);
  void attention_block_backward(int l, LayerActs<T>& a, const AttentionShape& s);
  // Whether cuDNN's calls get staggered workspaces (kStaggerAttentionWorkspace, with graphs).
  bool stagger_attention() const { return kStaggerAttentionWorkspace && opts_.cuda_graphs; }
  // Decides the stagger in the region [region, + bytes) that d4 (d4_bytes) shares: the calls'
  // workspace offsets, d4's place, the memsets for the graphs to hoist (attention_stagger.hpp).
  void stagger_attention_calls(char* region, size_t bytes, size_t d4_bytes);
  // Layer l's cuDNN workspace offset (forward or backward) at shape `s`.
  size_t attention_workspace_at(bool forward, int l, const AttentionShape& s) const;
  // The fc product with GELU fused: a.gelu and a.fc from a.ln2 (fc_forward_description says
  // which kernel).
  void fc_forward(const LayerActs<T>& a, const LayerParams& p, int N);
  // The attention projection with the residual added in its epilogue: a.resid_mid from a.atty and
  // a.resid (fc_forward_description says which kernel).
  void attn_proj_forward(const LayerActs<T>& a, const LayerParams& p, int N);
  // " fc:<kernel> attn-proj:<kernel>", the forward products that CUTLASS may run.
  std::string fc_forward_description() const;
  bool fused_attention() const;
  // " attention:built-in", or " attention:cudnn(fwd <plan>, bwd <plan>)" at the planned shape.
  std::string attention_description() const;
  // Picks the attention (cuDNN's fused one for bf16 where built and supported) and returns the
  // workspace bytes it needs at the planned shape.
  size_t choose_attention();
  void backward(int B, int Tn, bool exchange, bool acc);
  // Layer l's backward, from the gradient of its output in resid_grad(l) to that of its input in
  // resid_grad(l - 1) (layer 0: in place); ln counts the LayerNorm backwards (their partials).
  void layer_backward(int l, int N, const AttentionShape& shape, bool acc, int& ln,
                      std::vector<ColumnSums>* later);
  // kProjWeightGroup where it applies (one rank without the exchange, no --recompute, every
  // layer's attention output and projection gradient equally apart), else 1, and says which
  // (and why) in describe_; sets the strides the batches use.
  int choose_proj_group(const std::vector<LayerOffsets>& lo);
  // The lowest layer of l's group (proj_group_ layers from the top) and the group's size.
  int proj_group_low(int l) const;
  int proj_group_size(int l) const;
  // Layer l's residual-gradient buffer: the gradient of its output when its backward starts,
  // dh (its attention projection's output gradient) after its ln2 backward.
  T* resid_grad(int l) const { return dresid_ + size_t(l - proj_group_low(l)) * proj_strides_.dy; }
  // The attention projection's weight gradient of layer l: its own product where the group is
  // 1, else nothing but at the group's lowest layer, where the group's batch runs.
  void proj_weight_grad(int l, int N, bool acc);
  // How many LayerNorm backwards' partials are kept at once; the k-th backward's region.
  int partials_regions() const { return kDeferColumnSums ? 2 * L_ + 1 : 1; }
  size_t partials_stride(size_t N) const {
    return AllocationPlan::aligned(layernorm_backward_partials(int(N), C_) * sizeof(float)) /
           sizeof(float);
  }
  float* partials(int k) const {
    return partials_ + size_t(k % partials_regions()) * partials_stride_;
  }
  // The queued second passes (pending_sums_) summed, in one launch.
  void sum_pending();
  // dw [O, C] and db [O] (+= with acc) of the Linear layer whose input is x (ln1 or ln2, with its
  // ones column) and output gradient dy [N, O]: one product, then its split.
  // With sumsq (norm_from_splits_): also the sum of squares of dw and db, per block.
  void weight_bias_grad(float* dw, float* db, const T* dy, const T* x, int N, int O, bool acc,
                        double* sumsq);
  // kNormFromSplits: layer l's slots for the qkv split, then for the fc split; and the parts of
  // the gradient buffer those splits do not write (the norm's own pass reads only these).
  int split_sumsq_layer_slots() const;
  double* split_sumsq(int l, bool fc) const;
  std::vector<std::pair<size_t, size_t>> norm_rest_parts() const;
  // The sum of squares of all the gradients into norm_acc_ and the clip factor it gives into
  // clip_scale_: its own pass over the parts the splits did not write where their slots hold the
  // final gradients (one launch with kFusedNormClip), else over all of them.
  void queue_grad_norm_and_clip(float clip);
  // The ones columns of every layer's ln1 and ln2, once, after the memory is bound.
  void set_ones_columns();
  // A phase of the micro-step (StepKey::phase): forward with the loss head, then backward.
  enum Phase { kForwardPhase = 0, kBackwardPhase = 1 };
  // Queues `launch` through the step's graphs, keyed by what changes its launches; eagerly at
  // other than the planned batch shape (cuDNN may then take a workspace of its own, which a
  // later shape can replace under a graph that still points at it).
  void run_phase(Phase phase, int B, int Tn, bool acc, float scale,
                 const std::function<void()>& launch);
  // The batch's tokens and targets to the device: into the fixed buffer batch_, or with
  // kForwardReadsInputSlot left in the pipeline's slot, which tokens_ and targets_ then point
  // at; the token order follows (stage_order, or kOrderCopyInBackward), before the backward.
  void stage_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets);
  // Queues the copy of `bytes` at `src` to the host, after the work queued so far, on the stream
  // scalars_stream_, and records `done` there: the compute stream goes on to its next kernel
  // instead of waiting for the copy (a copy between two kernels idles the GPU for ~7 us).
  // Outside the step's graphs: the host waits on `done`.
  void copy_to_host(void* dst, const void* src, size_t bytes, cudaEvent_t done);
  // The per-position losses to the host; losses_ready_ marks it, sum_losses waits for it alone.
  void copy_losses(int N);
  double sum_losses(int N);
  void refresh_compute_copy();
  void settle_zero_grad();

  T* w(size_t off) const { return compute_ + off; }
  float* g(size_t off) const { return grads_ + off; }

  GptConfig cfg_;
  EngineOptions opts_;
  ParamLayout layout_;
  Communicator& comm_;
  int device_ = 0;
  std::string describe_;
  int L_, C_, H_, V_, Vp_, Bmax_, Tmax_;
  int ln_ld_ = 0;    // row stride of ln1 and ln2 (ones_column_row_stride)
  int ln_cols_ = 0;  // their columns the products read: C, the ones column, its padding
  size_t total_ = 0, padded_ = 0, shard_begin_ = 0, shard_size_ = 0;
  size_t wte_, wpe_, lnfw_, lnfb_;
  std::vector<LayerParams> lp_;

  cudaStream_t stream_ = nullptr;
  cudaStream_t scalars_stream_ = nullptr;  // copy_to_host's
  cudaEvent_t scalars_due_ = nullptr;      // copy_to_host's: where its copy starts on stream_
  std::unique_ptr<Matmul> mm_;
  DeviceBuffer mem_;
  PinnedBuffer host_scalars_;  // losses of the last batch, then the gradient norm

  float *master_ = nullptr, *grads_ = nullptr, *m_ = nullptr, *v_ = nullptr;
  T* compute_ = nullptr;
  uint32_t* decay_ = nullptr;  // one bit per element of the shard
  bf16* reduce_scratch_ = nullptr;
  double* norm_acc_ = nullptr;
  float* clip_scale_ = nullptr;
  unsigned* norm_ticket_ = nullptr;        // grad_sumsq_ranges_clip's, zero between launches
  std::array<int32_t*, 2> batch_slots_{};  // the input pipeline's
  // The batch being computed (the rows of input_pipeline.hpp's BatchRow): its token order, and
  // its tokens and targets unless kForwardReadsInputSlot (then the forward graphs are keyed by
  // the slot they read: InputPipeline::last_slot()).
  int32_t* batch_ = nullptr;
  const int32_t *tokens_ = nullptr, *targets_ = nullptr;
  uint32_t *sorted_tokens_ = nullptr, *sorted_positions_ = nullptr;
  float* losses_ = nullptr;

  std::vector<LayerActs<T>> acts_;
  T* resid_final_ = nullptr;
  T *lnf_ = nullptr, *logits_ = nullptr;
  float* emb_partials_ = nullptr;  // the embedding backward's scratch, in the logits' region
  // The LM head's chunks at the planned batch (head_chunks.hpp): 3 of at most 5504 positions at
  // GPT-2's 16 x 1024 in bf16; a smaller batch runs in chunks of the same rows.
  HeadChunks head_{};
  float *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr;
  // Scratch shared by all layers.
  T *qkv_ = nullptr, *o_heads_ = nullptr, *dprobs_ = nullptr, *dqkvp_ = nullptr, *d4_ = nullptr;
  T *dA_ = nullptr, *dB_ = nullptr, *dresid_ = nullptr;
  // kProjWeightGroup: layers a batch of attention-projection weight gradients covers (1: none),
  // and the strides (elements) between consecutive layers' dW (grads_), dh (the proj_group_
  // residual-gradient buffers from dresid_) and attention outputs.
  int proj_group_ = 1;
  WeightGradBatch proj_strides_{};
  // Scratch of the LayerNorm backwards' two-pass parameter sums: fixed-order sums instead of float
  // atomics. With kDeferColumnSums, partials_regions() regions partials_stride_ floats apart,
  // each LayerNorm backward of a step its own, their second passes queued in pending_sums_.
  float* partials_ = nullptr;
  size_t partials_stride_ = 0;
  std::vector<ColumnSums> pending_sums_;
  // The product dY^T [ln, 1] of the qkv or fc weight gradient, [O, ln_cols_] fp32, before its split
  // into the weight and bias gradients.
  float* wb_prod_ = nullptr;
  double* norm_slots_ = nullptr;
  // kNormFromSplits on one rank without the exchange: the splits' sum-of-squares slots (every
  // backward writes all of them), the table of the rest of the gradients (on the device, with
  // its tile count), and whether the last gradients written came from a backward (zero_grad
  // clears it: its zeros are not what the slots hold).
  bool norm_from_splits_ = false;
  double* split_sumsq_ = nullptr;
  SumsqRange* norm_ranges_ = nullptr;
  std::vector<SumsqRange> norm_range_table_;
  bool splits_hold_norm_ = false;
  // Set by zero_grad: the next backward writes the gradients instead of adding to them, which
  // saves clearing the whole buffer every step.
  bool overwrite_grads_ = false;
  // One rank averages nothing: NCCL is skipped unless bf16 reduction asks for its rounding;
  // without it, nccl_ and exchange_ stay empty.
  bool exchange_needed_ = true;

  std::unique_ptr<InputPipeline> input_;
  std::unique_ptr<StepGraphs> graphs_;  // the micro-step's phases as CUDA graphs
  std::unique_ptr<NcclComm> nccl_;
  std::unique_ptr<GradientExchange> exchange_;
#if RAILYARD_HAVE_CUDNN
  std::unique_ptr<CudnnAttention> fused_;
#endif
  // Staggered cuDNN workspaces (stagger_attention_calls): per layer, the forward's and the
  // backward's offset in the region (empty: all at its start); the bytes of their memsets.
  std::vector<size_t> attn_fwd_at_, attn_bwd_at_;
  std::vector<ScratchRange> attn_fwd_hoist_, attn_bwd_hoist_;
  std::string attn_stagger_note_;
#if RAILYARD_HAVE_CUTLASS
  std::unique_ptr<CutlassGeluForward> cutlass_fc_;        // bf16 on compute capability 9.0 only
  std::unique_ptr<CutlassResidualForward> cutlass_proj_;  // as cutlass_fc_, if chosen
  std::unique_ptr<CutlassHeadWeightGrad> cutlass_head_;   // as cutlass_fc_, if chosen
#endif
  cudaEvent_t losses_ready_ = nullptr, norm_ready_ = nullptr;
  int64_t adam_step_ = 0;
  std::unique_ptr<DeviceSnapshots> snapshots_;  // checkpoint snapshots of master, m, v
};

template <typename T>
CudaEngine<T>::CudaEngine(const GptConfig& cfg, const EngineOptions& opts, Communicator& comm,
                          uint64_t seed)
    : cfg_(cfg), opts_(opts), layout_(gpt_param_layout(cfg)), comm_(comm) {
  check_options();
  device_ = select_device(comm_);
  RY_CUDA(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  RY_CUDA(cudaGetDeviceProperties(&prop, device_));
  describe_ = "cuda:" + std::to_string(device_) + " " + prop.name + " " +
              (kFp32 ? "fp32" : "bf16") + (opts_.zero_stage == 1 ? " zero1" : "") +
              (opts_.recompute ? " recompute" : "");
  L_ = cfg_.layers, C_ = cfg_.dim, H_ = cfg_.heads, V_ = cfg_.vocab, Vp_ = cfg_.padded_vocab;
  Bmax_ = opts_.micro_batch, Tmax_ = opts_.seq;
  head_ = head_chunks(int64_t(Bmax_) * Tmax_, Vp_, sizeof(T));
  ln_ld_ = ones_column_row_stride(C_);
  ln_cols_ = ones_column_ld(C_);
  locate_params();
  shard_params();
  // One rank has nothing to average: no NCCL communicator (nor its buffers) at all, unless bf16
  // reduction asks for the rounding that its exchange applies.
  exchange_needed_ = comm_.size() > 1 || opts_.reduce_bf16;
  norm_from_splits_ = kNormFromSplits && !exchange_needed_;
  describe_ += step_edges_description(norm_from_splits_);
  if (norm_from_splits_) norm_range_table_ = sumsq_range_table(norm_rest_parts());

  RY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RY_CUDA(cudaStreamCreateWithFlags(&scalars_stream_, cudaStreamNonBlocking));
  RY_CUDA(cudaEventCreateWithFlags(&scalars_due_, cudaEventDisableTiming));
  mm_ = std::make_unique<Matmul>();
#if RAILYARD_HAVE_CUTLASS
  if (!kFp32 && CutlassGeluForward::supports(device_)) {
    cutlass_fc_ = std::make_unique<CutlassGeluForward>();
    if (kCutlassResidualForward) cutlass_proj_ = std::make_unique<CutlassResidualForward>();
    if (kCutlassHeadWeightGrad) cutlass_head_ = std::make_unique<CutlassHeadWeightGrad>();
  }
#endif
  describe_ += fc_forward_description();
  plan_memory();
  describe_ += attention_description();
  input_ = std::make_unique<InputPipeline>(size_t(Bmax_) * Tmax_, V_, batch_slots_);
  std::vector<StepGraphs::HoistedScratch> hoisted{
      {"matmul", {{mm_->slot_arena(), mm_->slot_arena_bytes()}}}};
  if (fused_attention()) {
    hoisted.push_back({"attention-fwd", attn_fwd_hoist_, kForwardPhase});
    hoisted.push_back({"attention-bwd", attn_bwd_hoist_, kBackwardPhase});
  }
  graphs_ = std::make_unique<StepGraphs>(opts_.cuda_graphs, std::move(hoisted));
  RY_CUDA(cudaEventCreateWithFlags(&losses_ready_, cudaEventDisableTiming));
  RY_CUDA(cudaEventCreateWithFlags(&norm_ready_, cudaEventDisableTiming));
  init_state(seed);
  setup_exchange();
  const size_t state_end = std::min(total_, shard_begin_ + shard_size_);
  // Last, so the reserve takes only what the plan, NCCL and cuBLASLt left (256 MiB spare).
  snapshots_ = std::make_unique<DeviceSnapshots>(
      device_, DeviceState{master_, m_, v_, total_, std::min(shard_begin_, state_end), state_end},
      opts_.reserve_snapshot, size_t{256} << 20);
  RY_CUDA(cudaStreamSynchronize(stream_));
}

template <typename T>
void CudaEngine<T>::check_options() const {
  cfg_.validate();
  if (opts_.zero_stage != 0 && opts_.zero_stage != 1) {
    throw std::invalid_argument("--zero must be 0 or 1, got " + std::to_string(opts_.zero_stage));
  }
  if (opts_.micro_batch < 1 || opts_.seq < 1 || opts_.seq > cfg_.max_seq) {
    throw std::invalid_argument("CUDA engine: --batch (" + std::to_string(opts_.micro_batch) +
                                ") must be >= 1 and --seq (" + std::to_string(opts_.seq) +
                                ") in [1, max_seq " + std::to_string(cfg_.max_seq) + "]");
  }
  // cuBLASLt's fast paths want every row and head of bf16 data on a 16-byte boundary.
  if (cfg_.dim % 8 != 0 || cfg_.head_dim() % 8 != 0 || cfg_.padded_vocab % 8 != 0 ||
      opts_.seq % 8 != 0) {
    throw std::invalid_argument("CUDA engine: dim (" + std::to_string(cfg_.dim) + "), head size (" +
                                std::to_string(cfg_.head_dim()) + "), padded_vocab (" +
                                std::to_string(cfg_.padded_vocab) + ") and --seq (" +
                                std::to_string(opts_.seq) + ") must be multiples of 8");
  }
}

// Where each parameter lives in the flat buffer, and each layer's slice of it.
template <typename T>
void CudaEngine<T>::locate_params() {
  wte_ = layout_.at("wte").offset;
  wpe_ = layout_.at("wpe").offset;
  lnfw_ = layout_.at("lnf.weight").offset;
  lnfb_ = layout_.at("lnf.bias").offset;
  for (int l = 0; l < L_; ++l) {
    std::string p = "h." + std::to_string(l) + ".";
    auto at = [&](const char* n) { return layout_.at(p + n).offset; };
    LayerParams q{at("ln1.weight"),
                  at("ln1.bias"),
                  at("attn.qkv.weight"),
                  at("attn.qkv.bias"),
                  at("attn.proj.weight"),
                  at("attn.proj.bias"),
                  at("ln2.weight"),
                  at("ln2.bias"),
                  at("mlp.fc.weight"),
                  at("mlp.fc.bias"),
                  at("mlp.proj.weight"),
                  at("mlp.proj.bias"),
                  0,
                  0};
    const TensorSpec& last = layout_.at(p + "mlp.proj.bias");
    q.begin = q.ln1w;
    q.end = last.offset +
            (last.numel + ParamLayout::kAlign - 1) / ParamLayout::kAlign * ParamLayout::kAlign;
    lp_.push_back(q);
  }
}

template <typename T>
void CudaEngine<T>::shard_params() {
  // Equal shards for ZeRO-1 (and NCCL's all-gather): pad the flat buffer to world * kAlign.
  total_ = layout_.total();
  size_t world = size_t(comm_.size());
  size_t unit = world * ParamLayout::kAlign;
  padded_ = (total_ + unit - 1) / unit * unit;
  if (opts_.zero_stage == 1) {
    shard_size_ = padded_ / world;
    shard_begin_ = shard_size_ * size_t(comm_.rank());
  } else {
    shard_size_ = padded_;
    shard_begin_ = 0;
  }
}

// The parameters as every backend initialises them, their compute copy, AdamW's decay mask;
// moments and gradients zero.
template <typename T>
void CudaEngine<T>::init_state(uint64_t seed) {
  std::vector<float> host(padded_, 0.0f);
  gpt_init_params(cfg_, layout_, seed, host.data());
  RY_CUDA(cudaMemcpy(master_, host.data(), padded_ * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<uint8_t> decay(shard_size_, 0);
  for (const TensorSpec& t : layout_.tensors()) {
    if (!t.decay) continue;
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
      if (i >= shard_begin_ && i < shard_begin_ + shard_size_) decay[i - shard_begin_] = 1;
    }
  }
  const std::vector<uint32_t> decay_bits = pack_decay_mask(decay);
  RY_CUDA(cudaMemcpy(decay_, decay_bits.data(), decay_bits.size() * sizeof(uint32_t),
                     cudaMemcpyHostToDevice));
  RY_CUDA(cudaMemsetAsync(m_, 0, shard_size_ * sizeof(float), stream_));
  RY_CUDA(cudaMemsetAsync(v_, 0, shard_size_ * sizeof(float), stream_));
  RY_CUDA(cudaMemsetAsync(grads_, 0, padded_ * sizeof(float), stream_));
  refresh_compute_copy();
}

template <typename T>
void CudaEngine<T>::setup_exchange() {
  if (exchange_needed_) {
    nccl_ = std::make_unique<NcclComm>(comm_);
    exchange_ = std::make_unique<GradientExchange>(*nccl_, grads_, reduce_scratch_, grad_buckets(),
                                                   opts_.reduce_bf16);
  }
}

template <typename T>
std::vector<GradBucket> CudaEngine<T>::grad_buckets() const {
  std::vector<GradBucket> buckets;
  for (const LayerParams& q : lp_) buckets.push_back({q.begin, q.end});
  buckets.push_back({0, lp_.front().begin});     // embeddings: final only after the whole backward
  buckets.push_back({lp_.back().end, padded_});  // lnf: final first
  return buckets;
}

template <typename T>
CudaEngine<T>::~CudaEngine() {
  snapshots_.reset();
  exchange_.reset();
  nccl_.reset();
  input_.reset();
  graphs_.reset();
  mm_.reset();
  if (losses_ready_ != nullptr) cudaEventDestroy(losses_ready_);
  if (norm_ready_ != nullptr) cudaEventDestroy(norm_ready_);
  if (scalars_due_ != nullptr) cudaEventDestroy(scalars_due_);
  if (scalars_stream_ != nullptr) cudaStreamDestroy(scalars_stream_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

template <typename T>
void CudaEngine<T>::plan_memory() {
  AllocationPlan plan;
  const StateOffsets so = plan_state(plan);
  const size_t attn_ws = choose_attention();
  const bool fused = fused_attention();
  const std::vector<LayerOffsets> lo = plan_layers(plan, fused);
  proj_group_ = choose_proj_group(lo);
  const ScratchOffsets sc = plan_scratch(plan, fused, attn_ws);
  check_plan_fits(plan);
  mem_ = DeviceBuffer(plan.total());
  bind_state(so);
  bind_layers(lo, fused);
  bind_scratch(sc, fused, attn_ws);
  set_ones_columns();
  host_scalars_ = PinnedBuffer(size_t(Bmax_) * Tmax_ * sizeof(float) + sizeof(double));
}

template <typename T>
typename CudaEngine<T>::StateOffsets CudaEngine<T>::plan_state(AllocationPlan& plan) const {
  const size_t N = size_t(Bmax_) * Tmax_;
  const size_t e = sizeof(T), f = sizeof(float);
  StateOffsets so{};
  so.master = plan.add("master weights (fp32)", padded_ * f);
  so.grads = plan.add("gradients (fp32)", padded_ * f);
  so.m = plan.add("AdamW m", shard_size_ * f);
  so.v = plan.add("AdamW v", shard_size_ * f);
  so.decay = plan.add("decay mask", decay_mask_words(shard_size_) * sizeof(uint32_t));
  so.compute = kFp32 ? 0 : plan.add("compute weights (bf16)", padded_ * e);
  so.rs = opts_.reduce_bf16 ? plan.add("bf16 reduce scratch", padded_ * sizeof(bf16)) : 0;
  so.norm = plan.add("norm accumulator", sizeof(double));
  so.clip = plan.add("clip factor", sizeof(float));
  so.ticket = plan.add("norm ticket", sizeof(unsigned));
  for (int k = 0; k < 2; ++k) {
    so.batch[k] = plan.add("tokens, targets (staging)", kInputRows * N * sizeof(int32_t));
  }
  so.step_batch = plan.add("tokens, targets, token order", kBatchRows * N * sizeof(int32_t));
  so.loss = plan.add("losses", N * f);
  return so;
}

template <typename T>
void CudaEngine<T>::bind_state(const StateOffsets& so) {
  master_ = mem_.as<float>(so.master);
  grads_ = mem_.as<float>(so.grads);
  m_ = mem_.as<float>(so.m);
  v_ = mem_.as<float>(so.v);
  decay_ = mem_.as<uint32_t>(so.decay);
  if constexpr (kFp32) {
    compute_ = master_;
  } else {
    compute_ = mem_.as<T>(so.compute);
  }
  reduce_scratch_ = opts_.reduce_bf16 ? mem_.as<bf16>(so.rs) : nullptr;
  norm_acc_ = mem_.as<double>(so.norm);
  clip_scale_ = mem_.as<float>(so.clip);
  norm_ticket_ = mem_.as<unsigned>(so.ticket);
  RY_CUDA(cudaMemset(norm_ticket_, 0, sizeof(unsigned)));
  for (int k = 0; k < 2; ++k) batch_slots_[k] = mem_.as<int32_t>(so.batch[k]);
  const size_t N = size_t(Bmax_) * Tmax_;
  batch_ = mem_.as<int32_t>(so.step_batch);
  tokens_ = batch_ + kTokensRow * N;
  targets_ = batch_ + kTargetsRow * N;
  sorted_tokens_ = reinterpret_cast<uint32_t*>(batch_ + kSortedTokensRow * N);
  sorted_positions_ = reinterpret_cast<uint32_t*>(batch_ + kSortedPositionsRow * N);
  losses_ = mem_.as<float>(so.loss);
}

template <typename T>
typename CudaEngine<T>::ScratchOffsets CudaEngine<T>::plan_scratch(AllocationPlan& plan, bool fused,
                                                                   size_t attn_ws) const {
  const size_t N = size_t(Bmax_) * Tmax_, NC = N * C_;
  const size_t probs = size_t(Bmax_) * H_ * Tmax_ * Tmax_;
  const size_t e = sizeof(T), f = sizeof(float);
  ScratchOffsets sc{};
  sc.rfinal = plan.add("final residual", NC * e);
  sc.lnf = plan.add("lnf", NC * e);
  sc.lnfm = plan.add("lnf stats", N * f);
  sc.lnfr = plan.add("lnf stats", N * f);
  // One region for buffers never live together (docs/gpu.md, "Memory"): the LM head's logits
  // chunk lives only inside loss_head (after every layer's forward, before any layer's
  // backward); the layer scratch only inside one layer's forward or backward. Within the layer
  // scratch, cuDNN's workspace is used only inside its attention call, while d4 (fc's gradient,
  // MLP backward) is dead: it lies in its bytes. The built-in attention has no workspace and
  // uses dA, after d4, inside its backward. Staggered cuDNN workspaces take up to the budget more
  // (and an alignment's slack), d4 then at the other end (stagger_attention_calls).
  const size_t d4_bytes = sc.d4_bytes = AllocationPlan::aligned(4 * NC * e);
  const size_t mlp_scratch = fused ? d4_bytes : d4_bytes + NC * e;
  const size_t stagger = stagger_attention() ? kAttentionStaggerBudget + kStaggerAlign : 0;
  sc.attn_region_bytes = fused ? std::max(attn_ws, mlp_scratch) + stagger : 0;
  const std::vector<size_t> layer_scratch =
      fused ? std::vector<size_t>{3 * NC * e, sc.attn_region_bytes}
            : std::vector<size_t>{3 * NC * e, mlp_scratch, NC * e, probs * e, 3 * NC * e};
  // The embedding backward's partials (embedding_kernels.hpp) too: it runs after every layer's
  // backward, and writes nothing else there.
  const auto overlaid = plan.add_overlaid("logits / attention workspace and scratch",
                                          {{size_t(head_.rows) * size_t(Vp_) * e},
                                           layer_scratch,
                                           {embedding_backward_scratch_bytes(Bmax_, Tmax_, C_)}});
  sc.logits = overlaid[0][0];
  sc.emb_partials = overlaid[2][0];
  sc.qkv = overlaid[1][0];
  sc.attn_ws = sc.d4 = overlaid[1][1];
  if (!fused) {
    sc.dA = overlaid[1][1] + d4_bytes;
    sc.oh = overlaid[1][2];
    sc.dprobs = overlaid[1][3];
    sc.dqkvp = overlaid[1][4];
  }
  sc.dB = plan.add("scratch: grad B", NC * e);
  sc.dresid = plan.add("scratch: residual grad", size_t(proj_group_) * NC * e);
  sc.partials = plan.add("scratch: layernorm backward partials",
                         size_t(partials_regions()) * partials_stride(N) * f);
  sc.wb_prod =
      plan.add("scratch: weight and bias gradient product", size_t(4) * C_ * size_t(ln_cols_) * f);
  const size_t split_slots = norm_from_splits_ ? size_t(L_) * split_sumsq_layer_slots() : 0;
  const size_t tiles = norm_from_splits_ ? norm_range_table_.back().first_tile : 0;
  sc.norm_slots =
      plan.add("scratch: norm slots", std::max(grad_sumsq_slots(padded_, grad_sumsq_full_blocks()),
                                               grad_sumsq_ranges_slots(tiles, split_slots)) *
                                          sizeof(double));
  sc.split_sumsq = plan.add("scratch: the splits' norm slots", split_slots * sizeof(double));
  sc.norm_ranges = plan.add("scratch: norm ranges", norm_range_table_.size() * sizeof(SumsqRange));
  return sc;
}

template <typename T>
void CudaEngine<T>::bind_scratch(const ScratchOffsets& sc, bool fused, size_t attn_ws) {
  resid_final_ = mem_.as<T>(sc.rfinal);
  lnf_ = mem_.as<T>(sc.lnf);
  lnf_mean_ = mem_.as<float>(sc.lnfm);
  lnf_rstd_ = mem_.as<float>(sc.lnfr);
  logits_ = mem_.as<T>(sc.logits);
  emb_partials_ = mem_.as<float>(sc.emb_partials);
  qkv_ = mem_.as<T>(sc.qkv);
  o_heads_ = fused ? nullptr : mem_.as<T>(sc.oh);
  dprobs_ = fused ? nullptr : mem_.as<T>(sc.dprobs);
  dqkvp_ = fused ? nullptr : mem_.as<T>(sc.dqkvp);
#if RAILYARD_HAVE_CUDNN
  if (fused) fused_->set_workspace(mem_.as<void>(sc.attn_ws), attn_ws);
#else
  (void)attn_ws;
#endif
  d4_ = mem_.as<T>(sc.d4);
  dA_ = fused ? nullptr : mem_.as<T>(sc.dA);
  dB_ = mem_.as<T>(sc.dB);
  dresid_ = mem_.as<T>(sc.dresid);
  partials_ = mem_.as<float>(sc.partials);
  partials_stride_ = partials_stride(size_t(Bmax_) * Tmax_);
  wb_prod_ = mem_.as<float>(sc.wb_prod);
  norm_slots_ = mem_.as<double>(sc.norm_slots);
  if (norm_from_splits_) {
    split_sumsq_ = mem_.as<double>(sc.split_sumsq);
    norm_ranges_ = mem_.as<SumsqRange>(sc.norm_ranges);
    RY_CUDA(cudaMemcpy(norm_ranges_, norm_range_table_.data(),
                       norm_range_table_.size() * sizeof(SumsqRange), cudaMemcpyHostToDevice));
  }
  if (fused && stagger_attention()) {
    // Last: the probe runs real calls, on the layers' buffers, qkv_ and dB_.
    stagger_attention_calls(mem_.as<char>(sc.attn_ws), sc.attn_region_bytes, sc.d4_bytes);
  }
}

template <typename T>
std::vector<typename CudaEngine<T>::LayerOffsets> CudaEngine<T>::plan_layers(AllocationPlan& plan,
                                                                             bool fused) const {
  const size_t N = size_t(Bmax_) * Tmax_, NC = N * C_;
  const size_t probs = size_t(Bmax_) * H_ * Tmax_ * Tmax_;
  const size_t e = sizeof(T), f = sizeof(float), NL = N * size_t(ln_ld_);
  std::vector<LayerOffsets> lo(L_);
  // With --recompute the LayerNorm outputs and the GELU are rebuilt in backward from what is
  // kept (residuals, statistics, pre-activations), so one shared copy of each suffices.
  size_t shared_ln1 = 0, shared_ln2 = 0, shared_gelu = 0;
  // Every layer's attention output in one region, in layer order: equally apart, as a batch of
  // the projection's weight gradients reads them (kProjWeightGroup).
  const size_t atty_bytes = AllocationPlan::aligned(NC * e);
  const size_t atty = plan.add("attention outputs (every layer's)", size_t(L_) * atty_bytes);
  if (opts_.recompute) {
    shared_ln1 = plan.add("recompute: ln1", NL * e);
    shared_ln2 = plan.add("recompute: ln2", NL * e);
    shared_gelu = plan.add("recompute: gelu", 4 * NC * e);
  }
  for (int l = 0; l < L_; ++l) {
    std::string p = "layer " + std::to_string(l) + ": ";
    LayerOffsets& x = lo[l];
    x.resid = plan.add(p + "residual", NC * e);
    x.ln1 = opts_.recompute ? shared_ln1 : plan.add(p + "ln1", NL * e);
    x.ln1m = plan.add(p + "ln stats", N * f);
    x.ln1r = plan.add(p + "ln stats", N * f);
    x.qkvp = plan.add(p + "q k v", 3 * NC * e);
    x.probs = fused ? 0 : plan.add(p + "attention probabilities", probs * e);
    x.stats = fused ? plan.add(p + "attention statistics", size_t(Bmax_) * H_ * Tmax_ * f) : 0;
    x.atty = atty + size_t(l) * atty_bytes;
    x.mid = plan.add(p + "residual", NC * e);
    x.ln2 = opts_.recompute ? shared_ln2 : plan.add(p + "ln2", NL * e);
    x.ln2m = plan.add(p + "ln stats", N * f);
    x.ln2r = plan.add(p + "ln stats", N * f);
    x.fc = plan.add(p + "mlp pre-activation", 4 * NC * e);
    x.gelu = opts_.recompute ? shared_gelu : plan.add(p + "mlp activation", 4 * NC * e);
  }
  return lo;
}

template <typename T>
void CudaEngine<T>::bind_layers(const std::vector<LayerOffsets>& lo, bool fused) {
  acts_.resize(L_);
  for (int l = 0; l < L_; ++l) {
    const LayerOffsets& x = lo[l];
    acts_[l] = {mem_.as<T>(x.resid),
                mem_.as<T>(x.ln1),
                mem_.as<float>(x.ln1m),
                mem_.as<float>(x.ln1r),
                mem_.as<T>(x.qkvp),
                fused ? nullptr : mem_.as<T>(x.probs),
                fused ? mem_.as<float>(x.stats) : nullptr,
                mem_.as<T>(x.atty),
                mem_.as<T>(x.mid),
                mem_.as<T>(x.ln2),
                mem_.as<float>(x.ln2m),
                mem_.as<float>(x.ln2r),
                mem_.as<T>(x.fc),
                mem_.as<T>(x.gelu)};
  }
}

template <typename T>
void CudaEngine<T>::check_plan_fits(const AllocationPlan& plan) const {
  size_t free_b = 0, total_b = 0;
  RY_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (plan.total() > free_b) {
    OutOfMemoryContext ctx;
    ctx.what = "the CUDA engine's allocation plan:\n" + plan.summary();
    ctx.requested_bytes = plan.total();
    ctx.free_bytes = free_b;
    ctx.total_bytes = total_b;
    ctx.batch = Bmax_;
    ctx.recompute = opts_.recompute;
    throw std::runtime_error(describe_out_of_memory(ctx));
  }
}

template <typename T>
void CudaEngine<T>::refresh_compute_copy() {
  if constexpr (!kFp32) convert(compute_, master_, padded_, stream_);
}

template <typename T>
int CudaEngine<T>::check_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                               int B, int Tn) const {
  if (B < 1 || Tn < 1 || Tn > Tmax_ || Tn % 8 != 0 || size_t(B) * Tn > size_t(Bmax_) * Tmax_) {
    throw std::invalid_argument("CUDA engine: batch " + std::to_string(B) + " x " +
                                std::to_string(Tn) + " exceeds the planned " +
                                std::to_string(Bmax_) + " x " + std::to_string(Tmax_) +
                                " (--batch, --seq; the sequence a multiple of 8)");
  }
  size_t n = size_t(B) * Tn;
  if (tokens.size() != n || targets.size() != n) {
    throw std::invalid_argument("CUDA engine: expected " + std::to_string(n) +
                                " tokens and targets, got " + std::to_string(tokens.size()) +
                                " and " + std::to_string(targets.size()));
  }
  int scored = 0;
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V_) {
      throw std::invalid_argument("CUDA engine: token " + std::to_string(tokens[i]) +
                                  " at position " + std::to_string(i) + " is outside [0, " +
                                  std::to_string(V_) + "); check the data's vocabulary");
    }
    if (targets[i] >= V_) {
      throw std::invalid_argument("CUDA engine: target " + std::to_string(targets[i]) +
                                  " at position " + std::to_string(i) + " is outside [0, " +
                                  std::to_string(V_) + ")");
    }
    if (targets[i] >= 0) ++scored;
  }
  return scored;
}

template <typename T>
void CudaEngine<T>::forward(int B, int Tn) {
  const int N = B * Tn;
  const cudaDataType_t dt = cuda_dtype<T>();
  const AttentionShape shape{B, Tn, H_, C_ / H_};
  Matmul& mm = *mm_;
  embedding_forward(acts_[0].resid, tokens_, w(wte_), w(wpe_), B, Tn, C_, stream_);
  layernorm_forward(acts_[0].ln1, acts_[0].ln1_mean, acts_[0].ln1_rstd, acts_[0].resid,
                    w(lp_[0].ln1w), w(lp_[0].ln1b), N, C_, ln_ld_, stream_);
  for (int l = 0; l < L_; ++l) {
    const LayerParams& p = lp_[l];
    LayerActs<T>& a = acts_[l];
    attention_block_forward(l, a, p, shape);
    // The residual adds are in the projections' epilogues (C = the incoming residual), each sum
    // rounded once; the LayerNorms then read the stored residual, as --recompute's do.
    attn_proj_forward(a, p, N);
    layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_mid, w(p.ln2w), w(p.ln2b), N, C_,
                      ln_ld_, stream_);
    fc_forward(a, p, N);
    // The layer's output feeds the next LayerNorm: the next layer's ln1, or lnf.
    if (l + 1 < L_) {
      LayerActs<T>& n = acts_[l + 1];
      mm.linear_forward(n.resid, a.gelu, w(p.mpw), w(p.mpb), N, 4 * C_, C_, dt, stream_, nullptr, 0,
                        a.resid_mid);
      layernorm_forward(n.ln1, n.ln1_mean, n.ln1_rstd, n.resid, w(lp_[l + 1].ln1w),
                        w(lp_[l + 1].ln1b), N, C_, ln_ld_, stream_);
    } else {
      mm.linear_forward(resid_final_, a.gelu, w(p.mpw), w(p.mpb), N, 4 * C_, C_, dt, stream_,
                        nullptr, 0, a.resid_mid);
      layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, resid_final_, w(lnfw_), w(lnfb_), N, C_, C_,
                        stream_);
    }
  }
}

template <typename T>
void CudaEngine<T>::loss_head(int N, float dscale, bool grad, bool acc) {
  const cudaDataType_t dt = cuda_dtype<T>();
  for (int r0 = 0; r0 < N; r0 += int(head_.rows)) {
    const int rows = std::min(N - r0, int(head_.rows));
    const T* x = lnf_ + size_t(r0) * C_;
    mm_->linear_forward(logits_, x, w(wte_), nullptr, rows, C_, Vp_, dt, stream_);
    cross_entropy_forward_backward(logits_, losses_ + r0, targets_ + r0, rows, V_, Vp_, dscale,
                                   grad, stream_);
    if (!grad) continue;
    mm_->linear_backward_input(dB_ + size_t(r0) * C_, logits_, w(wte_), rows, C_, Vp_, dt, false,
                               stream_);
    head_weight_grad(x, rows, acc || r0 > 0);
  }
}

// wte's gradient (+)= dlogits^T x over one chunk of the head. For "+=" CUTLASS's ping-pong
// kernel, which reads the 154 MB fp32 gradient under its main loop (414 us alone on an H200
// against cuBLASLt's 421, 451 in the step); "=" stays cuBLASLt's (402 against 412). The two give
// the same bits at this shape (bench/NOTES.md, head_weight_grad_bench): one K order, fp32 sums.
template <typename T>
void CudaEngine<T>::head_weight_grad(const T* x, int rows, bool acc) {
#if RAILYARD_HAVE_CUTLASS
  if constexpr (!kFp32) {
    if (cutlass_head_ && acc) {
      cutlass_head_->run(g(wte_), logits_, x, rows, C_, Vp_, acc, stream_);
      return;
    }
  }
#endif
  mm_->linear_backward_weight(g(wte_), logits_, x, rows, C_, Vp_, cuda_dtype<T>(), acc, stream_);
}

// GELU in the product's epilogue; the value before it (a.fc) is kept for backward. CUTLASS's
// ping-pong kernel is 12 us faster per layer than cuBLASLt's GELU_AUX_BIAS on an H200
// (bench/NOTES.md); both give the same bits every run, not each other's.
template <typename T>
void CudaEngine<T>::fc_forward(const LayerActs<T>& a, const LayerParams& p, int N) {
#if RAILYARD_HAVE_CUTLASS
  if constexpr (!kFp32) {
    if (cutlass_fc_) {
      cutlass_fc_->run(a.gelu, a.fc, a.ln2, ln_ld_, w(p.fcw), w(p.fcb), N, C_, 4 * C_, stream_);
      return;
    }
  }
#endif
  mm_->linear_forward(a.gelu, a.ln2, w(p.fcw), w(p.fcb), N, C_, 4 * C_, cuda_dtype<T>(), stream_,
                      a.fc, ln_ld_);
}

// D = atty W^T + b + resid with C = resid (beta 1). CUTLASS's ping-pong kernel reads C by the
// epilogue's TMA load: 37 us on an H200 against cuBLASLt's 40 (31.5 without C; bench/NOTES.md);
// both give the same bits every run, not each other's.
template <typename T>
void CudaEngine<T>::attn_proj_forward(const LayerActs<T>& a, const LayerParams& p, int N) {
#if RAILYARD_HAVE_CUTLASS
  if constexpr (!kFp32) {
    if (cutlass_proj_) {
      cutlass_proj_->run(a.resid_mid, a.atty, C_, w(p.projw), w(p.projb), a.resid, N, C_, C_,
                         stream_);
      return;
    }
  }
#endif
  mm_->linear_forward(a.resid_mid, a.atty, w(p.projw), w(p.projb), N, C_, C_, cuda_dtype<T>(),
                      stream_, nullptr, 0, a.resid);
}

template <typename T>
std::string CudaEngine<T>::fc_forward_description() const {
  std::string fc = " fc:cublaslt", proj = " attn-proj:cublaslt", head = " head-dw:cublaslt";
#if RAILYARD_HAVE_CUTLASS
  if (cutlass_fc_) fc = " fc:cutlass-sm90-pingpong";
  if (cutlass_proj_) proj = " attn-proj:cutlass-sm90-pingpong";
  if (cutlass_head_) head = " head-dw:cutlass-sm90";
#endif
  return fc + proj + head;
}

template <typename T>
bool CudaEngine<T>::fused_attention() const {
#if RAILYARD_HAVE_CUDNN
  return fused_ != nullptr;
#else
  return false;
#endif
}

template <typename T>
std::string CudaEngine<T>::attention_description() const {
#if RAILYARD_HAVE_CUDNN
  if (fused_) {
    return " attention:cudnn(" + fused_->describe(AttentionShape{Bmax_, Tmax_, H_, C_ / H_}) + ")" +
           attn_stagger_note_;
  }
#endif
  return " attention:built-in";
}

template <typename T>
size_t CudaEngine<T>::choose_attention() {
#if RAILYARD_HAVE_CUDNN
  if constexpr (!kFp32) {
    // cuDNN says at graph build whether it supports the shape (head size, GPU); where not, the
    // built-in attention runs, and describe() says which one does.
    try {
      fused_ = std::make_unique<CudnnAttention>();
      return fused_->prepare(AttentionShape{Bmax_, Tmax_, H_, C_ / H_});
    } catch (const std::exception& e) {
      fused_.reset();
      describe_ += " (cuDNN attention unavailable: " + std::string(e.what()) + ")";
    }
  }
#endif
  return 0;
}

template <typename T>
void CudaEngine<T>::attention_block_forward(int l, LayerActs<T>& a, const LayerParams& p,
                                            const AttentionShape& s) {
  const int N = s.B * s.T;
  const cudaDataType_t dt = cuda_dtype<T>();
#if RAILYARD_HAVE_CUDNN
  if constexpr (!kFp32) {
    if (fused_) {
      // The projection's output is what backward needs: kept as is, read by stride.
      mm_->linear_forward(a.qkvp, a.ln1, w(p.qkvw), w(p.qkvb), N, C_, 3 * C_, dt, stream_, nullptr,
                          ln_ld_);
      fused_->forward(a.atty, a.stats, a.qkvp, s, stream_, attention_workspace_at(true, l, s));
      return;
    }
  }
#endif
  mm_->linear_forward(qkv_, a.ln1, w(p.qkvw), w(p.qkvb), N, C_, 3 * C_, dt, stream_, nullptr,
                      ln_ld_);
  attention_forward(*mm_, a.atty, a.qkvp, a.probs, o_heads_, qkv_, s, stream_);
  (void)l;
}

template <typename T>
void CudaEngine<T>::attention_block_backward(int l, LayerActs<T>& a, const AttentionShape& s) {
#if RAILYARD_HAVE_CUDNN
  if constexpr (!kFp32) {
    if (fused_) {
      fused_->backward(qkv_, dB_, a.atty, a.stats, a.qkvp, s, stream_,
                       attention_workspace_at(false, l, s));
      return;
    }
  }
#endif
  attention_backward(*mm_, qkv_, dqkvp_, dprobs_, dA_, dB_, a.qkvp, a.probs, s, stream_);
  (void)l;
}

template <typename T>
size_t CudaEngine<T>::attention_workspace_at(bool forward, int l, const AttentionShape& s) const {
  const std::vector<size_t>& at = forward ? attn_fwd_at_ : attn_bwd_at_;
  // The probe placed the calls at the planned shape; another runs eagerly, at the start.
  if (at.empty() || s.B != Bmax_ || s.T != Tmax_) return 0;
  return at[size_t(l)];
}

// Hoisting the staggered memsets (the forward's in the forward graphs, the backward's in the
// backward graphs) keeps graph_memsets.hpp's promises for their bytes: before each memset no
// node touches them (stagger_workspaces verifies that no earlier call's workspace and not d4,
// the one other buffer the backward writes in the region meanwhile, reach them; the forward
// writes nothing else there before its last attention call, the LM head's logits come after
// it); nothing reads what they held before a launch (in either graph they are cuDNN workspace,
// whose content is undefined at each call, or d4 or the logits, each written by a product before
// it is read); nothing outside the graphs touches them while one runs (evaluation and other
// shapes run eagerly, in stream order). No other memset lies inside them: the engine issues none
// in the step, the libraries' go into their own workspaces.
template <typename T>
void CudaEngine<T>::stagger_attention_calls(char* region, size_t bytes, size_t d4_bytes) {
#if RAILYARD_HAVE_CUDNN
  if constexpr (!kFp32) {
    const AttentionShape s{Bmax_, Tmax_, H_, C_ / H_};
    fused_->set_workspace(region, bytes);
    std::vector<WorkspaceCalls> kinds(2);
    kinds[0] = {"fwd", L_, fused_->workspace_bytes(s, SdpaGraph::kForward), false,
                [&](int j, size_t at) {
                  fused_->forward(acts_[j].atty, acts_[j].stats, acts_[j].qkvp, s, stream_, at);
                }};
    // Backward runs the last layer first; d4 is live between its calls (the MLP's backward).
    kinds[1] = {"bwd", L_, fused_->workspace_bytes(s, SdpaGraph::kBackward), true,
                [&](int j, size_t at) {
                  const LayerActs<T>& a = acts_[L_ - 1 - j];
                  fused_->backward(qkv_, dB_, a.atty, a.stats, a.qkvp, s, stream_, at);
                }};
    WorkspaceStagger st;
    try {
      st = stagger_workspaces(stream_, region, bytes, d4_bytes, kAttentionStaggerBudget, kinds);
    } catch (const std::exception& e) {
      // A probe's capture failed: one workspace at the region's start, as without the stagger
      // (the step's own capture then decides whether graphs run at all).
      (void)cudaGetLastError();
      attn_stagger_note_ = " attention-memsets:kept (probe: " + std::string(e.what()) + ")";
      return;
    }
    attn_fwd_at_.assign(size_t(L_), 0);
    attn_bwd_at_.assign(size_t(L_), 0);
    for (int l = 0; l < L_; ++l) {
      attn_fwd_at_[size_t(l)] = st.kinds[0].offset(l, L_);
      attn_bwd_at_[size_t(l)] = st.kinds[1].offset(L_ - 1 - l, L_);
    }
    d4_ = reinterpret_cast<T*>(region + st.apart);
    attn_fwd_hoist_ = st.hoist[0];
    attn_bwd_hoist_ = st.hoist[1];
    attn_stagger_note_ = " attention-memsets:" + st.describe();
    return;
  }
#endif
  (void)region, (void)bytes, (void)d4_bytes;
}

template <typename T>
void CudaEngine<T>::backward(int B, int Tn, bool exchange, bool acc) {
  const int N = B * Tn;
  const AttentionShape shape{B, Tn, H_, C_ / H_};
  // Each layer's projection gradient must be final where its bucket's all-reduce starts.
  if (exchange && proj_group_ > 1) {
    throw std::logic_error(
        "CudaEngine: the projection gradients are batched (kProjWeightGroup) "
        "on an engine with a gradient exchange");
  }
  // A capture that failed part-way (StepGraphs then reruns this eagerly) may have left some queued.
  pending_sums_.clear();
  std::vector<ColumnSums>* later = kDeferColumnSums ? &pending_sums_ : nullptr;
  int ln = 0;  // LayerNorm backwards so far: each its own partials (kDeferColumnSums)
  // The final LayerNorm (the LM head's backward ran with the loss). Each LayerNorm backward also
  // sums the columns of the residual gradient it leaves: the bias gradient of the projection
  // whose output that gradient is (the MLP's of the layer below, or the attention's after ln2).
  layernorm_backward(resid_grad(L_ - 1), g(lnfw_), g(lnfb_), g(lp_[L_ - 1].mpb), partials(ln++),
                     dB_, resid_final_, w(lnfw_), lnf_mean_, lnf_rstd_, N, C_, false, acc, stream_,
                     later);
  if (exchange) {
    sum_pending();  // a bucket's gradients final before its all-reduce
    exchange_->launch(size_t(L_) + 1, stream_);
  }
  for (int l = L_ - 1; l >= 0; --l) {
    layer_backward(l, N, shape, acc, ln, later);
    if (exchange) {
      sum_pending();
      exchange_->launch(size_t(l), stream_);
    }
  }
  sum_pending();  // without the exchange, every one queued: one launch for the whole backward
  if (kOrderCopyInBackward) input_->copy_order_end(stream_);  // the order, for the embedding's
  // wte already holds this backward's LM-head gradient: the embedding's always adds to it.
  embedding_backward(g(wte_), g(wpe_), resid_grad(0), sorted_tokens_, sorted_positions_,
                     emb_partials_, B, Tn, C_, acc, stream_);
  if (exchange) exchange_->launch(embedding_bucket(), stream_);
}

template <typename T>
void CudaEngine<T>::layer_backward(int l, int N, const AttentionShape& shape, bool acc, int& ln,
                                   std::vector<ColumnSums>* later) {
  const cudaDataType_t dt = cuda_dtype<T>();
  Matmul& mm = *mm_;
  const LayerParams& p = lp_[l];
  LayerActs<T>& a = acts_[l];
  T* dres = resid_grad(l);
  if (opts_.recompute) {
    layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.resid_mid, w(p.ln2w), w(p.ln2b), N, C_,
                      ln_ld_, stream_);
    gelu_forward(a.gelu, a.fc, size_t(N) * 4 * C_, stream_);
  }
  // MLP: dres is the gradient of the layer's output (its column sums, the gradient of mpb,
  // came with the LayerNorm backward that produced it).
  // GELU's derivative is applied in the product's epilogue: d4 is the gradient of fc.
  mm.linear_backward_input(d4_, dres, w(p.mpw), N, 4 * C_, C_, dt, false, stream_, a.fc);
  mm.linear_backward_weight(g(p.mpw), dres, a.gelu, N, 4 * C_, C_, dt, acc, stream_);
  mm.linear_backward_input(dB_, d4_, w(p.fcw), N, C_, 4 * C_, dt, false, stream_);
  // fc's weight and bias gradients from one product (ln2's ones column).
  weight_bias_grad(g(p.fcw), g(p.fcb), d4_, a.ln2, N, 4 * C_, acc, split_sumsq(l, true));
  layernorm_backward(dres, g(p.ln2w), g(p.ln2b), g(p.projb), partials(ln++), dB_, a.resid_mid,
                     w(p.ln2w), a.ln2_mean, a.ln2_rstd, N, C_, true, acc, stream_, later);
  // Attention.
  if (opts_.recompute) {
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.resid, w(p.ln1w), w(p.ln1b), N, C_, ln_ld_,
                      stream_);
  }
  mm.linear_backward_input(dB_, dres, w(p.projw), N, C_, C_, dt, false, stream_);
  proj_weight_grad(l, N, acc);
  attention_block_backward(l, a, shape);
  mm.linear_backward_input(dB_, qkv_, w(p.qkvw), N, C_, 3 * C_, dt, false, stream_);
  weight_bias_grad(g(p.qkvw), g(p.qkvb), qkv_, a.ln1, N, 3 * C_, acc, split_sumsq(l, false));
  float* below_mpb = l > 0 ? g(lp_[l - 1].mpb) : nullptr;  // layer 0's input has no bias
  // Into the layer below's buffer, dres (dh) left for the group's batch; layer 0's in place.
  T* below = l > 0 ? resid_grad(l - 1) : dres;
  layernorm_backward(below, g(p.ln1w), g(p.ln1b), below_mpb, partials(ln++), dB_, a.resid,
                     w(p.ln1w), a.ln1_mean, a.ln1_rstd, N, C_, true, acc, stream_, later, dres);
}

template <typename T>
int CudaEngine<T>::proj_group_low(int l) const {
  const int top = L_ - 1 - (L_ - 1 - l) / proj_group_ * proj_group_;
  return std::max(0, top - proj_group_ + 1);
}

template <typename T>
int CudaEngine<T>::proj_group_size(int l) const {
  const int top = L_ - 1 - (L_ - 1 - l) / proj_group_ * proj_group_;
  return top - proj_group_low(l) + 1;
}

template <typename T>
void CudaEngine<T>::proj_weight_grad(int l, int N, bool acc) {
  const int low = proj_group_low(l);
  if (l != low) return;  // the group's lowest layer runs the batch, every dh then written
  WeightGradBatch batch = proj_strides_;
  batch.count = proj_group_size(l);
  mm_->linear_backward_weight(g(lp_[low].projw), resid_grad(low), acts_[low].atty, N, C_, C_,
                              cuda_dtype<T>(), acc, stream_, 0, batch);
}

template <typename T>
int CudaEngine<T>::choose_proj_group(const std::vector<LayerOffsets>& lo) {
  proj_strides_ = {1, 0, int64_t(Bmax_) * Tmax_ * C_, 0};
  const char* why = kProjWeightGroup <= 1 || L_ < 2 ? "" : nullptr;
  if (why == nullptr && exchange_needed_) why = " (gradient exchange)";
  if (why == nullptr && opts_.recompute) why = " (--recompute)";
  const auto apart = [&](auto at) {  // every layer's at(l) equally apart from the one below
    for (int l = 2; l < L_; ++l) {
      if (at(l) - at(l - 1) != at(1) - at(0)) return false;
    }
    return true;
  };
  if (why == nullptr &&
      (!apart([&](int l) { return lo[l].atty; }) || !apart([&](int l) { return lp_[l].projw; }))) {
    why = " (layers not equally apart)";
  }
  if (why != nullptr) {
    describe_ += std::string(" attn-proj-dw:per-layer") + why;
    return 1;
  }
  proj_strides_.dw = int64_t(lp_[1].projw - lp_[0].projw);
  proj_strides_.x = int64_t((lo[1].atty - lo[0].atty) / sizeof(T));
  const int group = std::min(kProjWeightGroup, L_);
  describe_ += " attn-proj-dw:batch" + std::to_string(group);
  return group;
}

template <typename T>
void CudaEngine<T>::sum_pending() {
  sum_partial_columns(pending_sums_, stream_);
  pending_sums_.clear();
}

template <typename T>
void CudaEngine<T>::weight_bias_grad(float* dw, float* db, const T* dy, const T* x, int N, int O,
                                     bool acc, double* sumsq) {
  // The product always overwrites its scratch; the split adds to the gradients where acc.
  mm_->linear_backward_weight(wb_prod_, dy, x, N, ln_cols_, O, cuda_dtype<T>(), false, stream_,
                              ln_ld_);
  split_ones_column_product(dw, db, wb_prod_, O, C_, ln_cols_, acc, stream_, sumsq);
}

template <typename T>
int CudaEngine<T>::split_sumsq_layer_slots() const {
  return split_sumsq_slots(3 * C_) + split_sumsq_slots(4 * C_);
}

template <typename T>
double* CudaEngine<T>::split_sumsq(int l, bool fc) const {
  if (!norm_from_splits_) return nullptr;
  return split_sumsq_ + size_t(l) * split_sumsq_layer_slots() +
         (fc ? split_sumsq_slots(3 * C_) : 0);
}

// The complement in [0, padded_) of every layer's qkv and fc weights and biases: the layout's
// order (ParamLayout), the padding between tensors (zero) read with the rest.
template <typename T>
std::vector<std::pair<size_t, size_t>> CudaEngine<T>::norm_rest_parts() const {
  std::vector<std::pair<size_t, size_t>> written;
  const size_t C = size_t(C_);
  for (const LayerParams& p : lp_) {
    written.insert(written.end(), {{p.qkvw, p.qkvw + 3 * C * C},
                                   {p.qkvb, p.qkvb + 3 * C},
                                   {p.fcw, p.fcw + 4 * C * C},
                                   {p.fcb, p.fcb + 4 * C}});
  }
  std::sort(written.begin(), written.end());
  std::vector<std::pair<size_t, size_t>> rest;
  size_t at = 0;
  for (const auto& [begin, end] : written) {
    rest.push_back({at, begin});
    at = end;
  }
  rest.push_back({at, padded_});
  return rest;
}

template <typename T>
void CudaEngine<T>::queue_grad_norm_and_clip(float clip) {
  if (norm_from_splits_ && splits_hold_norm_) {
    const size_t tiles = norm_range_table_.back().first_tile;
    const size_t split_slots = size_t(L_) * split_sumsq_layer_slots();
    if (kFusedNormClip) {
      grad_sumsq_ranges_clip(norm_acc_, clip_scale_, clip, norm_ticket_, norm_slots_, grads_,
                             norm_ranges_, tiles, split_sumsq_, split_slots, stream_);
      return;
    }
    grad_sumsq_ranges(norm_slots_, grads_, norm_ranges_, tiles, split_sumsq_, split_slots, stream_);
    sum_slots(norm_acc_, norm_slots_, grad_sumsq_ranges_slots(tiles, split_slots), stream_);
  } else {
    const size_t blocks = grad_sumsq_full_blocks();
    grad_sumsq_slice(norm_slots_, grads_, padded_, blocks, stream_);
    sum_slots(norm_acc_, norm_slots_, grad_sumsq_slots(padded_, blocks), stream_);
  }
  clip_factor_on_device(clip_scale_, norm_acc_, clip, stream_);
}

template <typename T>
void CudaEngine<T>::set_ones_columns() {
  const int N = Bmax_ * Tmax_;
  for (const LayerActs<T>& a : acts_) {
    set_ones_column(a.ln1, N, C_, ln_ld_, stream_);
    set_ones_column(a.ln2, N, C_, ln_ld_, stream_);
  }
}

template <typename T>
void CudaEngine<T>::run_phase(Phase phase, int B, int Tn, bool acc, float scale,
                              const std::function<void()>& launch) {
  if (B != Bmax_ || Tn != Tmax_) return launch();
  uint32_t scale_bits = 0;
  std::memcpy(&scale_bits, &scale, sizeof scale_bits);
  // The forward reads the tokens and targets (embedding, loss head), the backward copies the
  // token order from the slot's host staging.
  const bool by_slot = phase == kForwardPhase ? kForwardReadsInputSlot : kOrderCopyInBackward;
  const int input = by_slot ? input_->last_slot() : 0;
  graphs_->run(StepKey{int(phase), B, Tn, acc, scale_bits, input}, stream_, launch);
}

template <typename T>
void CudaEngine<T>::stage_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets) {
  const int32_t* slot = input_->stage(tokens, targets, stream_);
  const size_t N = size_t(Bmax_) * Tmax_;
  if (kForwardReadsInputSlot) {
    // Safe to read until the slot's next stage(), which waits for all work queued before the
    // stage() after this one (InputPipeline's promise).
    tokens_ = slot + kTokensRow * N;
    targets_ = slot + kTargetsRow * N;
    return;
  }
  const size_t pitch = N * sizeof(int32_t);
  RY_CUDA(cudaMemcpy2DAsync(batch_, pitch, slot, pitch, tokens.size() * sizeof(int32_t), kInputRows,
                            cudaMemcpyDeviceToDevice, stream_));
}

template <typename T>
void CudaEngine<T>::copy_to_host(void* dst, const void* src, size_t bytes, cudaEvent_t done) {
  RY_CUDA(cudaEventRecord(scalars_due_, stream_));
  RY_CUDA(cudaStreamWaitEvent(scalars_stream_, scalars_due_, 0));
  RY_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, scalars_stream_));
  RY_CUDA(cudaEventRecord(done, scalars_stream_));
}

// The next write of losses_ is queued only after sum_losses has waited for this copy.
template <typename T>
void CudaEngine<T>::copy_losses(int N) {
  copy_to_host(host_scalars_.as<float>(), losses_, size_t(N) * sizeof(float), losses_ready_);
}

template <typename T>
double CudaEngine<T>::sum_losses(int N) {
  RY_CUDA(cudaEventSynchronize(losses_ready_));
  const float* h = host_scalars_.as<float>();
  double s = 0.0;
  for (int i = 0; i < N; ++i) s += h[i];
  return s;
}

template <typename T>
void CudaEngine<T>::zero_grad() {
  overwrite_grads_ = true;
  splits_hold_norm_ = false;
}

// For a step with no backward since zero_grad: then the gradients really are zero.
template <typename T>
void CudaEngine<T>::settle_zero_grad() {
  if (!overwrite_grads_) return;
  RY_CUDA(cudaMemsetAsync(grads_, 0, padded_ * sizeof(float), stream_));
  overwrite_grads_ = false;
}

template <typename T>
float CudaEngine<T>::forward_backward(std::span<const int32_t> tokens,
                                      std::span<const int32_t> targets, int B, int Tn,
                                      float grad_scale, bool last_micro_step) {
  int scored = check_batch(tokens, targets, B, Tn);
  stage_batch(tokens, targets);
  const int N = B * Tn;
  const float dscale = scored > 0 ? grad_scale / float(scored) : 0.0f;
  // Every gradient is written once per backward: the first after zero_grad overwrites.
  const bool acc = !overwrite_grads_;
  overwrite_grads_ = false;
  const bool exchange = last_micro_step && exchange_needed_;
  run_phase(kForwardPhase, B, Tn, acc, dscale, [&] {
    forward(B, Tn);
    loss_head(N, dscale, true, acc);
  });
  copy_losses(N);
  // Sorted while the GPU runs the forward: between the steps, the GPU would wait for it.
  int32_t* order_rows = batch_ + kSortedTokensRow * size_t(Bmax_) * Tmax_;
  if (kOrderCopyInBackward) {
    input_->sort_order(tokens);
  } else {
    input_->stage_order(tokens, order_rows, stream_);
  }
  // The gradient exchange's launches (another stream, events) stay out of the graphs.
  auto back = [&] {
    if (kOrderCopyInBackward) input_->copy_order_begin(order_rows, stream_);
    backward(B, Tn, exchange, acc);
  };
  if (exchange) {
    back();
  } else {
    run_phase(kBackwardPhase, B, Tn, acc, 0.0f, back);
  }
  splits_hold_norm_ = true;  // each split wrote its slots from the gradients it left
  // Waits for the forward pass only: backward keeps the GPU busy while the host moves on.
  double s = sum_losses(N);
  return scored > 0 ? float(s / scored) : 0.0f;
}

template <typename T>
float CudaEngine<T>::evaluate(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                              int B, int Tn) {
  int scored = check_batch(tokens, targets, B, Tn);
  stage_batch(tokens, targets);
  forward(B, Tn);
  loss_head(B * Tn, 0.0f, false, false);
  copy_losses(B * Tn);
  double s = sum_losses(B * Tn);
  return scored > 0 ? float(s / scored) : 0.0f;
}

template <typename T>
void CudaEngine<T>::reduce_gradients() {
  settle_zero_grad();
  if (exchange_needed_) exchange_->finish(stream_);
}

template <typename T>
float CudaEngine<T>::optimizer_step(const AdamWParams& hp, float lr) {
  // Every rank holds the whole averaged gradient, so each computes the same norm locally. The
  // clip factor is computed on the device and the update queued before the host waits for the
  // norm, so the next step's launches overlap the update. The sum runs here, after the backward:
  // by buckets beside it, on a second stream, it made the step 0.24 ms slower (bench/NOTES.md).
  settle_zero_grad();
  queue_grad_norm_and_clip(hp.clip);
  double* h =
      reinterpret_cast<double*>(host_scalars_.as<char>() + size_t(Bmax_) * Tmax_ * sizeof(float));
  // norm_acc_ is written next by the next step's sum, queued after the wait below.
  copy_to_host(h, norm_acc_, sizeof(double), norm_ready_);
  ++adam_step_;
  AdamWStep s;
  s.lr = lr;
  s.beta1 = hp.beta1;
  s.beta2 = hp.beta2;
  s.eps = hp.eps;
  s.weight_decay = hp.weight_decay;
  s.bias_correction1 = float(1.0 - std::pow(double(hp.beta1), double(adam_step_)));
  s.bias_correction2 = float(1.0 - std::pow(double(hp.beta2), double(adam_step_)));
  s.device_grad_scale = clip_scale_;
  T* compute_shard = kFp32 ? nullptr : compute_ + shard_begin_;
  // A snapshot taken after the last step may still be copying the state (its weights cross PCIe
  // during this step's forward and backward): the update waits for it, here, not the step.
  snapshots_->order_state_write(stream_);
  adamw_update(master_ + shard_begin_, compute_shard, m_, v_, grads_ + shard_begin_, decay_,
               shard_size_, s, stream_);
  if (opts_.zero_stage == 1 && comm_.size() > 1) {
    // Each rank updated its shard; every rank needs all the new weights.
    nccl_->all_gather_in_place(master_, shard_size_, ncclFloat32, stream_);
    refresh_compute_copy();
  }
  RY_CUDA(cudaEventSynchronize(norm_ready_));
  return float(std::sqrt(*h));
}

template <typename T>
void CudaEngine<T>::save_state(ModelState& out) {
  // Straight into the caller's fresh vectors: staging through page-locked memory first was
  // measured slower (1.2 s against 0.8 s), the page faults of the new vectors dominating.
  RY_CUDA(cudaStreamSynchronize(stream_));
  out.params.resize(total_);
  RY_CUDA(cudaMemcpy(out.params.data(), master_, total_ * sizeof(float), cudaMemcpyDeviceToHost));
  size_t end = std::min(total_, shard_begin_ + shard_size_);
  size_t begin = std::min(shard_begin_, end);
  out.shard_begin = begin;
  out.shard_end = end;
  out.m.resize(end - begin);
  out.v.resize(end - begin);
  RY_CUDA(cudaMemcpy(out.m.data(), m_, (end - begin) * sizeof(float), cudaMemcpyDeviceToHost));
  RY_CUDA(cudaMemcpy(out.v.data(), v_, (end - begin) * sizeof(float), cudaMemcpyDeviceToHost));
  out.adam_step = adam_step_;
}

template <typename T>
std::shared_ptr<StateSnapshot> CudaEngine<T>::snapshot_state(bool training_continues) {
  if (!training_continues) return snapshots_->view(stream_, adam_step_);
  if (!snapshots_->reserved()) return nullptr;  // no room: the caller copies to the host
  return snapshots_->copy(stream_, adam_step_);
}

template <typename T>
void CudaEngine<T>::load_state(const ModelState& in) {
  size_t end = std::min(total_, shard_begin_ + shard_size_);
  size_t begin = std::min(shard_begin_, end);
  if (in.params.size() != total_) {
    throw std::invalid_argument("CUDA engine: checkpoint has " + std::to_string(in.params.size()) +
                                " parameters, the model's layout has " + std::to_string(total_));
  }
  if (in.shard_begin > begin || in.shard_end < end ||
      in.m.size() != in.shard_end - in.shard_begin ||
      in.v.size() != in.shard_end - in.shard_begin) {
    throw std::invalid_argument("CUDA engine: checkpoint optimizer state covers [" +
                                std::to_string(in.shard_begin) + ", " +
                                std::to_string(in.shard_end) + "), this rank needs [" +
                                std::to_string(begin) + ", " + std::to_string(end) + ")");
  }
  snapshots_->order_state_write(stream_);  // a snapshot's copy may still read the state
  RY_CUDA(cudaStreamSynchronize(stream_));
  RY_CUDA(cudaMemcpy(master_, in.params.data(), total_ * sizeof(float), cudaMemcpyHostToDevice));
  RY_CUDA(cudaMemset(m_, 0, shard_size_ * sizeof(float)));
  RY_CUDA(cudaMemset(v_, 0, shard_size_ * sizeof(float)));
  size_t skip = begin - in.shard_begin;
  RY_CUDA(
      cudaMemcpy(m_, in.m.data() + skip, (end - begin) * sizeof(float), cudaMemcpyHostToDevice));
  RY_CUDA(
      cudaMemcpy(v_, in.v.data() + skip, (end - begin) * sizeof(float), cudaMemcpyHostToDevice));
  adam_step_ = in.adam_step;
  refresh_compute_copy();
  RY_CUDA(cudaStreamSynchronize(stream_));
}

template <typename T>
std::pair<size_t, size_t> CudaEngine<T>::device_memory() const {
  size_t free_b = 0, total_b = 0;
  RY_CUDA(cudaMemGetInfo(&free_b, &total_b));
  return {total_b - free_b, total_b};
}

}  // namespace
}  // namespace cuda

std::unique_ptr<Engine> make_cuda_engine(const GptConfig& cfg, const EngineOptions& opts,
                                         Communicator& comm, uint64_t seed) {
  if (opts.precision == "fp32") {
    return std::make_unique<cuda::CudaEngine<float>>(cfg, opts, comm, seed);
  }
  if (opts.precision == "bf16") {
    return std::make_unique<cuda::CudaEngine<cuda::bf16>>(cfg, opts, comm, seed);
  }
  throw std::invalid_argument("--precision must be fp32 or bf16, got '" + opts.precision + "'");
}

}  // namespace railyard
