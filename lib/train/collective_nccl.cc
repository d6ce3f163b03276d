// Gradients in GPU memory summed by NCCL, everything else over the MPI world; use_device().
// Built into tx_dist; without TX_HAVE_NCCL use_device() leaves the world as it is.
#include "core/error.h"
#include "core/format.h"
#include "train/collective.h"

#if TX_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tx::train {

#if TX_HAVE_NCCL
namespace {

void check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess) throw Error(str("NCCL: ", what, " failed: ", ncclGetErrorString(rc)));
}
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(str("CUDA: ", what, " failed: ", cudaGetErrorString(rc)));
}

class Nccl final : public Collective {
 public:
  // One communicator over the processes of `world`, one GPU each (`device`); rank 0's unique
  // id reaches the others through the world's broadcast.
  Nccl(Collective& world, int device) : world_(world), device_(device) {
    ncclUniqueId id{};
    if (world_.rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    world_.broadcast(&id, sizeof id, 0);
    check(cudaSetDevice(device_), "cudaSetDevice");
    // A stream of its own: the backend's stream is private, so all_reduce_sum waits for the
    // backend first and for this stream after (one synchronisation per update, which Adam's
    // norm download costs anyway).
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(ncclCommInitRank(&comm_, world_.size(), id, world_.rank()), "ncclCommInitRank");
  }
  // Takes `world` over once the communicator stands.
  void own(std::unique_ptr<Collective> world) { owned_ = std::move(world); }
  ~Nccl() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  int size() const override { return world_.size(); }
  int rank() const override { return world_.rank(); }
  int local_rank() const override { return world_.local_rank(); }
  int local_size() const override { return world_.local_size(); }

  void all_reduce_sum(Backend& be, const Tensor& t) override {
    if (t.device().type != DeviceType::cuda) return world_.all_reduce_sum(be, t);
    TX_CHECK(t.dtype() == DType::f32, "all-reduce: gradients must be f32, got ", t.str());
    TX_CHECK(t.device().index == device_, "all-reduce: ", t.str(), " is not on cuda:", device_,
             ", the GPU this process's NCCL communicator uses");
    be.synchronize();
    check(cudaSetDevice(device_), "cudaSetDevice");
    check(ncclAllReduce(t.raw(), t.raw(), size_t(t.numel()), ncclFloat32, ncclSum, comm_, stream_),
          "ncclAllReduce");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize after ncclAllReduce");
  }
  void broadcast(void* data, size_t bytes, int root) override {
    world_.broadcast(data, bytes, root);
  }
  void barrier() override { world_.barrier(); }
  void abort(int code) override {
    // Peers blocked in an NCCL kernel would not notice MPI_Abort's signal as quickly.
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    world_.abort(code);
  }
  std::string describe() const override {
    return str("NCCL on cuda:", device_, ", ", world_.describe());
  }

 private:
  Collective& world_;
  std::unique_ptr<Collective> owned_;  // world_; destroyed after the communicator
  int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace
#endif

bool built_with_nccl() {
#if TX_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

void use_device(std::unique_ptr<Collective>& world, Backend& be) {
#if TX_HAVE_NCCL
  // One process needs no communicator: the plain run stays exactly the plain run.
  if (world->size() > 1 && be.device().type == DeviceType::cuda) {
    auto nccl = std::make_unique<Nccl>(*world, be.device().index);
    nccl->own(std::move(world));
    world = std::move(nccl);
  }
#else
  (void)world;
  (void)be;
#endif
}

}  // namespace tx::train
