#!/usr/bin/env python3
"""prefixd-hybrid's Mamba-2 and RWKV-7 against numpy re-statements of the upstream math, on
random-weight Hugging Face checkpoints with the upstream tensor names and config.json fields.

For each family this writes config.json and model.safetensors into a temporary directory (as
transformers / flash-linear-attention lay them out: Mamba-2 under "backbone.", RWKV-7 under
"model.", Python's bare Infinity in Mamba-2's time_step_limit), runs `prefixd-hybrid forward
--model DIR --weights DIR` on a prompt, and compares its logits with float64 numpy:

- Mamba-2 as transformers' torch_forward prefills without a cache: the chunked SSD scan
  (intra-chunk "attention" through segment sums, chunk states, the inter-chunk recurrence),
  with a prompt that is not a multiple of the chunk size. prefixd-hybrid runs the sequential
  recurrence instead, so this also checks that the two forms agree. One departure from
  transformers: the gated RMSNorm normalises each group of d_inner / n_groups channels on its
  own, as the original mamba_ssm Mamba-2 does (RMSNormGated(group_size=d_ssm // ngroups)), and
  llama.cpp and vLLM with it. transformers' Mamba2 normalises over all of d_inner, a known
  upstream bug (transformers PR #40861; Zamba2 fixed the same in #35943) that computes models
  with more than one group (Mamba-Codestral-7B has 8) wrongly. It runs with n_groups = 2, where
  the two norms differ, and n_groups = 1, where they agree.
- RWKV-7 as BlinkDL's reference computes it, token by token.

Usage: hybrid_families_upstream_test.py PATH/TO/prefixd-hybrid
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

RNG = np.random.default_rng(20261130)


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def f32(a):
    """The values exactly as stored (fp32), in float64 for the reference."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def rms_norm(x, w, eps):
    return w * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


# ---- Mamba-2 --------------------------------------------------------------------------------

MAMBA = dict(hidden=32, layers=2, heads=8, head_dim=8, state=8, groups=2, conv=4, vocab=97,
             chunk=8, eps=1e-5)


def mamba2_checkpoint(c):
    inter = c["heads"] * c["head_dim"]
    conv_dim = inter + 2 * c["groups"] * c["state"]
    proj = 2 * inter + 2 * c["groups"] * c["state"] + c["heads"]
    t = {"backbone.embeddings.weight": RNG.normal(0, 1, (c["vocab"], c["hidden"]))}
    for i in range(c["layers"]):
        p = f"backbone.layers.{i}."
        t[p + "norm.weight"] = RNG.uniform(0.8, 1.2, c["hidden"])
        t[p + "mixer.in_proj.weight"] = RNG.normal(0, c["hidden"] ** -0.5, (proj, c["hidden"]))
        t[p + "mixer.conv1d.weight"] = RNG.normal(0, 0.5, (conv_dim, 1, c["conv"]))
        t[p + "mixer.conv1d.bias"] = RNG.normal(0, 0.1, conv_dim)
        dt = np.exp(RNG.uniform(np.log(1e-3), np.log(1e-1), c["heads"]))
        t[p + "mixer.dt_bias"] = dt + np.log(-np.expm1(-dt))
        t[p + "mixer.A_log"] = np.log(RNG.uniform(1, 16, c["heads"]))
        t[p + "mixer.D"] = RNG.uniform(0.5, 1.5, c["heads"])
        t[p + "mixer.norm.weight"] = RNG.uniform(0.8, 1.2, inter)
        t[p + "mixer.out_proj.weight"] = RNG.normal(0, inter ** -0.5, (c["hidden"], inter))
    t["backbone.norm_f.weight"] = RNG.uniform(0.8, 1.2, c["hidden"])
    t["lm_head.weight"] = RNG.normal(0, c["hidden"] ** -0.5, (c["vocab"], c["hidden"]))
    config = {
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
        "hidden_size": c["hidden"], "num_hidden_layers": c["layers"], "state_size": c["state"],
        "expand": 2, "head_dim": c["head_dim"], "num_heads": c["heads"], "n_groups": c["groups"],
        "conv_kernel": c["conv"], "vocab_size": c["vocab"], "layer_norm_epsilon": c["eps"],
        "use_bias": False, "use_conv_bias": True, "hidden_act": "silu", "rms_norm": True,
        "residual_in_fp32": True, "chunk_size": c["chunk"], "tie_word_embeddings": False,
        "time_step_limit": [0.0, float("inf")],  # json.dumps writes a bare Infinity
    }
    return config, t


def segment_sum(x):
    """[..., T] -> [..., T, T]: out[i, j] = x[j+1] + ... + x[i] for j <= i, -inf above."""
    T = x.shape[-1]
    cs = np.cumsum(x, axis=-1)
    out = cs[..., :, None] - cs[..., None, :]
    return np.where(np.tril(np.ones((T, T), dtype=bool)), out, -np.inf)


def ssd_chunked(x, dt, A, B, C, chunk):
    """x [L, H, P], dt [L, H], A [H], B/C [L, H, N] -> y [L, H, P]: the SSD scan by chunks."""
    L, H, P = x.shape
    pad = (-L) % chunk
    padded = lambda a: np.concatenate([a, np.zeros((pad,) + a.shape[1:])])
    xs, dA = padded(x * dt[..., None]), padded(dt * A)
    Bs, Cs = padded(B), padded(C)
    n_chunks = (L + pad) // chunk
    xs = xs.reshape(n_chunks, chunk, H, P)
    dA = dA.reshape(n_chunks, chunk, H).transpose(2, 0, 1)  # [H, c, l]
    Bs = Bs.reshape(n_chunks, chunk, H, -1)
    Cs = Cs.reshape(n_chunks, chunk, H, -1)
    cum = np.cumsum(dA, axis=-1)
    # Within a chunk: y_t += Σ_{s≤t} (C_t·B_s) exp(Σ_{s<r≤t} dA_r) dt_s x_s.
    decay_in = np.exp(segment_sum(dA))  # [H, c, l, s]
    scores = np.einsum("clhn,cshn->chls", Cs, Bs) * decay_in.transpose(1, 0, 2, 3)
    y_diag = np.einsum("chls,cshp->clhp", scores, xs)
    # Each chunk's own contribution to the state at its end, then the recurrence over chunks.
    to_end = np.exp(cum[:, :, -1:] - cum)  # [H, c, l]
    chunk_states = np.einsum("cshn,hcs,cshp->chpn", Bs, to_end, xs)
    states = np.zeros((n_chunks + 1, H, P, Bs.shape[-1]))
    for k in range(n_chunks):
        states[k + 1] = states[k] * np.exp(cum[:, k, -1])[:, None, None] + chunk_states[k]
    # The state entering each chunk, decayed to each position and read by C.
    y_off = np.einsum("clhn,chpn,hcl->clhp", Cs, states[:-1], np.exp(cum))
    return (y_diag + y_off).reshape(-1, H, P)[:L]


def gated_group_rms_norm(y, z, w, groups, eps):
    """mamba_ssm's RMSNormGated, gate first: each of `groups` slices of y * silu(z) on its own."""
    gated = (y * silu(z)).reshape(*y.shape[:-1], groups, -1)
    return rms_norm(gated, w.reshape(groups, -1), eps).reshape(y.shape)


def mamba2_reference(c, t, tokens, norm_groups=None):
    """norm_groups=1 normalises over all of d_inner, as transformers' Mamba2 does."""
    inter, H, P, N, G = (c["heads"] * c["head_dim"], c["heads"], c["head_dim"], c["state"],
                         c["groups"])
    g = {k: f32(v) for k, v in t.items()}
    x = g["backbone.embeddings.weight"][tokens]
    for i in range(c["layers"]):
        p = f"backbone.layers.{i}.mixer."
        h = rms_norm(x, g[f"backbone.layers.{i}.norm.weight"], c["eps"])
        proj = h @ g[p + "in_proj.weight"].T
        z, xbc, dt = proj[:, :inter], proj[:, inter:-H], proj[:, -H:]
        w = g[p + "conv1d.weight"][:, 0, :]  # [channels, K]
        K = w.shape[1]
        padded = np.concatenate([np.zeros((K - 1, xbc.shape[1])), xbc])
        conv = sum(w[:, j] * padded[j:j + len(tokens)] for j in range(K)) + g[p + "conv1d.bias"]
        conv = silu(conv)
        xs = conv[:, :inter].reshape(-1, H, P)
        B = np.repeat(conv[:, inter:inter + G * N].reshape(-1, G, N), H // G, axis=1)
        C = np.repeat(conv[:, inter + G * N:].reshape(-1, G, N), H // G, axis=1)
        dt = softplus(dt + g[p + "dt_bias"])
        A = -np.exp(g[p + "A_log"])
        y = ssd_chunked(xs, dt, A, B, C, c["chunk"]) + g[p + "D"][:, None] * xs
        y = gated_group_rms_norm(y.reshape(len(tokens), inter), z, g[p + "norm.weight"],
                                 norm_groups or G, c["eps"])
        x = x + y @ g[p + "out_proj.weight"].T
    return rms_norm(x[-1], g["backbone.norm_f.weight"], c["eps"]) @ g["lm_head.weight"].T


# ---- RWKV-7 ---------------------------------------------------------------------------------

RWKV = dict(hidden=32, layers=2, head_dim=8, w=8, a=8, v=4, g=8, ffn=64, vocab=97, eps=1e-5)


def rwkv7_checkpoint(c):
    D, heads = c["hidden"], c["hidden"] // c["head_dim"]
    t = {"model.embeddings.weight": RNG.normal(0, 1, (c["vocab"], D))}

    def lora(name, rank, bias=True):
        t[name + ".lora.0.weight"] = RNG.normal(0, D ** -0.5, (rank, D))
        t[name + ".lora.2.weight"] = RNG.normal(0, rank ** -0.5, (D, rank))
        if bias:
            t[name + ".lora.2.bias"] = RNG.normal(0, 0.5, D)

    for i in range(c["layers"]):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.attn."
        norms = ["attn_norm", "ffn_norm"] + (["pre_norm"] if i == 0 else [])
        for n in norms:
            t[p + n + ".weight"] = RNG.uniform(0.8, 1.2, D)
            t[p + n + ".bias"] = RNG.normal(0, 0.1, D)
        for m in ["x_r", "x_w", "x_k", "x_v", "x_a", "x_g"]:
            t[a + m] = RNG.uniform(0, 1, (1, 1, D))
        t[a + "k_k"] = RNG.uniform(0.5, 1.0, D)
        t[a + "k_a"] = RNG.uniform(0.8, 1.2, D)
        t[a + "r_k"] = RNG.normal(0, 0.3, (heads, c["head_dim"]))
        for m in ["r_proj", "k_proj", "v_proj", "o_proj"]:
            t[a + m + ".weight"] = RNG.normal(0, D ** -0.5, (D, D))
        lora(a + "w_lora", c["w"])
        lora(a + "a_lora", c["a"])
        if i > 0:
            lora(a + "v_lora", c["v"])
        lora(a + "g_lora", c["g"], bias=False)
        t[a + "g_norm.weight"] = RNG.uniform(0.8, 1.2, D)
        t[a + "g_norm.bias"] = RNG.normal(0, 0.1, D)
        t[p + "ffn.x_k"] = RNG.uniform(0, 1, D)
        t[p + "ffn.key.weight"] = RNG.normal(0, D ** -0.5, (c["ffn"], D))
        t[p + "ffn.value.weight"] = RNG.normal(0, c["ffn"] ** -0.5, (D, c["ffn"]))
    t["model.norm.weight"] = RNG.uniform(0.8, 1.2, D)
    t["model.norm.bias"] = RNG.normal(0, 0.1, D)
    t["lm_head.weight"] = RNG.normal(0, D ** -0.5, (c["vocab"], D))
    config = {
        "architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "attn": None,
        "hidden_size": D, "num_hidden_layers": c["layers"], "head_dim": c["head_dim"],
        "num_heads": None, "decay_low_rank_dim": c["w"], "a_low_rank_dim": c["a"],
        "v_low_rank_dim": c["v"], "gate_low_rank_dim": c["g"], "hidden_ratio": 2.0,
        "intermediate_size": c["ffn"], "hidden_act": "sqrelu", "norm_first": True,
        "norm_bias": True, "norm_eps": c["eps"], "vocab_size": c["vocab"],
        "tie_word_embeddings": False, "fuse_norm": True,
    }
    return config, t


def rwkv7_reference(c, t, tokens):
    D, N = c["hidden"], c["head_dim"]
    H = D // N
    g = {k: f32(v).reshape(-1) if k.endswith(("x_r", "x_w", "x_k", "x_v", "x_a", "x_g")) else f32(v)
         for k, v in t.items()}
    eps = c["eps"]
    att_prev = [np.zeros(D) for _ in range(c["layers"])]
    ffn_prev = [np.zeros(D) for _ in range(c["layers"])]
    S = [np.zeros((H, N, N)) for _ in range(c["layers"])]  # [head, value i, key j]

    def lora(name, x, act):
        out = g[name + ".lora.2.weight"] @ act(g[name + ".lora.0.weight"] @ x)
        return out + g[name + ".lora.2.bias"] if name + ".lora.2.bias" in g else out

    for tok in tokens:
        x = g["model.embeddings.weight"][tok]
        v_first = None
        for i in range(c["layers"]):
            p, a = f"model.layers.{i}.", f"model.layers.{i}.attn."
            if i == 0:
                x = layer_norm(x, g[p + "pre_norm.weight"], g[p + "pre_norm.bias"], eps)
            h = layer_norm(x, g[p + "attn_norm.weight"], g[p + "attn_norm.bias"], eps)
            dx = att_prev[i] - h
            att_prev[i] = h
            xr, xw, xk, xv, xa, xg = (h + dx * g[a + m] for m in
                                      ["x_r", "x_w", "x_k", "x_v", "x_a", "x_g"])
            r = g[a + "r_proj.weight"] @ xr
            k = g[a + "k_proj.weight"] @ xk
            v = g[a + "v_proj.weight"] @ xv
            # BlinkDL: w = -softplus(-(w0 + tanh(xw w1) w2)) - 0.5; decay = exp(-exp(w)).
            w = np.exp(-np.exp(-softplus(-lora(a + "w_lora", xw, np.tanh)) - 0.5))
            if i == 0:
                v_first = v
            else:
                v = v + (v_first - v) * sigmoid(lora(a + "v_lora", xv, lambda z: z))
            aa = sigmoid(lora(a + "a_lora", xa, lambda z: z))
            gate = lora(a + "g_lora", xg, sigmoid)
            kk = (k * g[a + "k_k"]).reshape(H, N)
            kk = kk / np.maximum(np.linalg.norm(kk, axis=1, keepdims=True), 1e-12)
            k = k * (1 + (aa - 1) * g[a + "k_a"])
            rh, wh, kh, vh, ah = (z.reshape(H, N) for z in (r, w, k, v, aa))
            o = np.zeros((H, N))
            for hd in range(H):
                s = S[i][hd]
                s[:] = (s * wh[hd][None, :] + (s @ -kk[hd])[:, None] * (kk[hd] * ah[hd])[None, :]
                        + np.outer(vh[hd], kh[hd]))
                o[hd] = s @ rh[hd]
            o = layer_norm(o, g[a + "g_norm.weight"].reshape(H, N),
                           g[a + "g_norm.bias"].reshape(H, N), eps * N)
            o = o + (rh * kh * g[a + "r_k"]).sum(axis=1, keepdims=True) * vh
            x = x + g[a + "o_proj.weight"] @ (o.reshape(D) * gate)
            f = layer_norm(x, g[p + "ffn_norm.weight"], g[p + "ffn_norm.bias"], eps)
            fk = f + (ffn_prev[i] - f) * g[p + "ffn.x_k"]
            ffn_prev[i] = f
            x = x + g[p + "ffn.value.weight"] @ (np.maximum(g[p + "ffn.key.weight"] @ fk, 0) ** 2)
    x = layer_norm(x, g["model.norm.weight"], g["model.norm.bias"], eps)
    return g["lm_head.weight"] @ x


# ---- Driver ---------------------------------------------------------------------------------

def relative_error(got, want):
    return np.max(np.abs(got - want)) / np.max(np.abs(want))


def check(binary, name, shape, make, reference, length):
    """Asserts that prefixd-hybrid's logits match the reference; returns tensors, tokens, logits."""
    config, tensors = make(shape)
    tokens = [int(v) for v in RNG.integers(0, config["vocab_size"], length)]
    with tempfile.TemporaryDirectory(prefix="hybrid-upstream-") as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        write_safetensors(os.path.join(d, "model.safetensors"), tensors)
        out = os.path.join(d, "forward.json")
        subprocess.run([binary, "forward", "--model", d, "--weights", d, "--threads", "1",
                        "--tokens", ",".join(map(str, tokens)), "--out", out], check=True)
        with open(out) as f:
            got = np.array(json.load(f)["logits"])
    want = reference(shape, tensors, tokens)
    err = relative_error(got, want)
    print(f"{name}: {length} tokens, logits max rel err {err:.2e}, argmax {got.argmax()} vs "
          f"{want.argmax()}")
    assert np.max(np.abs(want)) > 1e-3, "degenerate logits"
    assert err < 1e-4, f"{name}: prefixd-hybrid differs from the upstream math ({err:.2e})"
    assert got.argmax() == want.argmax()
    return tensors, tokens, got


def main():
    binary = sys.argv[1]
    for groups in (2, 1):  # 21 tokens: 2 chunks of 8 + 5
        shape = dict(MAMBA, groups=groups)
        tensors, tokens, got = check(binary, f"mamba2 n_groups={groups}", shape,
                                     mamba2_checkpoint, mamba2_reference, 21)
        # transformers' norm over all of d_inner: far off with two groups (so the check above
        # tells the two apart), the same with one.
        whole = relative_error(got, mamba2_reference(shape, tensors, tokens, norm_groups=1))
        print(f"  against transformers' norm over all of d_inner: max rel err {whole:.2e}")
        assert whole > 1e-2 if groups > 1 else whole < 1e-4
    check(binary, "rwkv7", RWKV, rwkv7_checkpoint, rwkv7_reference, 13)
    print("ok")


if __name__ == "__main__":
    main()
