// The MPI world of a data-parallel tx-train run (Open MPI, MPICH, any MPI-3 library), and
// launch_world(). Built into tx_dist; without TX_HAVE_MPI only the refusal to run under a
// launcher remains.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "train/collective.h"

#if TX_HAVE_MPI
#include <mpi.h>
#endif

namespace tx::train {

#if TX_HAVE_MPI
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(str("MPI: ", what, " failed: ", std::string(text, size_t(len))));
}

// MPI counts are ints: larger buffers go in pieces of at most INT_MAX elements.
template <typename F>
void in_pieces(size_t count, F&& f) {
  for (size_t off = 0; off < count;) {
    const size_t n = std::min<size_t>(count - off, INT_MAX);
    f(off, int(n));
    off += n;
  }
}

class MpiWorld final : public Collective {
 public:
  MpiWorld() {
    // Only the main thread calls MPI; OpenMP's threads stay inside the operators.
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init");
    // The default MPI_ERRORS_ARE_FATAL stays: a failed collective (a peer that died) ends
    // the whole job rather than leaving ranks waiting on each other.
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_),
          "MPI_Comm_split_type");
    MPI_Comm_rank(local_, &local_rank_);
    MPI_Comm_size(local_, &local_size_);
    machines_ = local_rank_ == 0 ? 1 : 0;
    check(MPI_Allreduce(MPI_IN_PLACE, &machines_, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  }
  ~MpiWorld() override {
    MPI_Comm_free(&local_);
    MPI_Finalize();
  }

  int size() const override { return size_; }
  int rank() const override { return rank_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void all_reduce_sum(Backend& be, const Tensor& t) override {
    TX_CHECK(t.dtype() == DType::f32, "all-reduce: gradients must be f32, got ", t.str());
    if (t.device().type == DeviceType::cpu) {
      be.synchronize();
      sum(t.data<float>(), size_t(t.numel()));
      return;
    }
    // A device buffer without NCCL: staged through the host.
    std::vector<float> host(size_t(t.numel()));
    be.copy_to_host(t, host.data());
    sum(host.data(), host.size());
    be.copy_from_host(host.data(), t);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    in_pieces(bytes, [&](size_t off, int n) {
      check(MPI_Bcast(static_cast<char*>(data) + off, n, MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
    });
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, nothing else may run
  }

  std::string describe() const override {
    return str("MPI: ", size_, size_ == 1 ? " process" : " processes", " on ", machines_,
               machines_ == 1 ? " machine" : " machines");
  }

 private:
  void sum(float* data, size_t count) {
    in_pieces(count, [&](size_t off, int n) {
      check(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
    });
  }

  int size_ = 1, rank_ = 0, local_rank_ = 0, local_size_ = 1, machines_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
};

}  // namespace
#endif

bool built_with_mpi() {
#if TX_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Collective> launch_world() {
  const int launched = launched_processes();
#if TX_HAVE_MPI
  // mpirun -np 1 is a world of one; PMIx launchers may set no size variable.
  if (launched > 1 || std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"))
    return std::make_unique<MpiWorld>();
#else
  TX_CHECK(launched == 1, "this tx-train was built without MPI but was started as one of ",
           launched,
           " processes (mpirun or srun); install Open MPI (libopenmpi-dev) and rebuild with "
           "-DTX_MPI=ON, or run tx-train without a launcher");
#endif
  return single_process();
}

}  // namespace tx::train
