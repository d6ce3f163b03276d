// Losses and reductions: label-smoothed cross-entropy, R-Drop's symmetric KL and the sum to a
// scalar.
#include "graph/ops.h"

namespace tx::ops {

Var cross_entropy(Graph& g, const Var& logits, const Tensor& targets, float smoothing,
                  int32_t ignore_index, Tensor* nll, bool release_logits) {
  const Tensor& lv = logits->value;
  TX_CHECK(lv.ndim() >= 1, "cross_entropy: logits ", lv.str(), " need at least one dimension");
  const int64_t rows = lv.shape().rows();
  const bool rec = g.recording({&logits});
  Var losses = g.output({rows}, rec);
  Tensor nll_rows;
  if (nll) nll_rows = *nll = g.alloc({rows});
  g.backend().cross_entropy(lv, targets, smoothing, ignore_index, losses->value, nll_rows);
  // The gradient may overwrite the logits only where nothing else reads them: another op's
  // backward that marked them needed, or a view of them (reshape) with a reader of its own.
  const bool read_elsewhere = logits->value_needed;
  if (rec) logits->value_needed = true;
  if (rec)
    g.record([logits, targets, smoothing, ignore_index, losses, release_logits,
              read_elsewhere](Graph& g) {
      if (!losses->grad.defined()) return;
      if (release_logits && !read_elsewhere && !logits->grad.defined() && !logits->persistent &&
          !logits->value.storage_shared()) {
        const Tensor value = logits->value;
        g.backend().cross_entropy_backward(value, targets, smoothing, ignore_index, losses->grad,
                                           value, /*accumulate=*/false);
        logits->grad = value;
        logits->drop_value();
        return;
      }
      const auto [dlogits, accumulate] = g.grad_target(logits);
      g.backend().cross_entropy_backward(logits->value, targets, smoothing, ignore_index,
                                         losses->grad, dlogits, accumulate);
    });
  return losses;
}

Var symmetric_kl(Graph& g, const Var& logits, const Tensor& targets, int32_t ignore_index) {
  const Tensor& lv = logits->value;
  TX_CHECK(lv.ndim() >= 1, "symmetric_kl: logits ", lv.str(), " need at least one dimension");
  const bool rec = g.recording({&logits});
  Var losses = g.output({lv.shape().rows() / 2}, rec);
  g.backend().symmetric_kl(lv, targets, ignore_index, losses->value);
  if (rec) {
    logits->value_needed = true;  // the backward reads them: cross_entropy must not free them
    g.record([logits, targets, ignore_index, losses](Graph& g) {
      if (!losses->grad.defined()) return;
      g.backend().symmetric_kl_backward(logits->value, targets, ignore_index, losses->grad,
                                        g.grad(logits));
    });
  }
  return losses;
}

Var sum(Graph& g, const Var& x) {
  const bool rec = g.recording({&x});
  Var y = g.output({1}, rec);
  g.backend().sum(x->value, y->value);
  if (rec)
    g.record([x, y](Graph& g) {
      if (!y->grad.defined()) return;
      // dx += dy broadcast: add_bias over x seen as [n, 1] adds the one-element dy to every
      // row, on the device (reading dy on the host would stall a GPU).
      const int64_t n = x->value.numel();
      Tensor dx = g.grad(x).view({n, 1});
      g.backend().add_bias(dx, y->grad.view({1}), dx);
    });
  return y;
}

}  // namespace tx::ops
