#include "formats/torch_names.h"

#include "core/error.h"
#include "core/finite.h"

namespace tx::formats {

Mapper::Mapper(io::TensorFile file, std::string where, std::string what)
    : file_(std::move(file)), where_(std::move(where)), what_(std::move(what)) {}

void Mapper::take(const std::string& from, const std::string& to, const Shape& shape) {
  const io::NamedTensor* t = file_.find(from);
  TX_CHECK(t, where_, " has no tensor '", from, "' (", shape.str(),
           "); the file is incomplete or not ", what_);
  // The shape itself, not only the element count: a transposed [in, out] weight has the count
  // and translates to garbage. Leading 1s aside (final_logits_bias is [1, vocab]).
  std::vector<int64_t> dims = t->shape.dims();
  while (dims.size() > shape.dims().size() && dims.front() == 1) dims.erase(dims.begin());
  TX_CHECK(dims == shape.dims() && t->dtype != DType::i32, where_, ": tensor '", from, "' is ",
           t->shape.str(), ", ", shape.str(), " expected from the model's configuration");
  used_.insert(from);
  const std::vector<float> values = t->to_floats();
  check_finite(values.data(), static_cast<int64_t>(values.size()), where_,
               from);  // the file's name
  out_.add(io::NamedTensor::from_floats(to, DType::f32, shape, values));
}

void Mapper::ignore_copy(const std::string& name, const std::string& of, const std::string& why) {
  const io::NamedTensor* copy = file_.find(name);
  const io::NamedTensor* original = file_.find(of);
  used_.insert(name);
  if (!copy || !original) return;
  TX_CHECK(copy->shape == original->shape && copy->dtype == original->dtype &&
               copy->data == original->data,
           where_, ": tensor '", name, "' differs from '", of, "', which ", why,
           " makes the same weights; the file is damaged or edited");
}

void Mapper::check_all_used() const {
  for (const io::NamedTensor& t : file_.tensors)
    TX_CHECK(used_.count(t.name), where_, " has a tensor '", t.name,
             "' that tx does not map; the model has a layer tx does not implement");
}

void take_layers(Mapper& m, const io::ModelConfig& c, const std::string& prefix) {
  const int64_t d = c.d_model;
  for (const std::string side : {"encoder", "decoder"}) {
    const int layers = side == "encoder" ? c.encoder_layers : c.decoder_layers;
    for (int i = 0; i < layers; ++i) {
      const std::string from = prefix + side + ".layers." + std::to_string(i) + ".";
      const std::string to = side + ".layers." + std::to_string(i) + ".";
      auto attention = [&](const std::string& f, const std::string& t) {
        for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
          m.take(from + f + "." + p + ".weight", to + t + "." + p + ".weight", {d, d});
          m.take(from + f + "." + p + ".bias", to + t + "." + p + ".bias", {d});
        }
      };
      auto norm = [&](const std::string& f, const std::string& t) {
        m.take(from + f + ".weight", to + t + ".weight", {d});
        m.take(from + f + ".bias", to + t + ".bias", {d});
      };
      attention("self_attn", "self_attn");
      norm("self_attn_layer_norm", "self_attn_norm");
      if (side == "decoder") {
        attention("encoder_attn", "cross_attn");
        norm("encoder_attn_layer_norm", "cross_attn_norm");
      }
      m.take(from + "fc1.weight", to + "ffn.fc1.weight", {c.d_ff, d});
      m.take(from + "fc1.bias", to + "ffn.fc1.bias", {c.d_ff});
      m.take(from + "fc2.weight", to + "ffn.fc2.weight", {d, c.d_ff});
      m.take(from + "fc2.bias", to + "ffn.fc2.bias", {d});
      norm("final_layer_norm", "ffn_norm");
    }
  }
}

}  // namespace tx::formats
