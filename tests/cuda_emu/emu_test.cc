// The emulation's own checks: each kernel here breaks one rule a GPU holds a kernel to, and the
// emulation must stop it (in a forked child, since it stops by signal) or show it.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <vector>

#include "cuda_runtime.h"

namespace {

// Runs f in a child process; its termination signal, or 0 when it returned.
template <typename F>
int dies_by(F f) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // Catch2's handlers would report the signal as this test's failure.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE}) std::signal(sig, SIG_DFL);
    std::freopen("/dev/null", "w", stderr);  // the emulation's own message
    f();
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

__global__ void write_at(float* p, long i) {
  if (threadIdx.x == 0) p[i] = 1.0f;
}

__global__ void shuffle_all(float* out) {
  const float v = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
  out[threadIdx.x] = v;
}

__global__ void shuffle_after_exit(float* out) {
  if (threadIdx.x == 31) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
}

__global__ void noop() {}

// Block b reads block b - 1's write of the same launch: no GPU promises that order.
__global__ void read_previous_block(int* cells) {
  if (threadIdx.x == 0) cells[blockIdx.x + 1] = cells[blockIdx.x] + 1;
}

float* device_floats(size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(float)) == cudaSuccess);
  return static_cast<float*>(p);
}

}  // namespace

TEST_CASE("cuda emulation: a write one element past a device block faults", "[emu]") {
  CHECK(dies_by([] {
          float* p = device_floats(5);
          TX_LAUNCH(write_at, 1, 32, nullptr)(p, 4L);
          cudaFree(p);
        }) == 0);
  CHECK(dies_by([] {
          float* p = device_floats(5);
          TX_LAUNCH(write_at, 1, 32, nullptr)(p, 5L);
        }) == SIGSEGV);
  // cudaFree of a pointer cudaMalloc did not return.
  CHECK(dies_by([] {
          float* p = device_floats(5);
          cudaFree(p + 1);
        }) == SIGABRT);
}

TEST_CASE("cuda emulation: shuffles need all 32 lanes live, launches sm_90's limits", "[emu]") {
  CHECK(dies_by([] {
          float* out = device_floats(64);
          TX_LAUNCH(shuffle_all, 1, 64, nullptr)(out);
        }) == 0);
  CHECK(dies_by([] {
          float* out = device_floats(48);
          TX_LAUNCH(shuffle_all, 1, 48, nullptr)(out);  // a partial second warp
        }) == SIGABRT);
  CHECK(dies_by([] {
          float* out = device_floats(32);
          TX_LAUNCH(shuffle_after_exit, 1, 32, nullptr)(out);
        }) == SIGABRT);
  CHECK(dies_by([] { TX_LAUNCH(noop, dim3(1, 65535), 1, nullptr)(); }) == 0);
  CHECK(dies_by([] { TX_LAUNCH(noop, 1, 1024, nullptr)(); }) == 0);
  CHECK(dies_by([] { TX_LAUNCH(noop, dim3(1, 65536), 32, nullptr)(); }) == SIGABRT);
  CHECK(dies_by([] { TX_LAUNCH(noop, 1, dim3(1, 1, 65), nullptr)(); }) == SIGABRT);
  CHECK(dies_by([] { TX_LAUNCH(noop, 1, 1025, nullptr)(); }) == SIGABRT);
}

TEST_CASE("cuda emulation: overlapping copies abort", "[emu]") {
  CHECK(dies_by([] {
          float* p = device_floats(8);
          cudaMemcpyAsync(p, p + 4, 4 * sizeof(float), cudaMemcpyDeviceToDevice, nullptr);
        }) == 0);
  CHECK(dies_by([] {
          float* p = device_floats(8);
          cudaMemcpyAsync(p, p + 2, 4 * sizeof(float), cudaMemcpyDeviceToDevice, nullptr);
        }) == SIGABRT);
}

TEST_CASE("cuda emulation: consecutive launches run blocks in opposite orders", "[emu]") {
  // In order, each block sees its predecessor's write (a chain 0, 1, 2, ...); backwards, none
  // does. Two launches in a row give both, so a kernel that leans on the order differs.
  std::vector<std::vector<int>> seen;
  for (int launch = 0; launch < 2; ++launch) {
    void* p = nullptr;
    REQUIRE(cudaMalloc(&p, 9 * sizeof(int)) == cudaSuccess);
    std::vector<int> cells(9, 0);
    cudaMemcpyAsync(p, cells.data(), 9 * sizeof(int), cudaMemcpyHostToDevice, nullptr);
    TX_LAUNCH(read_previous_block, 8, 32, nullptr)(static_cast<int*>(p));
    cudaMemcpyAsync(cells.data(), p, 9 * sizeof(int), cudaMemcpyDeviceToHost, nullptr);
    cudaFree(p);
    seen.push_back(cells);
  }
  const std::vector<int> chain = {0, 1, 2, 3, 4, 5, 6, 7, 8}, ones = {0, 1, 1, 1, 1, 1, 1, 1, 1};
  CHECK(seen[0] != seen[1]);
  CHECK((seen[0] == chain || seen[0] == ones));
  CHECK((seen[1] == chain || seen[1] == ones));
}
