// The backends compiled into this build, registered by name.
#include <mutex>

#include "backend/registry.h"

namespace tx {

void register_cpu_backend();
#ifdef TX_HAVE_CUDA
void register_cuda_backend();
#endif

void register_builtin_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_backend();
#ifdef TX_HAVE_CUDA
    register_cuda_backend();
#else
    register_backend({"cuda", nullptr, [] {
                        return std::string("this build has no CUDA backend (configured without nvcc)");
                      }});
#endif
  });
}

}  // namespace tx
