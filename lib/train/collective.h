// Collective: the processes of one data-parallel training run and what they do together.
//
// tx-train under `mpirun -np P` runs P copies of itself; each holds the whole model, takes
// its share of every update's batches and sums its gradients with the others' before the
// same Adam step (see trainer.h). The trainer sees only this interface: a single-process
// run (the plain `tx-train`), an MPI world (host memory: the CPU backend) and NCCL (gradients
// in GPU memory, the rest over MPI) implement it. launch_world() and use_device() live in
// the tx_dist library (collective_mpi.cc, collective_nccl.cc), the only code that includes
// mpi.h or nccl.h, linked into tx-train alone.
#pragma once

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend/backend.h"

namespace tx::train {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int size() const = 0;  // processes in the run; 1: no data parallelism
  virtual int rank() const = 0;  // 0 .. size() - 1; rank 0 is the one that writes files
  // Among the processes on this machine: which GPU a process takes, how many share the cores.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  // Sums the f32 tensor `t` (memory of `be`'s device) over every process, in place; every
  // process receives the same bits.
  virtual void all_reduce_sum(Backend& be, const Tensor& t) = 0;
  // Copies `bytes` bytes at `data` on process `root` into `data` on every other process.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the run with exit code `code` (after this one has said why on
  // stderr); returns only in a single-process run, where there is nobody else to stop.
  virtual void abort(int code) = 0;
  // For the log: "1 process", "MPI: 4 processes on 2 machines", "NCCL + MPI: ...".
  virtual std::string describe() const = 0;
};

// Process `root`'s `text`, on every process (its length, then its bytes).
std::string broadcast_text(Collective& world, const std::string& text, int root);
// Process 0's `mine` on a process whose own differs from it; nothing where they agree (on
// process 0 always). For the start's checks that every process was given the same run.
std::optional<nlohmann::json> first_if_different(Collective& world, const nlohmann::json& mine);

// The plain run: size 1, every operation a no-op.
std::unique_ptr<Collective> single_process();

// The processes a launcher started, read from its environment (Open MPI's OMPI_COMM_WORLD_SIZE,
// PMI_SIZE of MPICH, Intel MPI and Slurm's PMI-2, SLURM_STEP_NUM_TASKS beside PMIx's
// PMIX_RANK under srun --mpi=pmix); 1 without a launcher.
int launched_processes();
// This process's rank among them (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK); 0 without a
// launcher.
int launched_rank();

// The run this process belongs to: an MPI world when started by mpirun (or srun) in a build
// with MPI, else single_process(). Throws tx::Error when several processes were launched but
// this build has no MPI (each would train alone and all would write the same files).
std::unique_ptr<Collective> launch_world();

// Replaces `world` (of several processes) by one that sums the gradients of a CUDA backend
// with NCCL, in a build with NCCL and when `be` runs on a GPU; else leaves it (host memory, or
// GPU memory staged through the host). On an error `world` is left as it was.
void use_device(std::unique_ptr<Collective>& world, Backend& be);

// Whether this build can run data-parallel (has MPI), and the NCCL path (has NCCL).
bool built_with_mpi();
bool built_with_nccl();

}  // namespace tx::train
