#pragma once
// The CPU kernels' threads: one process-wide pool that runs independent tasks. The kernels cut
// their work into pieces fixed by the shapes alone and call OpenBLAS single-threaded on each
// piece, so a result's bits do not depend on the thread count (a CPU job resumed on a node
// with other cores or another affinity continues bit for bit). OpenBLAS's own threading is
// not used: it changes the summation order of sgemm with the thread count.

#include <functional>

namespace railyard::cpu {

// Threads the kernels use, the calling thread included (1 until set). Process-wide: the last
// call wins. Call it while no kernel runs. Throws std::invalid_argument for n < 1.
void set_threads(int n);
int threads();
// The CPUs this thread may run on (its affinity mask; all of the machine's where that is
// unreadable), at least 1.
int affinity_cpus();

// Runs task(i) for every i in [0, n) over the threads and returns when all are done. Tasks
// must not throw. A call from inside a task runs its tasks on that task's thread, in order.
void parallel_for(int n, const std::function<void(int)>& task);

}  // namespace railyard::cpu
