#pragma once
// Which cuDNN SDPA execution plan CudnnAttention builds where the heuristic's first choice is
// measurably slower than another plan of the same list: a fixed table, never timing at run time,
// so two runs on the same GPU, cuDNN and shape always build the same plan (same bits). An entry
// comes from bench/cudnn_sdpa_plans (bench/NOTES.md says how one is chosen); a key not in the
// table keeps the heuristic's choice. Host code only: no cuDNN needed to look a key up.

#include <string>

#include "attention.hpp"

namespace railyard::cuda {

enum class SdpaGraph { kForward, kBackward };

// What decides the plan list and the plans' speeds.
struct SdpaPlanKey {
  int sm = 0;             // compute capability as major * 10 + minor (90 for H100/H200)
  int cudnn_version = 0;  // cudnnGetVersion(): major * 10000 + minor * 100 + patch (cuDNN 9)
  AttentionShape shape;
  SdpaGraph graph = SdpaGraph::kForward;
};

// The plan name to build (as cudnn-frontend's get_plan_name prints it, e.g. "eng2_k24=7"), or
// "" where the table has no entry for `key`. cuDNN versions match by major.minor: the plan list
// and its kernels change between minor releases (9.14 and 9.19 rank this shape's plans
// differently), while a patch release keeps them; a plan missing after all is a fallback, not
// an error.
std::string pinned_sdpa_plan(const SdpaPlanKey& key);

}  // namespace railyard::cuda
