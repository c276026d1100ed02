// A CUPTI injection library that records the GPU timeline of an unmodified CUDA program (issue 12):
// every kernel, memcpy and memset with its GPU start and end, and the CUDA runtime calls with their
// host start and end (CUPTI puts both on one clock), written as JSON when the program exits.
// bench/step_timeline.py cuts the records into training steps and accounts for every microsecond.
//
//   CUDA_INJECTION64_PATH=/abs/libstep_timeline_cupti.so RAILYARD_TIMELINE_OUT=timeline.json
//   railyard-train --device cuda ...   (both variables in the environment of this command)
//
// The CUDA driver loads the library named by CUDA_INJECTION64_PATH at cuInit and calls its
// InitializeInjection. Unlike ncu, the Activity API does not replay or serialise kernels: graphs,
// streams and the host run as they do without it. A setup that fails ends the process with a
// message (exit 3): a run without its timeline would look like a measurement and be none.
#include <cupti.h>

#include <cxxabi.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kExitCode = 3;
constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kBufferAlign = 8;

// One activity, its name interned: a 60-step run has about 25,000 kernels of ~100 distinct names.
struct Activity {
  const char* kind;  // "kernel", "memcpy", "memset", "api": static strings
  uint32_t name;
  uint64_t start;
  uint64_t end;
  uint32_t stream;
  uint32_t graph;
};

struct Timeline {
  std::mutex mu;
  std::vector<Activity> activities;
  std::vector<std::string> names;
  std::unordered_map<std::string, uint32_t> ids;
  size_t dropped = 0;
  pid_t owner = 0;  // a forked child (the checkpoint file check) inherits atexit: it writes nothing
};

// Never destroyed: CUPTI's worker thread may still hand over a buffer while the process exits.
Timeline& timeline() {
  static Timeline* t = new Timeline;
  return *t;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "railyard timeline: %s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(kExitCode);
}

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = "unknown CUPTI error";
  cuptiGetResultString(r, &text);
  std::string hint;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    hint = " (another profiler holds CUPTI: run without ncu/nsys or other CUDA_INJECTION64_PATH)";
  else if (r == CUPTI_ERROR_NOT_INITIALIZED || r == CUPTI_ERROR_NOT_COMPATIBLE)
    hint =
        " (libcupti does not match the driver: use the libcupti of the CUDA the driver supports)";
  else if (r == CUPTI_ERROR_UNKNOWN)
    hint = " (no CUDA driver or GPU reachable? check nvidia-smi and that libcuda.so loads)";
  fail(std::string(call) + " failed: " + text + hint);
}

// Called with the lock held.
uint32_t intern(Timeline& t, const std::string& name) {
  auto it = t.ids.find(name);
  if (it != t.ids.end()) return it->second;
  auto id = static_cast<uint32_t>(t.names.size());
  t.names.push_back(name);
  t.ids.emplace(name, id);
  return id;
}

// Kernel names come mangled; the phase table (bench/gpu_profile_table.py) matches ncu's
// demangled ones.
std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string copy_name(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy other";
  }
}

std::string api_name(CUpti_CallbackId cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name)
    return "runtime api " + std::to_string(cbid);
  return name;
}

void add(Timeline& t, const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      t.activities.push_back(
          {"kernel", intern(t, demangle(k->name)), k->start, k->end, k->streamId, k->graphId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      t.activities.push_back(
          {"memcpy", intern(t, copy_name(m->copyKind)), m->start, m->end, m->streamId, m->graphId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      t.activities.push_back(
          {"memset", intern(t, "memset"), m->start, m->end, m->streamId, m->graphId});
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
      t.activities.push_back({"api", intern(t, api_name(a->cbid)), a->start, a->end, 0, 0});
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  if (*buffer == nullptr) fail("no memory for an 8 MiB activity buffer");
  *size = kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  Timeline& t = timeline();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) add(t, record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
      t.dropped += dropped;
  }
  std::free(buffer);
}

nlohmann::json to_json(const Timeline& t) {
  nlohmann::json records = nlohmann::json::array();
  for (const Activity& a : t.activities)
    records.push_back({{"kind", a.kind},
                       {"name", t.names[a.name]},
                       {"start", a.start},
                       {"end", a.end},
                       {"stream", a.stream},
                       {"graph", a.graph}});
  return {{"tool", "railyard step timeline (CUPTI activity)"},
          {"clock", "ns"},
          {"dropped", t.dropped},
          {"records", std::move(records)}};
}

// At exit, before the CUDA runtime's own teardown (registered earlier, so run later): flush what
// CUPTI still holds, then write the file whole (a temporary renamed) so a reader never sees half.
void write_timeline() {
  if (getpid() != timeline().owner) return;
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  const char* out = std::getenv("RAILYARD_TIMELINE_OUT");
  Timeline& t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  // A program the traced one starts (exec'd: its own injection) that does no GPU work must not
  // replace the traced program's file with an empty one, as on the H200 on 2026-12-02.
  if (t.activities.empty()) {
    std::fprintf(stderr, "railyard timeline: process %d recorded nothing; %s left as it is\n",
                 int(getpid()), out);
    return;
  }
  std::string tmp = std::string(out) + ".tmp";
  {
    std::ofstream f(tmp);
    f << to_json(t).dump() << '\n';
    if (!f.flush())
      fail("cannot write " + tmp + ": check that its directory exists and is writable");
  }
  if (std::rename(tmp.c_str(), out) != 0) fail("cannot rename " + tmp + " to " + out);
  std::fprintf(stderr, "railyard timeline: %zu records (%zu dropped) written to %s\n",
               t.activities.size(), t.dropped, out);
}

}  // namespace

// The CUDA driver's entry point for CUDA_INJECTION64_PATH libraries; nonzero means loaded.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  const char* out = std::getenv("RAILYARD_TIMELINE_OUT");
  if (out == nullptr || *out == '\0')
    fail("RAILYARD_TIMELINE_OUT is not set: name the JSON file the timeline is written to");
  timeline().owner = getpid();
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
        "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        "cuptiActivityEnable(CONCURRENT_KERNEL)");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable(MEMCPY)");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable(MEMSET)");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "cuptiActivityEnable(RUNTIME)");
  if (std::atexit(write_timeline) != 0)
    fail("atexit failed: the timeline could not be written at exit");
  std::fprintf(stderr, "railyard timeline: recording kernels, copies and runtime calls to %s\n",
               out);
  return 1;
}
