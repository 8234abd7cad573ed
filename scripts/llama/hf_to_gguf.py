"""Hugging Face checkpoints (config.json + safetensors) to llama.cpp models, for Qwen3.5, Mamba-2
and RWKV-7: the tensor names, metadata keys and value transformations of llama.cpp's own
converter (convert_hf_to_gguf.py and conversion/{qwen,mamba,rwkv}.py of the pinned release),
restated here because that converter needs torch.

What the converter does, per family (all of it is applied here):
- Qwen3.5: every RMSNorm weight but the GDN gated norm gets +1 (HF stores them zero-centred);
  A_log becomes A = -exp(A_log); dt_bias is stored as ssm_dt.bias; conv1d [C, 1, K] is squeezed
  to [C, K]; when value heads outnumber key heads, every V-head-indexed tensor (the V rows of
  in_proj_qkv and of conv1d, in_proj_z, in_proj_b, in_proj_a, A_log, dt_bias, and the columns
  of out_proj) is reordered from grouped-by-key-head to tiled order, because ggml broadcasts
  key heads over value heads as h mod Hk; the M-RoPE sections default to [11, 11, 10, 0].
- Mamba-2: A = -exp(A_log) and D as [H, 1]; conv1d squeezed; the gated norm as [G, d_inner/G].
- RWKV-7 (fla names): the six token-shift mixes x_r..x_g stacked into time_mix_lerp_fused;
  LoRA A/B/bias to *1/*2/*0; r_k flattened; layer 0's unused v0/v1/v2 filled with a copy of
  a0/a1/a2, as the converter does so that the loader finds them.

Not done: vocabulary (the model gets llama.cpp's "none" tokenizer with the checkpoint's
vocab_size; Mamba-2's converter would also pad the vocabulary to a multiple of 16), MTP layers,
quantisation.
"""
import numpy as np

from gguf_io import GgufModel, no_vocab


def text_config(config):
    return dict(config, **config.get("text_config", {}))


def strip_prefix(tensors, prefixes):
    """Qwen3.5 VLM checkpoints keep the text model under model.language_model.; vision and MTP
    tensors are not part of the text model."""
    out = {}
    for name, value in tensors.items():
        if name.startswith(("model.visual.", "mtp.", "model.mtp.")):
            continue
        for p in prefixes:
            if name.startswith(p):
                name = "model." + name[len(p):]
                break
        out[name] = value
    return out


# ---- Qwen3.5 --------------------------------------------------------------------------------

def tile_v_heads(a, axis, n_k, per_k, head_dim):
    """Grouped V-head order [k0v0, k0v1, .., k1v0, ..] to tiled [k0v0, k1v0, .., k0v1, ..]."""
    a = np.moveaxis(a, axis, 0)
    rest = a.shape[1:]
    a = a.reshape((n_k, per_k, head_dim) + rest).swapaxes(0, 1).reshape((-1,) + rest)
    return np.moveaxis(a, 0, axis)


def qwen35_rope_sections(c):
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    sections = list(rope.get("mrope_section", c.get("mrope_section", [11, 11, 10])))
    return (sections + [0, 0, 0, 0])[:4]


def qwen35_rope(c):
    rope = c.get("rope_parameters") or c.get("rope_scaling") or {}
    theta = rope.get("rope_theta", c.get("rope_theta", 10000.0))
    factor = rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25))
    return theta, factor


def qwen35_metadata(m, c):
    n_layers = c["num_hidden_layers"]
    interval = c.get("full_attention_interval", 4)
    types = c.get("layer_types")
    expected = ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
                for i in range(n_layers)]
    # llama.cpp's qwen35 loader derives the layer kinds from the interval alone.
    if types is not None and list(types) != expected:
        raise ValueError("layer_types is not every full_attention_interval-th layer attention")
    if c["linear_key_head_dim"] != c["linear_value_head_dim"]:
        raise ValueError("llama.cpp's qwen35 needs linear_key_head_dim == linear_value_head_dim")
    theta, factor = qwen35_rope(c)
    m.set("{arch}.context_length", c.get("max_position_embeddings", 262144))
    m.set("{arch}.embedding_length", c["hidden_size"])
    m.set("{arch}.block_count", n_layers)
    m.set("{arch}.feed_forward_length", c["intermediate_size"])
    m.set("{arch}.attention.head_count", c["num_attention_heads"])
    m.set("{arch}.attention.head_count_kv", c["num_key_value_heads"])
    m.set("{arch}.attention.key_length", c["head_dim"])
    m.set("{arch}.attention.value_length", c["head_dim"])
    m.set("{arch}.attention.layer_norm_rms_epsilon", c.get("rms_norm_eps", 1e-6), "f32")
    m.set("{arch}.rope.freq_base", theta, "f32")
    m.set("{arch}.rope.dimension_count", int(c["head_dim"] * factor))
    m.set("{arch}.rope.dimension_sections", qwen35_rope_sections(c), "i32[]")
    m.set("{arch}.ssm.conv_kernel", c["linear_conv_kernel_dim"])
    m.set("{arch}.ssm.state_size", c["linear_key_head_dim"])
    m.set("{arch}.ssm.group_count", c["linear_num_key_heads"])
    m.set("{arch}.ssm.time_step_rank", c["linear_num_value_heads"])
    m.set("{arch}.ssm.inner_size", c["linear_value_head_dim"] * c["linear_num_value_heads"])
    m.set("{arch}.full_attention_interval", interval)


QWEN35_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def qwen35_layer_tensor(c, suffix, a):
    """One layer tensor, with the converter's value changes."""
    n_k, n_v = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
    if suffix.startswith("linear_attn.") and n_v != n_k:
        per_k = n_v // n_k
        qk = 2 * n_k * dk
        if suffix in ("linear_attn.in_proj_qkv.weight", "linear_attn.conv1d.weight"):
            a = np.concatenate([a[:qk], tile_v_heads(a[qk:], 0, n_k, per_k, dv)])
        elif suffix == "linear_attn.in_proj_z.weight":
            a = tile_v_heads(a, 0, n_k, per_k, dv)
        elif suffix in ("linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight",
                        "linear_attn.A_log", "linear_attn.dt_bias"):
            a = tile_v_heads(a, 0, n_k, per_k, 1)
        elif suffix == "linear_attn.out_proj.weight":
            a = tile_v_heads(a, 1, n_k, per_k, dv)
    if suffix == "linear_attn.A_log":
        a = -np.exp(a.astype(np.float64))
    elif suffix == "linear_attn.conv1d.weight":
        a = a.reshape(a.shape[0], a.shape[-1])
    elif suffix.endswith("norm.weight") and suffix != "linear_attn.norm.weight":
        a = a + 1.0  # stored zero-centred; llama.cpp's RMSNorm multiplies by the weight
    return a


def qwen35(config, tensors):
    c = text_config(config)
    t = strip_prefix(tensors, ["model.language_model."])
    m = GgufModel("qwen35")
    qwen35_metadata(m, c)
    no_vocab(m, c["vocab_size"])
    m.add("token_embd.weight", t.pop("model.embed_tokens.weight"))
    for i in range(c["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        for name in [n for n in t if n.startswith(prefix)]:
            suffix = name[len(prefix):]
            if suffix not in QWEN35_NAMES:
                raise ValueError(f"unexpected tensor {name}")
            m.add(f"blk.{i}.{QWEN35_NAMES[suffix]}", qwen35_layer_tensor(c, suffix, t.pop(name)))
    m.add("output_norm.weight", t.pop("model.norm.weight") + 1.0)
    lm_head = t.pop("lm_head.weight", None)
    if lm_head is not None and not c.get("tie_word_embeddings", False):
        m.add("output.weight", lm_head)
    if t:
        raise ValueError(f"tensors not converted: {sorted(t)[:5]}")
    return m


# ---- Mamba-2 --------------------------------------------------------------------------------

MAMBA2_NAMES = {
    "norm.weight": "attn_norm.weight",
    "mixer.in_proj.weight": "ssm_in.weight",
    "mixer.conv1d.weight": "ssm_conv1d.weight",
    "mixer.conv1d.bias": "ssm_conv1d.bias",
    "mixer.dt_bias": "ssm_dt.bias",
    "mixer.A_log": "ssm_a",
    "mixer.D": "ssm_d",
    "mixer.norm.weight": "ssm_norm.weight",
    "mixer.out_proj.weight": "ssm_out.weight",
}


def mamba2(config, tensors):
    c = text_config(config)
    t = {n.removeprefix("model."): v for n, v in tensors.items()}  # Mamba-Codestral's names
    d_model = c["hidden_size"]
    d_inner = int(c.get("expand", 2) * d_model)
    head_dim = c.get("head_dim", 64)
    groups = c.get("n_groups", 1)
    if d_inner % head_dim:
        raise ValueError("expand * hidden_size is not a multiple of head_dim")
    m = GgufModel("mamba2")
    m.set("{arch}.context_length", 2 ** 20)
    m.set("{arch}.embedding_length", d_model)
    m.set("{arch}.feed_forward_length", 0)
    m.set("{arch}.attention.head_count", 0)
    m.set("{arch}.block_count", c["num_hidden_layers"])
    m.set("{arch}.ssm.conv_kernel", c.get("conv_kernel", 4))
    m.set("{arch}.ssm.inner_size", d_inner)
    m.set("{arch}.ssm.state_size", c.get("state_size", 128))
    m.set("{arch}.ssm.time_step_rank", d_inner // head_dim)
    m.set("{arch}.ssm.group_count", groups)
    m.set("{arch}.attention.layer_norm_rms_epsilon", c.get("layer_norm_epsilon", 1e-5), "f32")
    no_vocab(m, c["vocab_size"])
    m.add("token_embd.weight", t.pop("backbone.embeddings.weight"))
    for i in range(c["num_hidden_layers"]):
        prefix = f"backbone.layers.{i}."
        for name in [n for n in t if n.startswith(prefix)]:
            suffix = name[len(prefix):]
            if suffix not in MAMBA2_NAMES:
                raise ValueError(f"unexpected tensor {name}")
            a = t.pop(name)
            if suffix == "mixer.conv1d.weight":
                a = a.reshape(a.shape[0], a.shape[-1])
            elif suffix == "mixer.A_log":
                a = -np.exp(a.astype(np.float64)).reshape(-1, 1)
            elif suffix == "mixer.D":
                a = a.reshape(-1, 1)
            elif suffix == "mixer.norm.weight":
                a = a.reshape(groups, d_inner // groups)
            m.add(f"blk.{i}.{MAMBA2_NAMES[suffix]}", a)
    m.add("output_norm.weight", t.pop("backbone.norm_f.weight"))
    lm_head = t.pop("lm_head.weight", None)
    if lm_head is not None and not c.get("tie_word_embeddings", False):
        m.add("output.weight", lm_head)
    if t:
        raise ValueError(f"tensors not converted: {sorted(t)[:5]}")
    return m


# ---- RWKV-7 ---------------------------------------------------------------------------------

RWKV7_NAMES = {
    "attn_norm.weight": "attn_norm.weight", "attn_norm.bias": "attn_norm.bias",
    "ffn_norm.weight": "attn_norm_2.weight", "ffn_norm.bias": "attn_norm_2.bias",
    "attn.k_k": "time_mix_k_k.weight", "attn.k_a": "time_mix_k_a.weight",
    "attn.r_k": "time_mix_r_k.weight",
    "attn.r_proj.weight": "time_mix_receptance.weight",
    "attn.k_proj.weight": "time_mix_key.weight",
    "attn.v_proj.weight": "time_mix_value.weight",
    "attn.o_proj.weight": "time_mix_output.weight",
    "attn.g_norm.weight": "time_mix_ln.weight", "attn.g_norm.bias": "time_mix_ln.bias",
    "ffn.x_k": "channel_mix_lerp_k.weight",
    "ffn.key.weight": "channel_mix_key.weight",
    "ffn.value.weight": "channel_mix_value.weight",
}
# fla's LoRA MLPs: lora.0 is the down projection (A), lora.2 the up projection (B) and its bias.
for _lora, _x in (("w", "w"), ("a", "a"), ("v", "v"), ("g", "g")):
    RWKV7_NAMES[f"attn.{_lora}_lora.lora.0.weight"] = f"time_mix_{_x}1.weight"
    RWKV7_NAMES[f"attn.{_lora}_lora.lora.2.weight"] = f"time_mix_{_x}2.weight"
    RWKV7_NAMES[f"attn.{_lora}_lora.lora.2.bias"] = f"time_mix_{_x}0.weight"
RWKV7_MIXES = ("x_r", "x_w", "x_k", "x_v", "x_a", "x_g")


def rwkv7_lora_rank(c, key, exponent, multiplier):
    if c.get(key) is not None:
        return c[key]
    return max(1, round(c["hidden_size"] ** exponent * multiplier / 32)) * 32


def rwkv7(config, tensors):
    c = text_config(config)
    t = dict(tensors)
    D = c["hidden_size"]
    if any(".attn.x_x" in n for n in t) or "model.layers.0.attn.w_lora.lora.0.weight" not in t:
        raise ValueError("RWKV-7: only flash-linear-attention's tensor names are supported")
    m = GgufModel("rwkv7")
    m.set("{arch}.context_length", 1048576)
    m.set("{arch}.embedding_length", D)
    m.set("{arch}.block_count", c["num_hidden_layers"])
    m.set("{arch}.attention.layer_norm_epsilon", c.get("norm_eps", 1e-5), "f32")
    m.set("{arch}.wkv.head_size", c.get("head_dim", 64))
    m.set("{arch}.attention.decay_lora_rank", rwkv7_lora_rank(c, "decay_low_rank_dim", 0.5, 1.8))
    m.set("{arch}.attention.iclr_lora_rank", rwkv7_lora_rank(c, "a_low_rank_dim", 0.5, 1.8))
    m.set("{arch}.attention.value_residual_mix_lora_rank",
          rwkv7_lora_rank(c, "v_low_rank_dim", 0.5, 1.3))
    m.set("{arch}.attention.gate_lora_rank", rwkv7_lora_rank(c, "gate_low_rank_dim", 0.8, 0.6))
    m.set("{arch}.feed_forward_length", c.get("intermediate_size") or 4 * D)
    m.set("{arch}.attention.head_count", 0)
    no_vocab(m, c["vocab_size"])
    m.add("token_embd.weight", t.pop("model.embeddings.weight"))
    m.add("token_embd_norm.weight", t.pop("model.layers.0.pre_norm.weight"))
    m.add("token_embd_norm.bias", t.pop("model.layers.0.pre_norm.bias"))
    for i in range(c["num_hidden_layers"]):
        prefix = f"model.layers.{i}."
        mixes = [t.pop(f"{prefix}attn.{x}").reshape(1, 1, D) for x in RWKV7_MIXES]
        m.add(f"blk.{i}.time_mix_lerp_fused.weight", np.stack(mixes))
        for name in sorted(n for n in t if n.startswith(prefix)):
            suffix = name[len(prefix):]
            if suffix not in RWKV7_NAMES:
                raise ValueError(f"unexpected tensor {name}")
            a = t.pop(name)
            if i == 0 and suffix.startswith("attn.v_lora"):
                continue  # layer 0 has no value residual; replaced by a copy below
            a = a.reshape(-1) if a.ndim != 2 or suffix == "attn.r_k" else a
            m.add(f"blk.{i}.{RWKV7_NAMES[suffix]}", a)
        if i == 0:
            for part in ("0", "1", "2"):
                m.add(f"blk.0.time_mix_v{part}.weight", m.tensors[f"blk.0.time_mix_a{part}.weight"])
    m.add("output_norm.weight", t.pop("model.norm.weight"))
    m.add("output_norm.bias", t.pop("model.norm.bias"))
    m.add("output.weight", t.pop("lm_head.weight"))
    if t:
        raise ValueError(f"tensors not converted: {sorted(t)[:5]}")
    return m


CONVERTERS = {"qwen35": qwen35, "mamba2": mamba2, "rwkv7": rwkv7}


def family_of(config):
    """qwen35, mamba2 or rwkv7, from config.json's model_type."""
    kind = config.get("model_type", "")
    if kind in ("qwen3_5", "qwen3_5_text"):
        return "qwen35"
    if kind in ("mamba2",):
        return "mamba2"
    if kind in ("rwkv7",):
        return "rwkv7"
    raise ValueError(f"config.json: model_type '{kind}' (qwen3_5, mamba2 or rwkv7)")


def convert(config, tensors):
    return CONVERTERS[family_of(config)](config, tensors)
