"""Writes a tx model in Marian's layout back as a Marian model.npz.

A tx model Marian can run: one fine-tuned from a Marian model (`tx-train --pretrained-model
model.npz`), or one trained from scratch with Marian's layout (--positions halves --norm-eps
1e-6 --decoder-start-id -1 --output-bias, and Marian's activation and tying); Marian takes eos
and unk from the SentencePiece vocabulary, so tx's own vocab.spm serves. TEMPLATE.npz is a
Marian model of the same shape (the original, or `marian.py train --init` with the same
dimensions and vocab.spm): its array names, shapes and special:model.yml are kept, each array
takes the tx parameter that lib/formats/marian.cc maps it to (weights back to Marian's [in,
out], vectors to [1, n]). Every template array must find its parameter, every parameter must be
used and the template's options must match the model's, else the script stops naming why.

This is how bench/peers/marian.py gets a Marian model trained further than Marian's CPU
trainer can in a session (README.md, "A Marian model trained by tx").

Usage: tx_to_marian.py TX_MODEL.safetensors TEMPLATE.npz OUT.npz
"""
import json
import re
import sys

import numpy as np
import yaml
from safetensors_np import read_safetensors

# Marian name -> (tx name, how): "T" transposed ([in, out] <-> [out, in]), "V" a [1, n] vector,
# "M" a matrix as is. The inverse of lib/formats/marian.cc's mapping.
LAYER = re.compile(r"^(encoder|decoder)_l(\d+)_(self|context|ffn)_(.+)$")
NORM = re.compile(r"^(?:Wo|ffn)_ln_(scale|bias)(?:_pre)?$")


def tx_name(name):
    fixed = {
        "Wemb": ("embed_tokens.weight", "M"),
        "encoder_Wemb": ("encoder.embed_tokens.weight", "M"),
        "decoder_Wemb": ("decoder.embed_tokens.weight", "M"),
        "decoder_ff_logit_out_Wt": ("decoder.output_proj.weight", "M"),
        "decoder_ff_logit_out_W": ("decoder.output_proj.weight", "T"),
        "decoder_ff_logit_out_b": ("decoder.output_proj.bias", "V"),
    }
    if name in fixed:
        return fixed[name]
    m = re.match(r"^(encoder|decoder)_(emb|top)_ln_(scale|bias)(?:_pre)?$", name)
    if m:
        part = "embed_norm" if m.group(2) == "emb" else "final_norm"
        return f"{m.group(1)}.{part}.{'weight' if m.group(3) == 'scale' else 'bias'}", "V"
    m = LAYER.match(name)
    if not m:
        return None
    side, layer, block, rest = m.group(1), int(m.group(2)) - 1, m.group(3), m.group(4)
    prefix = f"{side}.layers.{layer}."
    n = NORM.match(rest)
    if n:
        norm = {"self": "self_attn_norm", "context": "cross_attn_norm", "ffn": "ffn_norm"}[block]
        return prefix + norm + (".weight" if n.group(1) == "scale" else ".bias"), "V"
    if block == "ffn":
        f = re.match(r"^([Wb])([12])$", rest)
        if not f:
            return None
        return prefix + f"ffn.fc{f.group(2)}." + ("weight" if f.group(1) == "W" else "bias"), (
            "T" if f.group(1) == "W" else "V")
    a = re.match(r"^([Wb])([qkvo])$", rest)
    if not a:
        return None
    attn = "self_attn" if block == "self" else "cross_attn"
    proj = "out" if a.group(2) == "o" else a.group(2)
    return prefix + f"{attn}.{proj}_proj." + ("weight" if a.group(1) == "W" else "bias"), (
        "T" if a.group(1) == "W" else "V")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tx_path, template_path, out_path = sys.argv[1:]
    tensors, meta = read_safetensors(tx_path, "tx_to_marian")
    tensors = {k: v.astype(np.float32) for k, v in tensors.items()}
    config = json.loads(meta.get("tx.model_config", "{}"))
    # Marian's conventions, which a model fine-tuned from a Marian model keeps.
    want = {"decoder_start_id": -1, "positions": "halves", "position_offset": 0,
            "embed_scale": True, "norm_eps": 1e-6}
    for key, value in want.items():
        if config.get(key) != value and not (key == "norm_eps" and
                                             abs(config.get(key, 0) - value) < 1e-9):
            sys.exit(f"tx_to_marian: {tx_path} has {key} = {config.get(key)!r}, Marian's is "
                     f"{value!r}: train it from a Marian model or with Marian's layout")
    template = np.load(template_path)
    yml = yaml.safe_load(bytes(template["special:model.yml"]).rstrip(b"\0").decode())
    same = {"dim-emb": config.get("d_model"), "transformer-dim-ffn": config.get("d_ff"),
            "transformer-heads": config.get("heads"), "enc-depth": config.get("encoder_layers"),
            "dec-depth": config.get("decoder_layers"),
            "transformer-ffn-activation": config.get("activation"),
            "output-omit-bias": not config.get("output_bias")}
    for key, value in same.items():
        if yml.get(key) != value:
            sys.exit(f"tx_to_marian: the template has {key} {yml.get(key)!r}, {tx_path} "
                     f"{value!r}; make the template with the model's options")
    out = {}
    used = set()
    for name in template.files:
        old = template[name]
        if name.startswith("special:"):
            out[name] = old
            continue
        mapped = tx_name(name)
        if mapped is None or mapped[0] not in tensors:
            sys.exit(f"tx_to_marian: the template's array '{name}' has no tx parameter "
                     f"({mapped[0] if mapped else 'no mapping'}); is {tx_path} trained from "
                     f"{template_path}?")
        t, how = mapped
        value = tensors[t].T if how == "T" else tensors[t].reshape(old.shape)
        if value.shape != old.shape:
            sys.exit(f"tx_to_marian: '{name}' is {old.shape} in the template, {t} gives "
                     f"{value.shape}; is {tx_path} trained from {template_path}?")
        out[name] = np.ascontiguousarray(value, dtype=np.float32)
        used.add(t)
    left = sorted(set(tensors) - used)
    if left:
        sys.exit(f"tx_to_marian: {len(left)} tx parameters have no place in the template "
                 f"(first: {left[0]}); is {tx_path} trained from {template_path}?")
    # Uncompressed, as marian writes it.
    with open(out_path, "wb") as f:
        np.savez(f, **out)
    print(f"tx_to_marian: wrote {out_path} ({len(out)} arrays)", file=sys.stderr)


if __name__ == "__main__":
    main()
