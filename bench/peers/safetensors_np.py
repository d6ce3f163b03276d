"""Reads a safetensors file into numpy arrays, for the converters here (no torch needed)."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32}


def read_safetensors(path, who):
    """The tensors (name -> numpy array) and the metadata of a safetensors file; `who` names
    the calling script in the error for a dtype it cannot take."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            sys.exit(f"{who}: tensor {name} has dtype {e['dtype']}; convert f32 models")
        b, end = e["data_offsets"]
        tensors[name] = np.frombuffer(data[b:end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"]).copy()
    return tensors, meta
