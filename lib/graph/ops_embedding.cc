// Embedding lookup: gather rows forward, scatter-add rows backward.
#include "graph/ops.h"

namespace tx::ops {

Var embedding(Graph& g, const Var& table, const Tensor& ids, float scale) {
  const Tensor& tv = table->value;
  TX_CHECK(tv.ndim() == 2, "embedding: table ", tv.str(), " must be [vocab, d_model]");
  TX_CHECK(ids.defined() && ids.dtype() == DType::i32, "embedding: ids ", ids.str(),
           " must be an i32 tensor");
  const int64_t m = ids.numel(), d = tv.dim(1);
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(d);
  const bool rec = g.recording({&table});
  Var y = g.output(Shape(dims), rec);
  Tensor flat_ids = ids.view({m});
  g.backend().gather_rows(tv, flat_ids, y->value.view({m, d}), scale);
  if (rec)
    g.record([table, y, flat_ids, m, d, scale](Graph& g) {
      if (y->grad.defined())
        g.backend().scatter_add_rows(y->grad.view({m, d}), flat_ids, g.grad(table), scale);
    });
  return y;
}

}  // namespace tx::ops
