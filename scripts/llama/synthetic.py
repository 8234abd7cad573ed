"""Synthetic llama.cpp models with deterministic random weights, by family and shape.

`qwen35`, `mamba2` and `rwkv7` are random Hugging Face checkpoints (hf_models) put through the
converter (hf_to_gguf), so a synthetic GGUF holds exactly what converting that checkpoint gives.
`qwen3` (a pure transformer) and `granitehybrid` (Mamba-2 layers with a few attention layers,
IBM Granite 4.0's layout) are written directly with llama.cpp's tensor names.
"""
import math

import numpy as np

import hf_models
import hf_to_gguf
from gguf_io import GgufModel, no_vocab

# ---- Direct families ------------------------------------------------------------------------

DIRECT_SHAPES = {
    "qwen3": {
        "tiny": dict(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=128),
    },
    "granitehybrid": {
        # Granite 4.0's pattern scaled down: attention in one layer of four, Mamba-2 elsewhere
        # (llama.cpp supports only expand = 2, d_inner = 2 * hidden).
        "tiny": dict(vocab=256, hidden=64, layers=4, attention_layers=[2], heads=4, kv_heads=2,
                     head_dim=16, ffn=128, ssm_head_dim=16, ssm_state=16, ssm_groups=1,
                     conv=4),
    },
}


def attention_tensors(m, r, i, s, qk_norm):
    h, d = s["hidden"], s["head_dim"]
    m.add(f"blk.{i}.attn_q.weight", r.linear(s["heads"] * d, h))
    m.add(f"blk.{i}.attn_k.weight", r.linear(s["kv_heads"] * d, h))
    m.add(f"blk.{i}.attn_v.weight", r.linear(s["kv_heads"] * d, h))
    m.add(f"blk.{i}.attn_output.weight", r.linear(h, s["heads"] * d, 0.5))
    if qk_norm:
        m.add(f"blk.{i}.attn_q_norm.weight", r.uniform(d, 0.9, 1.1))
        m.add(f"blk.{i}.attn_k_norm.weight", r.uniform(d, 0.9, 1.1))


def ffn_tensors(m, r, i, s):
    m.add(f"blk.{i}.ffn_norm.weight", r.uniform(s["hidden"], 0.9, 1.1))
    m.add(f"blk.{i}.ffn_gate.weight", r.linear(s["ffn"], s["hidden"]))
    m.add(f"blk.{i}.ffn_up.weight", r.linear(s["ffn"], s["hidden"]))
    m.add(f"blk.{i}.ffn_down.weight", r.linear(s["hidden"], s["ffn"], 0.5))


def common_metadata(m, s):
    m.set("{arch}.context_length", 32768)
    m.set("{arch}.embedding_length", s["hidden"])
    m.set("{arch}.block_count", s["layers"])
    m.set("{arch}.feed_forward_length", s["ffn"])
    m.set("{arch}.attention.head_count", s["heads"])
    m.set("{arch}.attention.key_length", s["head_dim"])
    m.set("{arch}.attention.value_length", s["head_dim"])
    m.set("{arch}.attention.layer_norm_rms_epsilon", 1e-6, "f32")
    m.set("{arch}.rope.freq_base", 1e6, "f32")
    no_vocab(m, s["vocab"])


def qwen3(s, seed):
    r = hf_models.Init(seed)
    m = GgufModel("qwen3")
    common_metadata(m, s)
    m.set("{arch}.attention.head_count_kv", s["kv_heads"])
    m.add("token_embd.weight", r.normal((s["vocab"], s["hidden"]), 1.0))
    for i in range(s["layers"]):
        m.add(f"blk.{i}.attn_norm.weight", r.uniform(s["hidden"], 0.9, 1.1))
        attention_tensors(m, r, i, s, qk_norm=True)
        ffn_tensors(m, r, i, s)
    m.add("output_norm.weight", r.uniform(s["hidden"], 0.9, 1.1))
    m.add("output.weight", r.linear(s["vocab"], s["hidden"]))
    return m


def granitehybrid(s, seed):
    r = hf_models.Init(seed)
    h = s["hidden"]
    inner = 2 * h
    heads = inner // s["ssm_head_dim"]
    groups, state = s["ssm_groups"], s["ssm_state"]
    conv_dim = inner + 2 * groups * state
    m = GgufModel("granitehybrid")
    common_metadata(m, s)
    # A layer is recurrent exactly where its KV head count is 0 (granite-hybrid.cpp).
    m.set("{arch}.attention.head_count_kv",
          [s["kv_heads"] if i in s["attention_layers"] else 0 for i in range(s["layers"])],
          "i32[]")
    m.set("{arch}.ssm.conv_kernel", s["conv"])
    m.set("{arch}.ssm.inner_size", inner)
    m.set("{arch}.ssm.state_size", state)
    m.set("{arch}.ssm.time_step_rank", heads)
    m.set("{arch}.ssm.group_count", groups)
    # Granite's muP multipliers, at values that change nothing here but are read and applied.
    m.set("{arch}.embedding_scale", 1.0, "f32")
    m.set("{arch}.residual_scale", 1.0, "f32")
    m.set("{arch}.logit_scale", 1.0, "f32")
    m.set("{arch}.attention.scale", 1.0 / math.sqrt(s["head_dim"]), "f32")
    m.add("token_embd.weight", r.normal((s["vocab"], h), 1.0))
    for i in range(s["layers"]):
        m.add(f"blk.{i}.attn_norm.weight", r.uniform(h, 0.9, 1.1))
        if i in s["attention_layers"]:
            attention_tensors(m, r, i, s, qk_norm=False)
        else:
            m.add(f"blk.{i}.ssm_in.weight", r.linear(2 * inner + 2 * groups * state + heads, h))
            m.add(f"blk.{i}.ssm_conv1d.weight", r.normal((conv_dim, s["conv"]), 0.5))
            m.add(f"blk.{i}.ssm_conv1d.bias", r.normal(conv_dim, 0.1))
            m.add(f"blk.{i}.ssm_dt.bias", r.dt_bias(heads))
            m.add(f"blk.{i}.ssm_a", -np.exp(r.a_log(heads)).reshape(heads, 1))
            m.add(f"blk.{i}.ssm_d", r.uniform((heads, 1), 0.5, 1.5))
            m.add(f"blk.{i}.ssm_norm.weight", r.uniform((groups, inner // groups), 0.8, 1.2))
            m.add(f"blk.{i}.ssm_out.weight", r.linear(h, inner))
        ffn_tensors(m, r, i, s)
    m.add("output_norm.weight", r.uniform(h, 0.9, 1.1))
    m.add("output.weight", r.linear(s["vocab"], h))
    return m


DIRECT = {"qwen3": qwen3, "granitehybrid": granitehybrid}


def families():
    """family -> list of shape names."""
    out = {f: list(hf_models.shapes(f)) for f in hf_models.CHECKPOINTS}
    out.update({f: list(DIRECT_SHAPES[f]) for f in DIRECT})
    return out


def model(family, shape, seed):
    """The GgufModel of `family` at `shape` with weights drawn from `seed`."""
    if family in DIRECT:
        return DIRECT[family](DIRECT_SHAPES[family][shape], seed)
    config, tensors = hf_models.checkpoint(family, shape, seed)
    return hf_to_gguf.convert(config, tensors)
