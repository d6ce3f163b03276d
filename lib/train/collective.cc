#include "train/collective.h"

#include <cstdint>
#include <cstdlib>
#include <string>

namespace tx::train {
namespace {

class SingleProcess final : public Collective {
 public:
  int size() const override { return 1; }
  int rank() const override { return 0; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void all_reduce_sum(Backend&, const Tensor&) override {}
  void broadcast(void*, size_t, int) override {}
  void barrier() override {}
  void abort(int) override {}
  std::string describe() const override { return "1 process"; }
};

// A count from the environment variable `name`, at least `least`; -1 when unset or not one.
int env_count(const char* name, long least = 1) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return (*end == '\0' && n >= least && n < (1L << 30)) ? int(n) : -1;
}

}  // namespace

std::string broadcast_text(Collective& world, const std::string& text, int root) {
  uint64_t bytes = text.size();
  world.broadcast(&bytes, sizeof bytes, root);
  std::string out = world.rank() == root ? text : std::string(bytes, '\0');
  if (bytes > 0) world.broadcast(out.data(), bytes, root);
  return out;
}

std::optional<nlohmann::json> first_if_different(Collective& world, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  const std::string first = broadcast_text(world, text, 0);
  if (first == text) return std::nullopt;
  return nlohmann::json::parse(first);
}

std::unique_ptr<Collective> single_process() {
  return std::make_unique<SingleProcess>();
}

namespace {

// PMIx gives a process its rank but no size variable; srun (--mpi=pmix) says the step's. Only
// that pair is read, for the count and the rank alike.
bool srun_pmix() {
  return env_count("PMIX_RANK", 0) >= 0 && env_count("SLURM_STEP_NUM_TASKS") > 0;
}

}  // namespace

int launched_processes() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const int n = env_count(name); n > 0) return n;
  return srun_pmix() ? env_count("SLURM_STEP_NUM_TASKS") : 1;
}

int launched_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK"})
    if (const int r = env_count(name, 0); r >= 0) return r;
  return srun_pmix() ? env_count("PMIX_RANK", 0) : 0;
}

}  // namespace tx::train
