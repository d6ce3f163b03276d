// The CUDA backend opens cuBLAS on first use (backends/cuda/lazy/cublas_on_demand.cc): no
// program maps it at start-up, and the first call loads it and forwards. Runs without a GPU.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#ifdef TX_HAVE_CUDA
#include <cublas_v2.h>
#endif

namespace {

// The NEEDED entries of an ELF file's dynamic section, as readelf prints them.
std::string needed_libraries(const std::string& path) {
  std::string out;
  FILE* p = popen(("readelf -d '" + path + "' 2>&1").c_str(), "r");
  REQUIRE(p);
  char line[512];
  while (fgets(line, sizeof line, p))
    if (std::string(line).find("(NEEDED)") != std::string::npos) out += line;
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("cuda loading: the programs start without cuBLAS", "[apps]") {
  for (const char* bin : {TX_TRANSLATE_BIN, TX_SCORE_BIN, TX_TRAIN_BIN}) {
    const std::string needed = needed_libraries(bin);
    INFO(bin << " needs:\n" << needed);
    CHECK(needed.find("libc.so") != std::string::npos);  // readelf read the file
    CHECK(needed.find("libcublas") == std::string::npos);
  }
}

#ifdef TX_HAVE_CUDA
TEST_CASE("cuda loading: the first cuBLAS call opens the library and forwards to it", "[cuda]") {
  // No device needed: the status strings are cuBLAS's own text ("success", "the library was
  // not initialized" in cuBLAS 13), which no stand-in of ours supplies.
  const std::string ok = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  const std::string uninitialised = cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK_THAT(ok, Catch::Contains("success", Catch::CaseSensitive::No));
  CHECK_THAT(uninitialised, Catch::Contains("initialized", Catch::CaseSensitive::No));
}
#endif
