"""Reading and writing the two file formats of scripts/llama: safetensors (Hugging Face
checkpoints, as prefixd-hybrid reads them) and GGUF (through llama.cpp's own gguf-py).

A model here is a `GgufModel`: llama.cpp's architecture name, its metadata as (key, value, type)
and its tensors by GGUF name as numpy arrays. numpy shapes are GGUF's `ne` reversed, which is
the Hugging Face [out, in] order: a GGUF tensor with ne {n_embd, n_vocab} is a numpy array of
shape (n_vocab, n_embd).
"""
import json
import os
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def import_gguf():
    """llama.cpp's gguf-py: from PREFIXD_LLAMA_GGUF_PY, else the pinned copy in .deps."""
    path = os.environ.get("PREFIXD_LLAMA_GGUF_PY") or os.path.join(REPO, ".deps", "llama.cpp",
                                                                    "gguf-py")
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        import gguf  # noqa: E402  (found only through the path above)
    except ImportError as e:
        sys.exit(f"llama.cpp's gguf-py not found in {path} ({e}): set PREFIXD_LLAMA_GGUF_PY to "
                 "the gguf-py folder of the llama.cpp source tree, or run scripts/fetch-llama.sh")
    return gguf


# ---- safetensors ----------------------------------------------------------------------------

def write_safetensors(path, tensors):
    """tensors: name -> array, stored as F32 in insertion order."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    arrays = []
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(data.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        arrays.append(data)
        offset += data.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays:
            a.tofile(f)


def read_safetensors(path):
    """name -> float32 array, for F32, F16 and BF16 tensors."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        chunk = raw[base + begin:base + end]
        dtype = info["dtype"]
        if dtype == "F32":
            values = chunk.view("<f4").astype(np.float32)
        elif dtype == "F16":
            values = chunk.view("<f2").astype(np.float32)
        elif dtype == "BF16":
            values = (chunk.view("<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype} (F32, F16, BF16 only)")
        out[name] = values.reshape(info["shape"])
    return out


def read_checkpoint(directory):
    """config.json and every model*.safetensors of a Hugging Face checkpoint directory."""
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)  # Python's json reads a bare Infinity too
    tensors = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(directory, name)))
    if not tensors:
        raise ValueError(f"{directory}: no .safetensors file")
    return config, tensors


def write_checkpoint(directory, config, tensors):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors)


# ---- GGUF -----------------------------------------------------------------------------------

@dataclass
class GgufModel:
    arch: str
    metadata: list = field(default_factory=list)  # (key with {arch}, value, kind)
    tensors: dict = field(default_factory=dict)  # GGUF name -> numpy array

    def set(self, key, value, kind="u32"):
        self.metadata.append((key, value, kind))

    def add(self, name, array):
        if name in self.tensors:
            raise ValueError(f"tensor {name} written twice")
        self.tensors[name] = np.ascontiguousarray(array, dtype=np.float32)


def no_vocab(model, n_vocab):
    """No tokenizer: llama.cpp's "none" vocabulary with n_vocab dummy tokens (llama-vocab.cpp
    reads {arch}.vocab_size for it), so callers feed token ids."""
    model.set("tokenizer.ggml.model", "none", "str")
    model.set("{arch}.vocab_size", n_vocab)


# Tensors kept in F32 whatever --type says: vectors, convolutions, norms, SSM parameters
# (llama.cpp's converter does the same; ggml's CPU ops for them want F32).
def keeps_f32(name, array):
    return array.ndim != 2 or min(array.shape) == 1 or any(
        part in name for part in ("norm", "conv1d", "ssm_a", "ssm_d", "lerp", "r_k"))


def write_gguf(model, path, weight_type="f32"):
    """Writes `model` to `path`; big matrices in weight_type (f32 or f16)."""
    gguf = import_gguf()
    writer = gguf.GGUFWriter(path, model.arch)
    for key, value, kind in model.metadata:
        key = key.format(arch=model.arch)
        if kind == "u32":
            writer.add_uint32(key, int(value))
        elif kind == "f32":
            writer.add_float32(key, float(value))
        elif kind == "str":
            writer.add_string(key, value)
        elif kind == "bool":
            writer.add_bool(key, bool(value))
        elif kind == "i32[]":
            writer.add_key_value(key, [int(v) for v in value], gguf.GGUFValueType.ARRAY,
                                 sub_type=gguf.GGUFValueType.INT32)
        else:
            raise ValueError(kind)
    file_type = gguf.LlamaFileType.MOSTLY_F16 if weight_type == "f16" else gguf.LlamaFileType.ALL_F32
    writer.add_file_type(file_type)
    for name, array in model.tensors.items():
        if weight_type == "f16" and not keeps_f32(name, array):
            array = array.astype(np.float16)
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
