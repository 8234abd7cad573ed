#!/usr/bin/python3
"""Prints the byte tables of docs/state-schemas.md from the published config values.

Every shape is per sequence (B = 1) and follows the canonical v1 array order of that page.
Run: /usr/bin/python3 docs/figures/state_schemas.py > /tmp/tables.md
"""

# Element kinds: "act" may be 16-bit (the runtime's activation or cache dtype), "f32" is always
# fp32 (the recurrences accumulate in it; narrowing it breaks bit-exact hydration).
ACT, F32 = "act", "f32"


def blob_bytes(arrays, half):
    """v1 blob size: 8-byte header, per array 4 (ndim) + 4*ndim + 4 (dtype) + data.
    half=False: every array fp32 (or bf16, which v1 widens to 4 bytes); half=True: the "act"
    arrays as fp16 (2 bytes), the "f32" arrays still fp32."""
    total = 8
    for _, shape, kind in arrays:
        n = 1
        for d in shape:
            n *= d
        size = 2 if (half and kind == ACT) else 4
        total += 8 + 4 * len(shape) + size * n
    return total


def elements(arrays):
    total = 0
    for _, shape, _ in arrays:
        n = 1
        for d in shape:
            n *= d
        total += n
    return total


def mamba1(d_model, expand=2, n=16, k=4):
    d_inner = expand * d_model
    return [("conv", (1, k - 1, d_inner), ACT), ("ssm", (1, d_inner, n), ACT)]


def mamba2(d_ssm, heads, head_dim, n, groups, k=4):
    assert heads * head_dim == d_ssm
    return [
        ("conv", (1, k - 1, d_ssm + 2 * groups * n), ACT),
        ("ssm", (1, heads, head_dim, n), ACT),
    ]


def gdn(hk, hv, dk=128, dv=128, k=4):
    return [
        ("conv", (1, k - 1, 2 * hk * dk + hv * dv), ACT),
        ("recurrent", (1, hv, dv, dk), F32),
    ]


def rwkv7(c, head=64):
    return [
        ("att_x_prev", (1, c), ACT),
        ("wkv", (1, c // head, head, head), F32),
        ("ffn_x_prev", (1, c), ACT),
    ]


def kda(heads, head_dim, k=4):
    proj = heads * head_dim
    return [
        ("q_conv", (1, k - 1, proj), ACT),
        ("k_conv", (1, k - 1, proj), ACT),
        ("v_conv", (1, k - 1, proj), ACT),
        ("recurrent", (1, heads, head_dim, head_dim), F32),
    ]


def rglru(width, k=4):
    return [("conv", (1, k - 1, width), ACT), ("rg_lru", (1, width), F32)]


def nemotron_counts(pattern):
    return pattern.count("M"), pattern.count("*"), pattern.count("-")


NEMOTRON_H_8B = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"

# (family, checkpoint, recurrent layers, attention layers, arrays per recurrent layer,
#  K/V values per token per attention layer, attention window or None)
MODELS = [
    ("Mamba", "state-spaces/mamba-130m", 24, 0, mamba1(768), 0, None),
    ("Mamba", "state-spaces/mamba-370m", 48, 0, mamba1(1024), 0, None),
    ("Mamba", "state-spaces/mamba-2.8b", 64, 0, mamba1(2560), 0, None),
    ("Mamba2", "state-spaces/mamba2-130m", 24, 0, mamba2(1536, 24, 64, 128, 1), 0, None),
    ("Mamba2", "state-spaces/mamba2-370m", 48, 0, mamba2(2048, 32, 64, 128, 1), 0, None),
    ("Jamba", "ai21labs/Jamba-v0.1", 28, 4, mamba1(4096), 2 * 8 * 128, None),
    # Falcon-H1: every layer is both; groups = 1 confirmed for 0.5B only (see the page).
    ("Falcon-H1", "tiiuae/Falcon-H1-0.5B", 36, 36, mamba2(1536, 24, 64, 128, 1), 2 * 2 * 64, None),
    ("Falcon-H1", "tiiuae/Falcon-H1-1.5B ¹", 24, 24, mamba2(3072, 48, 64, 256, 1), 2 * 2 * 128, None),
    ("Falcon-H1", "tiiuae/Falcon-H1-1.5B-Deep ¹", 66, 66, mamba2(1536, 24, 64, 256, 1), 2 * 2 * 128,
     None),
    ("Falcon-H1", "tiiuae/Falcon-H1-3B ¹", 32, 32, mamba2(4096, 32, 128, 256, 1), 2 * 2 * 128, None),
    ("Falcon-H1", "tiiuae/Falcon-H1-7B ¹", 44, 44, mamba2(3072, 24, 128, 256, 1), 2 * 2 * 128, None),
    ("Falcon-H1", "tiiuae/Falcon-H1-34B ¹", 72, 72, mamba2(4096, 32, 128, 256, 1), 2 * 4 * 128, None),
    ("Nemotron-H", "nvidia/Nemotron-H-8B-Base-8K", nemotron_counts(NEMOTRON_H_8B)[0],
     nemotron_counts(NEMOTRON_H_8B)[1], mamba2(8192, 128, 64, 128, 8), 2 * 8 * 128, None),
    ("RWKV7", "RWKV-7 0.1B (the seed's 168M)", 12, 0, rwkv7(768), 0, None),
    ("RWKV7", "fla-hub/rwkv7-0.4B-world", 24, 0, rwkv7(1024), 0, None),
    ("RWKV7", "RWKV-7 1.5B", 24, 0, rwkv7(2048), 0, None),
    ("Qwen3-Next", "Qwen/Qwen3-Next-80B-A3B", 36, 12, gdn(16, 32), 2 * 2 * 256, None),
    ("Qwen3.5", "Qwen/Qwen3.5-0.8B", 18, 6, gdn(16, 16), 2 * 2 * 256, None),
    ("Qwen3.5", "Qwen/Qwen3.5-4B", 24, 8, gdn(16, 32), 2 * 4 * 256, None),
    ("Plamo2", "pfnet/plamo-2-1b", 8, 8, mamba2(4096, 32, 128, 64, 0), 2 * 1 * 128, None),
    ("Kimi-Linear", "moonshotai/Kimi-Linear-48B-A3B", 20, 7, kda(32, 128), 512 + 64, None),
    ("RecurrentGemma", "google/recurrentgemma-2b", 18, 8, rglru(2560), 2 * 1 * 256, 2048),
    ("RecurrentGemma", "google/recurrentgemma-9b", 26, 12, rglru(4096), 2 * 1 * 256, 2048),
]


def mb(x):
    return f"{x / 1e6:.2f} MB"


def fmt(x):
    return f"{x:,}"


def shapes(arrays):
    return ", ".join(f"{name} [{', '.join(str(d) for d in shape)}]" for name, shape, _ in arrays)


def main():
    print("## Recurrent state per sequence (SSM.PREFIX blobs)\n")
    print("| checkpoint | recurrent layers | arrays, in blob order | elements / layer "
          "| blob / layer, fp32 or bf16 | blob / layer, fp16 | all layers, fp32 or bf16 "
          "| all layers, fp16 |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for _, name, n_rec, _, arrays, _, _ in MODELS:
        full, half = blob_bytes(arrays, False), blob_bytes(arrays, True)
        print(f"| {name} | {n_rec} | {shapes(arrays)} | {fmt(elements(arrays))} | {fmt(full)} "
              f"| {fmt(half)} | {fmt(n_rec * full)} ({mb(n_rec * full)}) "
              f"| {fmt(n_rec * half)} ({mb(n_rec * half)}) |")

    print("\n## Attention K/V per token (V-store rows)\n")
    print("| checkpoint | attention layers | values / token / layer | bytes / token, all layers, "
          "2-byte tier | L where K/V (2-byte) passes the fp32 recurrent state | window |")
    print("|---|---:|---:|---:|---:|---|")
    for _, name, n_rec, n_attn, arrays, kv, window in MODELS:
        if n_attn == 0:
            continue
        per_token = n_attn * kv * 2
        rec_total = n_rec * blob_bytes(arrays, False)
        cross = -(-rec_total // per_token)
        note = f"{window} (K/V stop growing at {mb(window * per_token)})" if window else "—"
        if window and cross > window:
            cross_text = f"never (window caps K/V below {mb(rec_total)})"
        else:
            cross_text = fmt(cross)
        print(f"| {name} | {n_attn} | {fmt(kv)} | {fmt(per_token)} | {cross_text} | {note} |")


if __name__ == "__main__":
    main()
