// Embedding: a learned table [vocab, d_model] looked up by token id and scaled (by sqrt(d_model)).
#pragma once

#include "graph/ops.h"
#include "nn/param_scope.h"

namespace tx::nn {

class Embedding {
 public:
  Embedding() = default;
  // Parameter "<scope>.weight" [vocab, d_model], drawn from Normal(0, d_model^-0.5): with the
  // sqrt(d_model) lookup scale the embedded tokens then have unit variance, the scale of the
  // sinusoidal positions added to them (as in fairseq).
  Embedding(ParamScope scope, int64_t vocab, int64_t d_model);

  // ids i32 [...] -> [..., d_model] = scale * weight[ids] (paper section 3.4: scale
  // sqrt(d_model)); id -1 gives a zero row.
  Var forward(Graph& g, const Tensor& ids, float scale) const;

  // The table as a weight [vocab, d_model]: the pre-softmax projection when it is tied.
  const Var& weight() const { return weight_; }
  int64_t vocab() const { return vocab_; }
  int64_t d_model() const { return d_model_; }

 private:
  Var weight_;
  int64_t vocab_ = 0;
  int64_t d_model_ = 0;
};

}  // namespace tx::nn
