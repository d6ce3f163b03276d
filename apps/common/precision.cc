#include "common/precision.h"

#include "common/app_log.h"
#include "core/error.h"

namespace tx::app {

DType checked_precision(const Options& options, const Backend& be) {
  const std::string p = options.text("precision");
  if (p == "fp32") return DType::f32;
  const DType dtype = p == "bf16" ? DType::bf16 : DType::f16;
  if (options.declares("int8") && options.flag("int8"))
    throw UsageError(
        str("--int8 and --precision ", p, " each choose the weights' form; give one of them"));
  const std::string missing = be.half_gemm_missing(dtype);
  if (missing.empty()) return dtype;
  if (dtype == DType::bf16)
    throw UsageError(str("--precision bf16: ", missing, "; use --precision fp32 on --device ",
                         be.name(), ", or a GPU"));
  info(options, "--precision fp16 on ", be.name(), ": ", missing,
       ", so its GEMMs run in fp32 on fp16-rounded operands: fp16's numerics at fp32's speed "
       "or less");
  return dtype;
}

}  // namespace tx::app
