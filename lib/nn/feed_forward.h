// FeedForward: the position-wise network of the paper, d_model -> d_ff (ReLU or Swish) -> d_model.
#pragma once

#include "graph/ops.h"
#include "io/model_config.h"
#include "nn/linear.h"

namespace tx::nn {

class FeedForward {
 public:
  FeedForward() = default;
  // Parameters under "<scope>.fc1" [d_ff, d_model] and "<scope>.fc2" [d_model, d_ff].
  // relu_dropout applies after the activation (0 in the paper).
  FeedForward(ParamScope scope, int64_t d_model, int64_t d_ff, float relu_dropout = 0.0f,
              io::Activation activation = io::Activation::relu);

  Var forward(Graph& g, const Var& x) const;
  // Linear::prepare_inference of both layers.
  void prepare_inference(Backend& be, ops::WeightForm form) {
    fc1_.prepare_inference(be, form);
    fc2_.prepare_inference(be, form);
  }

 private:
  Linear fc1_, fc2_;
  float relu_dropout_ = 0.0f;
  io::Activation activation_ = io::Activation::relu;
};

}  // namespace tx::nn
