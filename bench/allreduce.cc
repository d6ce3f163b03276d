// allreduce: the time of the gradient all-reduce tx-train makes once per update, alone: the
// trainer's own call (train::Collective::all_reduce_sum on a CPU tensor), without the wait for
// a slower process that the training log's allreduce_s includes.
//
// Usage: mpirun -np P allreduce [--numel N] [--iters K]
// N floats (default 7,600,000: the Multi30k configuration's parameters) summed K times after a
// warm-up; rank 0 prints ms per all-reduce and the bytes each process sends per second.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/registry.h"
#include "train/collective.h"

int main(int argc, char** argv) {
  long long numel = 7600000, iters = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    char* end = nullptr;
    const long long v = i + 1 < argc ? std::strtoll(argv[i + 1], &end, 10) : -1;
    if ((flag != "--numel" && flag != "--iters") || v <= 0 || *end) {
      std::fprintf(stderr, "allreduce: usage: mpirun -np P allreduce [--numel N] [--iters K]\n");
      return 2;
    }
    (flag == "--numel" ? numel : iters) = v;
    ++i;
  }
  try {
    std::unique_ptr<tx::train::Collective> world = tx::train::launch_world();
    tx::register_builtin_backends();
    tx::BackendOptions options;
    options.threads = 1;
    std::unique_ptr<tx::Backend> be = tx::create_backend("cpu", options);
    tx::Tensor t = be->zeros({numel});
    be->fill(t, 1.0f);
    world->all_reduce_sum(*be, t);  // warm-up: connections, buffers
    world->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (long long k = 0; k < iters; ++k) world->all_reduce_sum(*be, t);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (world->rank() == 0)
      std::printf("%s: %lld floats: %.2f ms per all-reduce, %.2f GB/s of gradients\n",
                  world->describe().c_str(), numel, 1e3 * secs / double(iters),
                  4e-9 * double(numel) * double(iters) / secs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
