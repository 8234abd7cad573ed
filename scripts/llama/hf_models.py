"""Random-weight Hugging Face checkpoints (config.json fields and tensor names as transformers /
flash-linear-attention write them, and as prefixd-hybrid reads them) for the families that both
prefixd-hybrid and llama.cpp run: Qwen3.5 (`qwen35`), Mamba-2 (`mamba2`) and RWKV-7 (`rwkv7`).

`checkpoint(family, shape, seed)` returns (config, tensors); the same seed gives the same values.
Weight scales keep activations of order one through thousands of tokens: unit-variance
embeddings, linear layers with variance 1/fan_in, norms near their identity, decays in range.
"""
import math

import numpy as np

# ---- Shapes ---------------------------------------------------------------------------------

QWEN35_COMMON = {
    "model_type": "qwen3_5_text", "architectures": ["Qwen3_5ForCausalLM"], "hidden_act": "silu",
    "rms_norm_eps": 1e-6, "head_dim": 256, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
    "tie_word_embeddings": True, "attention_bias": False, "max_position_embeddings": 262144,
    "full_attention_interval": 4, "rope_theta": 1e7, "partial_rotary_factor": 0.25,
}

SHAPES = {
    "qwen35": {
        # prefixd-hybrid's built-in `tiny` (benchmarks/hybrid/config.cc): GQA 2:1, GDN value
        # heads sharing key heads 2:1 (so llama.cpp's V-head reordering matters), output gate.
        "tiny": dict(QWEN35_COMMON, vocab_size=512, hidden_size=64, intermediate_size=128,
                     num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
                     linear_key_head_dim=16, linear_value_head_dim=16),
        # Qwen3.5-0.8B (../shared/reference/qwen35-arch.md) with the vocabulary cut from 248320
        # to 4096 so the file is 1 GB in F16 instead of 1.5 GB.
        "qwen3.5-0.8b": dict(QWEN35_COMMON, vocab_size=4096, hidden_size=1024,
                             intermediate_size=3584, num_hidden_layers=24,
                             num_attention_heads=8, num_key_value_heads=2,
                             linear_num_value_heads=16),
    },
    "mamba2": {
        "tiny": dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, state_size=16,
                     head_dim=16, n_groups=1, conv_kernel=4, expand=2, chunk_size=64,
                     tie_word_embeddings=False),
    },
    "rwkv7": {
        # head_dim 64 as in every released RWKV-7: llama.cpp's group norm has eps 64e-5 built in,
        # which is fla's head_dim * norm_eps only for head_dim 64.
        "tiny": dict(vocab_size=256, hidden_size=128, num_hidden_layers=2, head_dim=64,
                     decay_low_rank_dim=32, a_low_rank_dim=32, v_low_rank_dim=16,
                     gate_low_rank_dim=32, intermediate_size=512),
    },
}


def shapes(family):
    return SHAPES[family]


# ---- Random values --------------------------------------------------------------------------

class Init:
    """Deterministic draws from one numpy Generator, in call order, as float32 (the checkpoints
    are fp32; a 0.8B model's float64 draws would need 4 GB)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def linear(self, out_dim, in_dim, gain=1.0):
        return self.normal((out_dim, in_dim), gain / math.sqrt(in_dim))

    def normal(self, shape, std):
        return self.rng.normal(0, std, shape).astype(np.float32)

    def uniform(self, shape, low, high):
        return self.rng.uniform(low, high, shape).astype(np.float32)

    def a_log(self, n):
        return np.log(self.rng.uniform(1, 16, n)).astype(np.float32)

    def dt_bias(self, n):
        """softplus⁻¹ of dt drawn log-uniformly in [1e-3, 1e-1], as Mamba initialises it."""
        dt = np.exp(self.rng.uniform(np.log(1e-3), np.log(1e-1), n))
        return (dt + np.log(-np.expm1(-dt))).astype(np.float32)


def f32(tensors):
    return {k: np.asarray(v, dtype=np.float32) for k, v in tensors.items()}


# ---- Qwen3.5 --------------------------------------------------------------------------------

def qwen35_config(shape):
    c = dict(shape)
    interval = c.pop("full_attention_interval")
    c["layer_types"] = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                        for i in range(c["num_hidden_layers"])]
    half = int(c["head_dim"] * c["partial_rotary_factor"]) // 2
    # M-RoPE sections sum to the rotated frequency pairs ([11, 11, 10] for head_dim 256); for text
    # all three positions are equal, so they do not change the result.
    first = -(-half // 3)
    second = -(-(half - first) // 2)
    c["rope_parameters"] = {"rope_type": "default", "rope_theta": c.pop("rope_theta"),
                            "partial_rotary_factor": c.pop("partial_rotary_factor"),
                            "mrope_section": [first, second, half - first - second],
                            "mrope_interleaved": True}
    return c


def qwen35_checkpoint(shape, seed):
    c = qwen35_config(shape)
    r = Init(seed)
    h, ffn, vocab = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hk, hv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    heads, kv, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    conv_dim = 2 * hk * dk + hv * dv
    zero_norm = lambda n: r.uniform(n, -0.1, 0.1)  # Qwen3.5's norms compute (1 + w)
    # Tied embeddings at unit scale make every token predict itself (the residual stream keeps its
    # own embedding); at 0.1 the layers decide.
    embed_std = 0.1 if c["tie_word_embeddings"] else 1.0
    t = {"model.embed_tokens.weight": r.normal((vocab, h), embed_std)}
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = zero_norm(h)
        if kind == "linear_attention":
            a = p + "linear_attn."
            t[a + "in_proj_qkv.weight"] = r.linear(conv_dim, h)
            t[a + "in_proj_z.weight"] = r.linear(hv * dv, h)
            t[a + "in_proj_b.weight"] = r.linear(hv, h)
            t[a + "in_proj_a.weight"] = r.linear(hv, h)
            t[a + "conv1d.weight"] = r.uniform((conv_dim, 1, c["linear_conv_kernel_dim"]), -0.5, 0.5)
            t[a + "A_log"] = r.a_log(hv)
            t[a + "dt_bias"] = r.dt_bias(hv)
            t[a + "norm.weight"] = r.uniform(dv, 0.9, 1.1)
            t[a + "out_proj.weight"] = r.linear(h, hv * dv, 0.5)
        else:
            a = p + "self_attn."
            t[a + "q_proj.weight"] = r.linear(heads * d * 2, h)
            t[a + "k_proj.weight"] = r.linear(kv * d, h)
            t[a + "v_proj.weight"] = r.linear(kv * d, h)
            t[a + "o_proj.weight"] = r.linear(h, heads * d, 0.5)
            t[a + "q_norm.weight"] = zero_norm(d)
            t[a + "k_norm.weight"] = zero_norm(d)
        t[p + "post_attention_layernorm.weight"] = zero_norm(h)
        t[p + "mlp.gate_proj.weight"] = r.linear(ffn, h)
        t[p + "mlp.up_proj.weight"] = r.linear(ffn, h)
        t[p + "mlp.down_proj.weight"] = r.linear(h, ffn, 0.5)
    t["model.norm.weight"] = zero_norm(h)
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = r.linear(vocab, h)
    return c, f32(t)


# ---- Mamba-2 --------------------------------------------------------------------------------

def mamba2_config(shape):
    c = dict(shape)
    c["num_heads"] = c["expand"] * c["hidden_size"] // c["head_dim"]
    c.update({
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "use_bias": False,
        "use_conv_bias": True, "hidden_act": "silu", "rms_norm": True, "residual_in_fp32": True,
        "layer_norm_epsilon": 1e-5, "time_step_limit": [0.0, float("inf")],
    })
    return c


def mamba2_checkpoint(shape, seed):
    c = mamba2_config(shape)
    r = Init(seed)
    h, heads, state, groups = c["hidden_size"], c["num_heads"], c["state_size"], c["n_groups"]
    inner = heads * c["head_dim"]
    conv_dim = inner + 2 * groups * state
    t = {"backbone.embeddings.weight": r.normal((c["vocab_size"], h), 1.0)}
    for i in range(c["num_hidden_layers"]):
        p = f"backbone.layers.{i}."
        t[p + "norm.weight"] = r.uniform(h, 0.8, 1.2)
        t[p + "mixer.in_proj.weight"] = r.linear(2 * inner + 2 * groups * state + heads, h)
        t[p + "mixer.conv1d.weight"] = r.normal((conv_dim, 1, c["conv_kernel"]), 0.5)
        t[p + "mixer.conv1d.bias"] = r.normal(conv_dim, 0.1)
        t[p + "mixer.dt_bias"] = r.dt_bias(heads)
        t[p + "mixer.A_log"] = r.a_log(heads)
        t[p + "mixer.D"] = r.uniform(heads, 0.5, 1.5)
        t[p + "mixer.norm.weight"] = r.uniform(inner, 0.8, 1.2)
        t[p + "mixer.out_proj.weight"] = r.linear(h, inner)
    t["backbone.norm_f.weight"] = r.uniform(h, 0.8, 1.2)
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = r.linear(c["vocab_size"], h)
    return c, f32(t)


# ---- RWKV-7 ---------------------------------------------------------------------------------

def rwkv7_config(shape):
    c = dict(shape)
    c.update({
        "architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "attn": None,
        "num_heads": None, "hidden_ratio": c["intermediate_size"] / c["hidden_size"],
        "hidden_act": "sqrelu", "norm_first": True, "norm_bias": True, "norm_eps": 1e-5,
        "tie_word_embeddings": False, "fuse_norm": True,
    })
    return c


def rwkv7_checkpoint(shape, seed):
    c = rwkv7_config(shape)
    r = Init(seed)
    D, N, ffn = c["hidden_size"], c["head_dim"], c["intermediate_size"]
    t = {"model.embeddings.weight": r.normal((c["vocab_size"], D), 1.0)}

    def lora(name, rank, bias=True):
        t[name + ".lora.0.weight"] = r.linear(rank, D)
        t[name + ".lora.2.weight"] = r.linear(D, rank)
        if bias:
            t[name + ".lora.2.bias"] = r.normal(D, 0.5)

    def layer_norm(name):
        t[name + ".weight"] = r.uniform(D, 0.8, 1.2)
        t[name + ".bias"] = r.normal(D, 0.1)

    for i in range(c["num_hidden_layers"]):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.attn."
        if i == 0:
            layer_norm(p + "pre_norm")
        layer_norm(p + "attn_norm")
        layer_norm(p + "ffn_norm")
        for m in ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g"):
            t[a + m] = r.uniform((1, 1, D), 0, 1)
        t[a + "k_k"] = r.uniform(D, 0.5, 1.0)
        t[a + "k_a"] = r.uniform(D, 0.8, 1.2)
        t[a + "r_k"] = r.normal((D // N, N), 0.3)
        for m in ("r_proj", "k_proj", "v_proj", "o_proj"):
            t[a + m + ".weight"] = r.linear(D, D)
        lora(a + "w_lora", c["decay_low_rank_dim"])
        lora(a + "a_lora", c["a_low_rank_dim"])
        if i > 0:
            lora(a + "v_lora", c["v_low_rank_dim"])
        lora(a + "g_lora", c["gate_low_rank_dim"], bias=False)
        t[a + "g_norm.weight"] = r.uniform(D, 0.8, 1.2)
        t[a + "g_norm.bias"] = r.normal(D, 0.1)
        t[p + "ffn.x_k"] = r.uniform(D, 0, 1)
        t[p + "ffn.key.weight"] = r.linear(ffn, D)
        t[p + "ffn.value.weight"] = r.linear(D, ffn)
    layer_norm("model.norm")
    t["lm_head.weight"] = r.linear(c["vocab_size"], D)
    return c, f32(t)


CHECKPOINTS = {"qwen35": qwen35_checkpoint, "mamba2": mamba2_checkpoint,
               "rwkv7": rwkv7_checkpoint}


def checkpoint(family, shape, seed, **overrides):
    """(config, tensors) of a random checkpoint; overrides change shape fields (n_groups=2)."""
    fields = dict(SHAPES[family][shape], **overrides)
    return CHECKPOINTS[family](fields, seed)
