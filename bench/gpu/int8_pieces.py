"""A tx model file as int8 pieces small enough for the device tool's return (8 files of 16 MiB,
64 MiB in all), and back.

  python3 int8_pieces.py pack MODEL.safetensors OUT_DIR    # on the GPU machine
  python3 int8_pieces.py unpack OUT_DIR MODEL.safetensors  # here: f32 again, same metadata (less tx.crc32)

Each 2-D f32 tensor becomes int8 with one f32 scale per row (max |x| / 127); other tensors stay
f32. The unpacked model is the rounded one: measure its BLEU, not the GPU's model's.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "peers"))
from safetensors_np import read_safetensors  # noqa: E402

PIECE = 15 * 1024 * 1024  # under the 16 MiB a returned file may hold


def pack(model, out):
    tensors, meta = read_safetensors(model, "int8_pieces")
    blob, index = bytearray(), {}
    for name, x in tensors.items():
        entry = {"shape": list(x.shape), "offset": len(blob)}
        if x.ndim == 2 and x.dtype == np.float32:
            scale = np.abs(x).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            q = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
            blob += scale.astype(np.float32).tobytes() + q.tobytes()
            entry["kind"] = "int8_rows"
        else:
            blob += x.astype(np.float32).tobytes()
            entry["kind"] = "f32"
        entry["end"] = len(blob)
        index[name] = entry
    os.makedirs(out, exist_ok=True)
    pieces = (len(blob) + PIECE - 1) // PIECE
    if pieces > 7:
        sys.exit(f"int8_pieces: {len(blob)} bytes make {pieces} pieces; the tool returns 8 files")
    for i in range(pieces):
        with open(os.path.join(out, f"piece{i}.bin"), "wb") as f:
            f.write(blob[i * PIECE:(i + 1) * PIECE])
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"pieces": pieces, "metadata": meta, "tensors": index}, f)
    print(f"int8_pieces: {len(index)} tensors, {len(blob)} bytes in {pieces} pieces")


def unpack(src, model):
    with open(os.path.join(src, "index.json")) as f:
        index = json.load(f)
    blob = b"".join(open(os.path.join(src, f"piece{i}.bin"), "rb").read()
                    for i in range(index["pieces"]))
    header, data = {}, bytearray()
    for name, e in index["tensors"].items():
        raw = blob[e["offset"]:e["end"]]
        shape = e["shape"]
        if e["kind"] == "int8_rows":
            scale = np.frombuffer(raw[:4 * shape[0]], dtype=np.float32)
            q = np.frombuffer(raw[4 * shape[0]:], dtype=np.int8).reshape(shape)
            x = (q.astype(np.float32) * scale[:, None]).astype(np.float32)
        else:
            x = np.frombuffer(raw, dtype=np.float32).reshape(shape)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(data), len(data) + x.nbytes]}
        data += x.tobytes()
    # The weights are the int8 pieces' now, not those tx's checksums were written for.
    header["__metadata__"] = {k: v for k, v in index["metadata"].items() if k != "tx.crc32"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(model + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    os.replace(model + ".tmp", model)
    print(f"int8_pieces: wrote {model} ({len(index['tensors'])} tensors)")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])
