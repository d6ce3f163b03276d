// The parameter names that fairseq's Transformer and Hugging Face's MarianMTModel (a
// descendant of fairseq's BART code) share, mapped to tx's: the readers of both formats take
// their files' tensors through one Mapper and one layer table.
#pragma once

#include <set>
#include <string>

#include "io/model_config.h"
#include "io/tensor_file.h"

namespace tx::formats {

// Takes file tensors by name into tx's names, as f32; every file tensor must find a place.
// `where` names the file in errors, `what` the model it should be ("a MarianMTModel").
class Mapper {
 public:
  Mapper(io::TensorFile file, std::string where, std::string what);
  const io::NamedTensor* find(const std::string& name) const { return file_.find(name); }
  void take(const std::string& from, const std::string& to, const Shape& shape);
  void ignore(const std::string& name) { used_.insert(name); }
  // A tied copy of `of` the reader does not take: absent, or equal to `of` in shape and bytes
  // (else the file's two differ where the model's options say they are one, and which one the
  // engine would use is not tx's guess to make); `why` names those options.
  void ignore_copy(const std::string& name, const std::string& of, const std::string& why);
  void check_all_used() const;
  io::TensorFile result() { return std::move(out_); }

 private:
  io::TensorFile file_, out_;
  std::string where_, what_;
  std::set<std::string> used_;
};

// Every encoder and decoder layer of `c`: "<prefix>encoder.layers.N.self_attn.q_proj.weight"
// and the rest (self_attn, self_attn_layer_norm, encoder_attn, encoder_attn_layer_norm, fc1,
// fc2, final_layer_norm) to tx's names.
void take_layers(Mapper& m, const io::ModelConfig& c, const std::string& prefix);

}  // namespace tx::formats
