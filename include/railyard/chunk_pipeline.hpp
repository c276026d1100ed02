#pragma once
// Two stages over a sequence of chunks, overlapped through a few staging buffers: `fill` runs on
// a helper thread (the copy out of a state snapshot and its checksum), `drain` on the calling
// thread (the file write), so chunk i+1 is copied while chunk i is written. Chunk i uses buffer
// i % buffers.size(); a buffer is refilled only after its drain returned.

#include <cstddef>
#include <functional>
#include <vector>

namespace railyard {

// Runs fill(i, buf) then drain(i, buf) for i = 0 .. chunks-1, in order within each stage. The
// first exception of either stage stops both (no further chunk starts) and is rethrown here
// once the helper thread has ended. Needs at least one buffer.
void run_chunk_pipeline(size_t chunks, const std::vector<float*>& buffers,
                        const std::function<void(size_t, float*)>& fill,
                        const std::function<void(size_t, float*)>& drain);

}  // namespace railyard
