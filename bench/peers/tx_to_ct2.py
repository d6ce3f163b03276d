"""Converts a tx model (model.safetensors + vocab.spm) to a CTranslate2 model directory.

Post-norm Transformer, ReLU, tied embeddings: the same weights give the same numbers. The facts
that make the two identical: weights stay [out, in]; self-attention linear[0] is the row
concatenation Q|K|V and linear[1] the output; cross-attention linear[0] = Q, linear[1] = K|V,
linear[2] = output; embeddings scaled by sqrt(d_model); tx's own position table (positions from
0, sin/cos interleaved: CTranslate2's built-in one differs); the shared embedding is also the
output projection, without bias; source gets eos, decoding starts from <s>.

Usage: tx_to_ct2.py MODEL.safetensors VOCAB.spm OUT_DIR [--quantization int8]
"""
import argparse
import json
import os
import sys

import numpy as np
import sentencepiece as spm
from ctranslate2.specs import common_spec, transformer_spec
from safetensors_np import read_safetensors

def position_table(length, d_model):
    """tx's sinusoid (lib/backend/device_math.h): PE(p, 2i) = sin(p / 10000^(2i/D)),
    PE(p, 2i+1) = cos(...), computed in double, positions from 0."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    i = np.arange(d_model)
    freq = np.power(10000.0, -(i - i % 2) / d_model)
    angle = pos * freq[None, :]
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


def set_linear(spec, w, b=None):
    spec.weight = np.ascontiguousarray(w)
    if b is not None:
        spec.bias = np.ascontiguousarray(b)


def set_norm(spec, t, prefix):
    spec.gamma = t[prefix + ".weight"]
    spec.beta = t[prefix + ".bias"]


def set_self_attention(spec, t, p):
    set_linear(spec.linear[0],
               np.concatenate([t[f"{p}.{x}_proj.weight"] for x in "qkv"]),
               np.concatenate([t[f"{p}.{x}_proj.bias"] for x in "qkv"]))
    set_linear(spec.linear[1], t[f"{p}.out_proj.weight"], t[f"{p}.out_proj.bias"])


def set_ffn(spec, t, p):
    set_linear(spec.linear_0, t[p + ".ffn.fc1.weight"], t[p + ".ffn.fc1.bias"])
    set_linear(spec.linear_1, t[p + ".ffn.fc2.weight"], t[p + ".ffn.fc2.bias"])
    set_norm(spec.layer_norm, t, p + ".ffn_norm")


def convert(model_path, vocab_path, out_dir, quantization=None):
    t, meta = read_safetensors(model_path, "tx_to_ct2")
    c = json.loads(meta["tx.model_config"])
    if c["pre_norm"] or c["tied_embeddings"] != "all":
        sys.exit("tx_to_ct2: only post-norm models with all embeddings tied are supported")
    spec = transformer_spec.TransformerSpec.from_config(
        (c["encoder_layers"], c["decoder_layers"]), c["heads"], pre_norm=False,
        activation=common_spec.Activation.RELU)
    emb = t["embed_tokens.weight"]
    table = position_table(c["max_length"], c["d_model"])
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = emb
    enc.scale_embeddings = True
    enc.position_encodings.encodings = table
    for i, layer in enumerate(enc.layer):
        p = f"encoder.layers.{i}"
        set_self_attention(layer.self_attention, t, p + ".self_attn")
        set_norm(layer.self_attention.layer_norm, t, p + ".self_attn_norm")
        set_ffn(layer.ffn, t, p)
    dec.embeddings.weight = emb
    dec.scale_embeddings = True
    dec.position_encodings.encodings = table
    dec.projection.weight = emb
    for i, layer in enumerate(dec.layer):
        p = f"decoder.layers.{i}"
        set_self_attention(layer.self_attention, t, p + ".self_attn")
        set_norm(layer.self_attention.layer_norm, t, p + ".self_attn_norm")
        a = layer.attention
        set_linear(a.linear[0], t[p + ".cross_attn.q_proj.weight"], t[p + ".cross_attn.q_proj.bias"])
        set_linear(a.linear[1],
                   np.concatenate([t[p + ".cross_attn.k_proj.weight"], t[p + ".cross_attn.v_proj.weight"]]),
                   np.concatenate([t[p + ".cross_attn.k_proj.bias"], t[p + ".cross_attn.v_proj.bias"]]))
        set_linear(a.linear[2], t[p + ".cross_attn.out_proj.weight"], t[p + ".cross_attn.out_proj.bias"])
        set_norm(a.layer_norm, t, p + ".cross_attn_norm")
        set_ffn(layer.ffn, t, p)
    sp = spm.SentencePieceProcessor(model_file=vocab_path)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.add_source_eos = True
    spec.config.bos_token = "<s>"
    spec.config.eos_token = "</s>"
    spec.config.unk_token = "<unk>"
    spec.config.decoder_start_token = "<s>"
    spec.config.layer_norm_epsilon = c["norm_eps"]
    spec.validate()
    spec.optimize(quantization=quantization)
    os.makedirs(out_dir, exist_ok=True)
    spec.save(out_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("vocab")
    ap.add_argument("out_dir")
    ap.add_argument("--quantization", default=None)
    a = ap.parse_args()
    convert(a.model, a.vocab, a.out_dir, a.quantization)


if __name__ == "__main__":
    main()
