#pragma once
// What started this process, read from the environment before MPI is initialised, so that
// messages printed before MPI_Init (e.g. option errors) come from one rank only.

#include <string>

namespace railyard {

// "mpirun" (Open MPI's mpirun/orted set OMPI_COMM_WORLD_SIZE), "srun" (a Slurm job step with a
// PMI/PMIx rank: srun --mpi=pmix), or "none" (a lone process; MPI initialises as a singleton).
std::string detect_launcher();

// When this process is a task of a Slurm job step without PMI/PMIx (srun without --mpi=pmix on a
// cluster whose MpiDefault is none), where MPI_Init would abort: a message naming the fix.
// Empty otherwise.
std::string missing_pmi_message();

// This process's rank as the launcher announced it; 0 for a lone process.
int launcher_rank();

}  // namespace railyard
